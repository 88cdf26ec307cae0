package render

import (
	"regexp"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Image is a container image an object runs.
type Image struct {
	Object    string // "Kind namespace/name" (or "Kind name")
	Container string
	Image     string
}

// podSpecPaths are where the kinds that run pods keep their pod spec.
var podSpecPaths = map[string][]string{
	"Pod":                   {"spec"},
	"Deployment":            {"spec", "template", "spec"},
	"StatefulSet":           {"spec", "template", "spec"},
	"DaemonSet":             {"spec", "template", "spec"},
	"ReplicaSet":            {"spec", "template", "spec"},
	"ReplicationController": {"spec", "template", "spec"},
	"Job":                   {"spec", "template", "spec"},
	"CronJob":               {"spec", "jobTemplate", "spec", "template", "spec"},
}

// Images lists the container images (init and ephemeral containers
// included) of the objects that run pods.
func Images(objs []*unstructured.Unstructured) []Image {
	var out []Image
	for _, o := range objs {
		path, ok := podSpecPaths[o.GetKind()]
		if !ok {
			continue
		}
		obj := o.GetKind() + " " + o.GetName()
		if ns := o.GetNamespace(); ns != "" {
			obj = o.GetKind() + " " + ns + "/" + o.GetName()
		}
		for _, field := range []string{"initContainers", "containers", "ephemeralContainers"} {
			cs, _, _ := unstructured.NestedSlice(o.Object, append(path[:len(path):len(path)], field)...)
			for _, c := range cs {
				m, _ := c.(map[string]any)
				img, _ := m["image"].(string)
				n, _ := m["name"].(string)
				out = append(out, Image{Object: obj, Container: n, Image: img})
			}
		}
	}
	return out
}

// CheckImages refuses objects that run an image whose repository none of
// allowed (Go regular expressions, each matched against the whole
// repository) matches; no pattern allows any image. The error is a
// permanent ErrRender naming the object, container and image.
func CheckImages(objs []*unstructured.Unstructured, allowed []string) error {
	if len(allowed) == 0 {
		return nil
	}
	res := make([]*regexp.Regexp, 0, len(allowed))
	for _, p := range allowed {
		re, err := regexp.Compile(`^(?:` + p + `)$`)
		if err != nil {
			return permanentf("%w: allowed image pattern %q: %w", ErrRender, p, err)
		}
		res = append(res, re)
	}
	for _, img := range Images(objs) {
		ref, err := name.ParseReference(img.Image)
		if err != nil {
			return permanentf("%w: %s, container %s: image %q: %w", ErrRender, img.Object, img.Container, img.Image, err)
		}
		repo := ref.Context().Name()
		if !matchesAny(res, repo) {
			return permanentf("%w: %s, container %s: image %s is not allowed (repository %s matches none of %v)",
				ErrRender, img.Object, img.Container, img.Image, repo, allowed)
		}
	}
	return nil
}

func matchesAny(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}
