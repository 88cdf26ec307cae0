package gitops

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

// Manifest sets the image in plain Kubernetes YAML, one or several documents
// (and kind: List items): every container and init container of a Pod,
// Deployment, ReplicaSet, StatefulSet, DaemonSet, Job or CronJob whose image
// is in the image's repository gets the new tag and digest. The repository is
// written as the file spells it ("nginx" stays "nginx", not
// "docker.io/library/nginx"). A file where no container runs the repository
// is an ErrNoMatch error: the application is configured to live elsewhere.
type Manifest struct {
	// Container, when set, limits the edit to containers of that name.
	// Default every container whose image matches.
	Container string
	// TagOnly writes repo:tag without the digest.
	TagOnly bool
}

// podSpecPaths are where each workload kind keeps its pod spec.
var podSpecPaths = map[string]string{
	"Pod":         "spec",
	"Deployment":  "spec.template.spec",
	"ReplicaSet":  "spec.template.spec",
	"StatefulSet": "spec.template.spec",
	"DaemonSet":   "spec.template.spec",
	"Job":         "spec.template.spec",
	"CronJob":     "spec.jobTemplate.spec.template.spec",
}

// Apply implements Edit.
func (m Manifest) Apply(src []byte, img Image) ([]byte, bool, error) {
	if err := img.Validate(); err != nil {
		return nil, false, err
	}
	if m.TagOnly {
		img = img.withoutDigest()
	}
	return run(src, func(s *source) ([]patch, error) { return m.plan(s, img) })
}

func (m Manifest) plan(s *source, img Image) ([]patch, error) {
	var ps []patch
	matched := 0
	var visit func(obj *yaml.Node, where string) error
	visit = func(obj *yaml.Node, where string) error {
		if obj.Kind != yaml.MappingNode {
			return nil
		}
		kind := scalarValue(obj, "kind")
		if strings.HasSuffix(kind, "List") { // List, DeploymentList, ...
			if items := mapValue(obj, "items"); items != nil && items.Kind == yaml.SequenceNode {
				for i, it := range items.Content {
					if err := visit(it, fmt.Sprintf("%s items.%d", where, i)); err != nil {
						return err
					}
				}
			}
			return nil
		}
		path, ok := podSpecPaths[kind]
		if !ok {
			return nil
		}
		spec, err := lookup(obj, path)
		if err != nil {
			return nil // a workload without a pod spec runs no image to set
		}
		for _, list := range []string{"initContainers", "containers"} {
			cs := mapValue(spec, list)
			if cs == nil || cs.Kind != yaml.SequenceNode {
				continue
			}
			for i, c := range cs.Content {
				if m.Container != "" && scalarValue(c, "name") != m.Container {
					continue
				}
				image := mapValue(c, "image")
				if image == nil || image.Kind != yaml.ScalarNode {
					continue
				}
				repo, _, _ := splitReference(image.Value)
				if !config.SameImage(repo, img.Repository) {
					continue
				}
				matched++
				p, err := s.setScalar(image, repo+img.suffix())
				if err != nil {
					return permanentf("%s %s: yaml path %q: %w", where, kind, fmt.Sprintf("%s.%s.%d.image", path, list, i), err)
				}
				if p != nil {
					ps = append(ps, *p)
				}
			}
		}
		return nil
	}
	for i, d := range s.docs {
		if d.Kind != yaml.DocumentNode || len(d.Content) == 0 {
			continue
		}
		if err := visit(d.Content[0], fmt.Sprintf("document %d", i+1)); err != nil {
			return nil, err
		}
	}
	if matched == 0 {
		what := "no container"
		if m.Container != "" {
			what = fmt.Sprintf("no container named %q", m.Container)
		}
		return nil, permanentf("%w: %s runs %s", ErrNoMatch, what, img.Repository)
	}
	return ps, nil
}
