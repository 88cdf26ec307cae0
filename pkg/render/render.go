package render

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// Kinds of rendering (config.GitRenders).
const (
	Manifests = "manifests"
	Kustomize = "kustomize"
	Helm      = "helm"
	// KubeCD renders a release of KubeCD's files at the commit
	// (Chart.KubeCD names it): its chart and its resource files.
	KubeCD = "kubecd"
)

// ErrRender is a repository that does not render into objects.
var ErrRender = errors.New("render")

// Request says what one cluster applies from a checkout.
type Request struct {
	// Dir is the checkout's root.
	Dir string
	// Kind is Manifests (the default), Kustomize or Helm.
	Kind string
	// Paths are relative to Dir ("{cluster}" already replaced): files or
	// directories of manifests, or kustomization directories. For Helm
	// they are not rendered.
	Paths []string
	// Chart is the chart and its values, for Helm.
	Chart *Chart
}

// Chart is a chart in the checkout and its values.
type Chart struct {
	Dir string // relative to Request.Dir
	// DefaultValues and ValuesFile are values files relative to
	// Request.Dir; Values override them. A values file that does not exist
	// is an error.
	DefaultValues []string
	ValuesFile    string
	Values        map[string]any
	// DefaultValueSet are values between DefaultValues and ValuesFile
	// (KubeCD's environment defaultValues).
	DefaultValueSet map[string]any `json:",omitempty"`
	ReleaseName     string
	Namespace       string
	// KubeCD names a release of KubeCD's files, for render kubecd: the
	// chart, values and resource files are read from the commit.
	KubeCD *KubeCDRelease `json:",omitempty"`
}

// KubeCDRelease is a release of an environment of KubeCD's files.
type KubeCDRelease struct {
	// EnvironmentsFile is environments.yaml's path in the repository.
	EnvironmentsFile string
	Environment      string
	Release          string
}

// Render is RenderContext for requests that reach no network (no chart
// reference): it has no deadline.
func Render(req Request) ([]*unstructured.Unstructured, error) {
	return RenderContext(context.Background(), req)
}

// RenderContext returns the objects req describes, in the order they were
// found (for Helm, Helm's install order). A KubeCD release's chart
// reference is pulled within ctx (and cached, see pullChart).
func RenderContext(ctx context.Context, req Request) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	var err error
	switch req.Kind {
	case KubeCD:
		if req.Chart == nil || req.Chart.KubeCD == nil {
			return nil, permanentf("%w: render kubecd needs a release", ErrRender)
		}
		objs, err = kubecdRelease(ctx, defaultChartCache(), req.Dir, *req.Chart)
	case Manifests, "":
		objs, err = manifests(req.Dir, req.Paths)
	case Kustomize:
		objs, err = kustomize(req.Dir, req.Paths)
	case Helm:
		if req.Chart == nil {
			return nil, permanentf("%w: render helm needs a chart", ErrRender)
		}
		objs, err = helmTemplate(req.Dir, *req.Chart)
	default:
		return nil, permanentf("%w: unknown render %q (want manifests, kustomize, helm or kubecd)", ErrRender, req.Kind)
	}
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, permanentf("%w: %s renders no object", ErrRender, describe(req))
	}
	return objs, nil
}

func describe(req Request) string {
	if req.Kind == KubeCD && req.Chart != nil && req.Chart.KubeCD != nil {
		return "release " + req.Chart.KubeCD.Release + " of environment " + req.Chart.KubeCD.Environment
	}
	if req.Kind == Helm && req.Chart != nil {
		return "chart " + req.Chart.Dir
	}
	return strings.Join(req.Paths, ", ")
}

// inside resolves p against dir, refusing a path that leaves it (also by a
// symbolic link).
func inside(dir, p string) (string, error) {
	full := filepath.Join(dir, filepath.FromSlash(p))
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(full)
	if errors.Is(err, os.ErrNotExist) {
		return "", permanentf("%w: %s does not exist in the repository", ErrRender, p)
	}
	if err != nil {
		return "", permanentf("%w: %s: %w", ErrRender, p, err)
	}
	if real != root && !strings.HasPrefix(real, root+string(filepath.Separator)) {
		return "", permanentf("%w: %s leaves the repository", ErrRender, p)
	}
	return full, nil
}

// manifests reads the YAML (or JSON) documents of files and of the
// manifest files directly in directories.
func manifests(dir string, paths []string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, p := range paths {
		full, err := inside(dir, p)
		if err != nil {
			return nil, err
		}
		files := []string{full}
		if fi, err := os.Stat(full); err == nil && fi.IsDir() {
			files = nil
			entries, err := os.ReadDir(full)
			if err != nil {
				return nil, err
			}
			for _, e := range entries {
				if !e.IsDir() && slices.Contains([]string{".yaml", ".yml", ".json"}, filepath.Ext(e.Name())) {
					files = append(files, filepath.Join(full, e.Name()))
				}
			}
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			rel, _ := filepath.Rel(dir, f)
			objs, err := decode(filepath.ToSlash(rel), data)
			if err != nil {
				return nil, err
			}
			out = append(out, objs...)
		}
	}
	return out, nil
}

// decode splits a YAML stream into objects, skipping empty documents and
// Lists' wrappers (their items count).
func decode(name string, data []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 1; ; i++ {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		var m map[string]any
		if err == nil {
			// Through JSON, numbers stay integers where they are (int64),
			// as the API machinery expects.
			var j []byte
			if j, err = yaml.YAMLToJSON(doc); err == nil {
				err = utiljson.Unmarshal(j, &m)
			}
		}
		if err != nil {
			return nil, permanentf("%w: %s, document %d: %w", ErrRender, name, i, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.IsList() {
			l, err := u.ToList()
			if err != nil {
				return nil, permanentf("%w: %s, document %d: %w", ErrRender, name, i, err)
			}
			for j := range l.Items {
				out = append(out, &l.Items[j])
			}
			continue
		}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" && u.GetGenerateName() == "" {
			return nil, permanentf("%w: %s, document %d: not a Kubernetes object (apiVersion, kind and metadata.name are required)", ErrRender, name, i)
		}
		out = append(out, u)
	}
}

func permanentf(format string, args ...any) error {
	return fault.Permanent(fmt.Errorf(format, args...))
}
