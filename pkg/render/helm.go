package render

import (
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-cd/flotilla/pkg/kubecd"
)

// KubeVersion is the Kubernetes version charts see in
// .Capabilities.KubeVersion (Helm's library default is v1.20).
const KubeVersion = "v1.34.0"

// helmTemplate renders a chart as `helm template` does, client-only: its
// CRDs (crds/) first, then its templates in Helm's install order; hooks
// are left out (flotilla applies, it does not install releases).
func helmTemplate(dir string, c Chart) ([]*unstructured.Unstructured, error) {
	chartDir, err := inside(dir, c.Dir)
	if err != nil {
		return nil, err
	}
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, permanentf("%w: loading chart %s: %w", ErrRender, c.Dir, err)
	}
	return templateChart(dir, ch, c)
}

// templateChart renders a loaded chart with c's values (files relative
// to dir).
func templateChart(dir string, ch *chart.Chart, c Chart) ([]*unstructured.Unstructured, error) {
	vals, err := values(dir, c)
	if err != nil {
		return nil, err
	}
	if err := chartutil.ProcessDependenciesWithMerge(ch, vals); err != nil {
		return nil, permanentf("%w: chart %s: dependencies: %w", ErrRender, c.Dir, err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	if kv, err := chartutil.ParseKubeVersion(KubeVersion); err == nil {
		caps.KubeVersion = *kv
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: c.ReleaseName, Namespace: c.Namespace, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return nil, permanentf("%w: chart %s: values: %w", ErrRender, c.Dir, err)
	}
	files, err := engine.Render(ch, rv)
	if err != nil {
		return nil, permanentf("%w: chart %s: %w", ErrRender, c.Dir, err)
	}
	for k := range files {
		if strings.HasSuffix(k, "NOTES.txt") {
			delete(files, k)
		}
	}
	_, ms, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, permanentf("%w: chart %s: %w", ErrRender, c.Dir, err)
	}
	var out []*unstructured.Unstructured
	for _, crd := range ch.CRDObjects() {
		objs, err := decode(crd.Filename, crd.File.Data)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	for _, m := range ms {
		objs, err := decode(m.Name, []byte(m.Content))
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// values merges the chart's user values: DefaultValues files, then
// DefaultValueSet (KubeCD's environment key/values), then ValuesFile, then
// Values, later ones winning (maps merge, everything else is replaced), as
// `helm template -f a -f b --set ...` does.
func values(dir string, c Chart) (map[string]any, error) {
	out := map[string]any{}
	read := func(f string) error {
		full, err := inside(dir, f)
		if err != nil {
			return err
		}
		v, err := chartutil.ReadValuesFile(full)
		if err != nil {
			return permanentf("%w: values file %s: %w", ErrRender, f, err)
		}
		out = kubecd.MergeValues(out, v)
		return nil
	}
	for _, f := range c.DefaultValues {
		if f == "" {
			continue
		}
		if err := read(f); err != nil {
			return nil, err
		}
	}
	out = kubecd.MergeValues(out, c.DefaultValueSet)
	if c.ValuesFile != "" {
		if err := read(c.ValuesFile); err != nil {
			return nil, err
		}
	}
	return kubecd.MergeValues(out, c.Values), nil
}
