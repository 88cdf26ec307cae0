package gitops

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// KubeCDValue sets a release's value in a KubeCD release file to the
// image's tag, as KubeCD's upgrade check patches the file its trigger came
// from:
//
//	releases:
//	  - name: kafka
//	    values:
//	      - key: image.tag
//	        value: "4.0.1"
//
// The release is found by name under releases:. The entries of its
// values whose key is Key get the tag as their value; a release without
// such an entry gets one appended to its values (its values: list added
// when it has none), so the tag wins over its values file and chart, as
// KubeCD's values do. Only the tag is written, never a digest (KubeCD's
// values hold tags).
type KubeCDValue struct {
	// Release is the release's name. Required.
	Release string
	// Key is the value's dotted key, as the trigger's tagValue writes it.
	// Required.
	Key string
	// Accept, when set, is asked with an entry's value before it is
	// replaced: false leaves the file as it is (the branch moved since the
	// decision and holds a tag the trigger's track does not replace with
	// this one).
	Accept func(current string) bool `json:"-"`
}

var _ Edit = KubeCDValue{}

// Apply implements Edit.
func (k KubeCDValue) Apply(src []byte, img Image) ([]byte, bool, error) {
	if k.Release == "" || k.Key == "" {
		return nil, false, permanentf("%w: a KubeCD value needs a release and a key", ErrInvalid)
	}
	if err := img.Validate(); err != nil {
		return nil, false, err
	}
	if img.Tag == "" {
		return nil, false, permanentf("%w: image %s has no tag: KubeCD's values hold tags", ErrInvalid, img.Reference())
	}
	return run(src, func(s *source) ([]patch, error) { return k.plan(s, img.Tag) })
}

func (k KubeCDValue) plan(s *source, tag string) ([]patch, error) {
	root := s.root()
	if root == nil || root.Kind != yaml.MappingNode {
		return nil, permanentf("%w: a KubeCD release file must be a mapping", ErrInvalidYAML)
	}
	releases := mapValue(root, "releases")
	if releases == nil || releases.Kind != yaml.SequenceNode {
		return nil, permanentf("yaml path %q: %w (no releases list)", "releases", ErrPathNotFound)
	}
	at := -1
	for i, r := range releases.Content {
		if r.Kind == yaml.MappingNode && scalarValue(r, "name") == k.Release {
			at = i
		}
	}
	if at < 0 {
		return nil, permanentf("yaml path %q: %w (no release named %q)", "releases", ErrPathNotFound, k.Release)
	}
	release := releases.Content[at]
	path := fmt.Sprintf("releases.%d.values", at)
	entry := []field{{"key", k.Key}, {"value", tag}}
	values := mapValue(release, "values")
	switch {
	case values == nil:
		return k.addValues(s, release, path, entry)
	case values.Kind != yaml.SequenceNode:
		return nil, permanentf("yaml path %q: %w: want a list of key/value entries, not %s", path, ErrInvalidYAML, describe(values))
	}
	var ps []patch
	matched := false
	for i, e := range values.Content {
		if e.Kind != yaml.MappingNode || scalarValue(e, "key") != k.Key {
			continue
		}
		matched = true
		ep := fmt.Sprintf("%s.%d", path, i)
		v := mapValue(e, "value")
		if v != nil && v.Kind != yaml.ScalarNode {
			return nil, permanentf("yaml path %q: %w (%s)", ep+".value", ErrNotScalar, describe(v))
		}
		if v != nil && v.Value != tag && k.Accept != nil && !k.Accept(v.Value) {
			continue
		}
		eps, err := s.setFields(e, entry[1:], values, ep)
		if err != nil {
			return nil, err
		}
		ps = append(ps, eps...)
	}
	if matched {
		return ps, nil
	}
	if values.Style&yaml.FlowStyle != 0 {
		p, err := s.appendFlow(values, flowEntry(entry, values))
		if err != nil {
			return nil, permanentf("yaml path %q: %w", path, err)
		}
		return []patch{p}, nil
	}
	return []patch{s.insertLines(values, s.blockEntry(values, entry))}, nil
}

// addValues gives a release without values: its list of one entry.
func (k KubeCDValue) addValues(s *source, release *yaml.Node, path string, entry []field) ([]patch, error) {
	if release.Style&yaml.FlowStyle != 0 {
		p, err := s.appendFlow(release, "values: ["+flowEntry(entry, nil)+"]")
		if err != nil {
			return nil, permanentf("yaml path %q: %w", path, err)
		}
		return []patch{p}, nil
	}
	indent := strings.Repeat(" ", release.Column-1)
	text := indent + "values:" + s.newline() + indentLines(s.blockEntry(nil, entry), indent+"  ")
	return []patch{s.insertLines(release, text)}, nil
}
