package pipelines

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/kube"
	"github.com/flotilla-cd/flotilla/pkg/version"
)

//go:embed tekton/*.yaml
var tektonFiles embed.FS

// Names of flotilla's Tekton objects.
const (
	PipelineName    = "flotilla-rollout"
	TaskApplyCanary = "flotilla-apply-canary"
	TaskBumpImage   = "flotilla-bump-image"
	// TaskApplyManifests takes a git application's cluster to a commit.
	TaskApplyManifests = "flotilla-apply-manifests"
)

// ImageRepository is flotilla's image; the embedded YAML names it without a
// tag and Manifests pins the tag.
const ImageRepository = "ghcr.io/flotilla-cd/flotilla"

// DefaultImage is the image the steps run: ImageRepository at this binary's
// version ("latest" for a development build).
func DefaultImage() string {
	v := version.Get().Version
	if v == "" || v == "devel" {
		v = "latest"
	}
	return ImageRepository + ":" + v
}

// Manifests returns the Tasks and the Pipeline as one multi-document YAML,
// comments included, each step running image (DefaultImage when empty).
func Manifests(image string) ([]byte, error) {
	if image == "" {
		image = DefaultImage()
	}
	names, err := fs.Glob(tektonFiles, "tekton/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("listing the embedded pipelines: %w", err)
	}
	slices.Sort(names) // the pipeline file sorts last, after the tasks it refers to
	slices.SortStableFunc(names, func(a, b string) int {
		return boolCmp(strings.HasPrefix(path.Base(a), "pipeline-"), strings.HasPrefix(path.Base(b), "pipeline-"))
	})
	var out bytes.Buffer
	for i, name := range names {
		b, err := tektonFiles.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(bytes.ReplaceAll(b, []byte("image: "+ImageRepository+"\n"), []byte("image: "+image+"\n")))
	}
	return out.Bytes(), nil
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}

// Resources are flotilla's Tekton objects, parsed with Tekton's own v1 types.
type Resources struct {
	Pipeline *tektonv1.Pipeline
	Tasks    []*tektonv1.Task
}

// Load parses the embedded Tasks and Pipeline, strictly (an unknown field is
// an error), with their steps running image (DefaultImage when empty).
func Load(image string) (Resources, error) {
	b, err := Manifests(image)
	if err != nil {
		return Resources{}, err
	}
	return Parse(b)
}

// Parse parses Tekton v1 Tasks and one Pipeline from a multi-document YAML.
func Parse(manifests []byte) (Resources, error) {
	objs, err := kube.Decode(manifests)
	if err != nil {
		return Resources{}, err
	}
	var r Resources
	for _, o := range objs {
		if gv := o.GetAPIVersion(); gv != tektonv1.SchemeGroupVersion.String() {
			return r, fmt.Errorf("%s %s: apiVersion %s, want %s", o.GetKind(), o.GetName(), gv, tektonv1.SchemeGroupVersion)
		}
		b, err := json.Marshal(o.Object)
		if err != nil {
			return r, fmt.Errorf("encoding %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		switch o.GetKind() {
		case "Task":
			var t tektonv1.Task
			if err := yaml.UnmarshalStrict(b, &t); err != nil {
				return r, fmt.Errorf("parsing Task %s: %w", o.GetName(), err)
			}
			r.Tasks = append(r.Tasks, &t)
		case "Pipeline":
			if r.Pipeline != nil {
				return r, fmt.Errorf("pipeline %s: only one Pipeline is expected, have %s", o.GetName(), r.Pipeline.Name)
			}
			var p tektonv1.Pipeline
			if err := yaml.UnmarshalStrict(b, &p); err != nil {
				return r, fmt.Errorf("parsing Pipeline %s: %w", o.GetName(), err)
			}
			r.Pipeline = &p
		default:
			return r, fmt.Errorf("%s %s: want a Task or a Pipeline", o.GetKind(), o.GetName())
		}
	}
	if r.Pipeline == nil {
		return r, fmt.Errorf("no Pipeline")
	}
	return r, nil
}

// Task returns the Task named name.
func (r Resources) Task(name string) (*tektonv1.Task, bool) {
	for _, t := range r.Tasks {
		if t.Name == name {
			return t, true
		}
	}
	return nil, false
}

// Objects returns the Tasks and the Pipeline as objects to apply in
// namespace, Tasks first.
func Objects(image, namespace string) ([]*unstructured.Unstructured, error) {
	b, err := Manifests(image)
	if err != nil {
		return nil, err
	}
	objs, err := kube.Decode(b)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		o.SetNamespace(namespace)
	}
	return objs, nil
}
