package render

import (
	"cmp"
	"context"

	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-cd/flotilla/pkg/kubecd"
)

// kubecdRelease renders a release of KubeCD's files as they are at the
// checkout dir: its chart (a directory of the repository, or a reference
// pulled into cache) with the environment's and the release's values, then
// its resource files.
func kubecdRelease(ctx context.Context, cache chartCache, dir string, c Chart) ([]*unstructured.Unstructured, error) {
	k := c.KubeCD
	files, err := kubecd.Load(dir, k.EnvironmentsFile)
	if err != nil {
		return nil, permanentf("%w: %w", ErrRender, err)
	}
	env := files.Environment(k.Environment)
	if env == nil {
		return nil, permanentf("%w: %s has no environment %q at this commit", ErrRender, k.EnvironmentsFile, k.Environment)
	}
	r := env.Release(k.Release)
	if r == nil {
		return nil, permanentf("%w: environment %s has no release %q at this commit", ErrRender, k.Environment, k.Release)
	}
	hc := Chart{
		Dir: r.ChartDir, DefaultValues: env.DefaultValueFiles(*r), DefaultValueSet: env.DefaultValueSet(*r),
		ValuesFile: r.ValuesFile, Values: r.Values, ReleaseName: cmp.Or(c.ReleaseName, r.Name), Namespace: cmp.Or(c.Namespace, env.Namespace),
	}
	var objs []*unstructured.Unstructured
	switch {
	case r.Ref != nil:
		ch, err := pullChart(ctx, cache, *r.Ref)
		if err != nil {
			return nil, err
		}
		if objs, err = templateChart(dir, ch, hc); err != nil {
			return nil, err
		}
	case r.ChartDir != "":
		full, err := inside(dir, r.ChartDir)
		if err != nil {
			return nil, err
		}
		ch, err := loader.Load(full)
		if err != nil {
			return nil, permanentf("%w: loading chart %s: %w", ErrRender, r.ChartDir, err)
		}
		if objs, err = templateChart(dir, ch, hc); err != nil {
			return nil, err
		}
	}
	more, err := manifests(dir, r.ResourceFiles)
	if err != nil {
		return nil, err
	}
	return append(objs, more...), nil
}
