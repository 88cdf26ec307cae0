package gitops

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

// Kustomize sets the image in a kustomization.yaml's images: list:
//
//	images:
//	  - name: registry.example.com/team/api
//	    newTag: "1.4.2"
//	    digest: sha256:3b5a...
//
// It updates every entry that matches (see Name) and appends one, in the
// list's own style (block or flow, indentation, quoting of newTag), when none
// does; a kustomization without images: gets the list. newTag becomes the
// image's tag and digest its digest; either is removed when the image has
// none, so the entry never pins a stale version.
type Kustomize struct {
	// Name selects the entry by its name field, exactly. The default selects
	// the entries whose name, or newName, is the image's repository.
	Name string
	// NewName, when set, is written to the entry's newName field (for a base
	// that names the image by a placeholder). The default leaves newName
	// alone.
	NewName string
	// TagOnly writes newTag without digest, removing a digest the entry has.
	TagOnly bool
}

// Apply implements Edit.
func (k Kustomize) Apply(src []byte, img Image) ([]byte, bool, error) {
	if err := img.Validate(); err != nil {
		return nil, false, err
	}
	if k.TagOnly {
		img = img.withoutDigest()
	}
	return run(src, func(s *source) ([]patch, error) { return k.plan(s, img) })
}

// field is one key of an images entry; value "" means the key must be absent.
type field struct{ key, value string }

func (k Kustomize) fields(img Image) []field {
	var fs []field
	if k.NewName != "" {
		fs = append(fs, field{"newName", k.NewName})
	}
	return append(fs, field{"newTag", img.Tag}, field{"digest", img.Digest})
}

func (k Kustomize) plan(s *source, img Image) ([]patch, error) {
	root := s.root()
	if root == nil || root.Kind != yaml.MappingNode {
		return nil, permanentf("%w: a kustomization must be a mapping", ErrInvalidYAML)
	}
	want := k.fields(img)
	name := k.Name
	if name == "" {
		name = img.Repository
	}
	ki := mapKey(root, "images")
	if ki < 0 {
		return k.addList(s, root, name, want)
	}
	images := root.Content[ki+1]
	if images.Kind == yaml.ScalarNode && images.Tag == "!!null" {
		return k.fillNull(s, root.Content[ki], images, name, want)
	}
	if images.Kind != yaml.SequenceNode {
		return nil, permanentf("yaml path %q: %w: want a sequence, not %s", "images", ErrInvalidYAML, describe(images))
	}
	var ps []patch
	matched := false
	for i, e := range images.Content {
		if e.Kind != yaml.MappingNode || !k.matches(e, img) {
			continue
		}
		matched = true
		eps, err := s.setFields(e, want, images, fmt.Sprintf("images.%d", i))
		if err != nil {
			return nil, err
		}
		ps = append(ps, eps...)
	}
	if matched {
		return ps, nil
	}
	entry := append([]field{{"name", name}}, want...)
	if images.Style&yaml.FlowStyle != 0 {
		p, err := s.appendFlow(images, flowEntry(entry, images))
		if err != nil {
			return nil, permanentf("yaml path %q: %w", "images", err)
		}
		return []patch{p}, nil
	}
	return []patch{s.insertLines(images, s.blockEntry(images, entry))}, nil
}

// matches tells whether images entry e is the one to set.
func (k Kustomize) matches(e *yaml.Node, img Image) bool {
	if k.Name != "" {
		return scalarValue(e, "name") == k.Name
	}
	for _, key := range []string{"name", "newName"} {
		if v := scalarValue(e, key); v != "" && config.SameImage(v, img.Repository) {
			return true
		}
	}
	return false
}

// setFields patches mapping e so that it holds want: values replaced in
// place, missing keys appended after its last key, keys with no value
// removed.
func (s *source) setFields(e *yaml.Node, want []field, list *yaml.Node, path string) ([]patch, error) {
	var ps []patch
	var add []field
	for _, f := range want {
		ki := mapKey(e, f.key)
		var p *patch
		var err error
		switch {
		case ki >= 0 && f.value == "":
			p, err = s.removePair(e, ki)
		case ki >= 0:
			p, err = s.setScalar(e.Content[ki+1], f.value)
		case f.value != "":
			add = append(add, f)
		}
		if err != nil {
			return nil, permanentf("yaml path %q: %w", path+"."+f.key, err)
		}
		if p != nil {
			ps = append(ps, *p)
		}
	}
	if len(add) == 0 {
		return ps, nil
	}
	if e.Style&yaml.FlowStyle != 0 {
		items := make([]string, len(add))
		for i, f := range add {
			items[i] = f.key + ": " + render(f.value, styleOf(list, f.key))
		}
		p, err := s.appendFlow(e, strings.Join(items, ", "))
		if err != nil {
			return nil, permanentf("yaml path %q: %w", path, err)
		}
		return append(ps, p), nil
	}
	var b strings.Builder
	indent := strings.Repeat(" ", e.Column-1)
	for _, f := range add {
		b.WriteString(indent + f.key + ": " + render(f.value, styleOf(list, f.key)) + s.newline())
	}
	return append(ps, s.insertLines(e, b.String())), nil
}

// addList adds images: with one entry to a kustomization that has none.
func (k Kustomize) addList(s *source, root *yaml.Node, name string, want []field) ([]patch, error) {
	entry := append([]field{{"name", name}}, want...)
	if root.Style&yaml.FlowStyle != 0 {
		p, err := s.appendFlow(root, "images: ["+flowEntry(entry, nil)+"]")
		if err != nil {
			return nil, permanentf("%w: %w", ErrInvalidYAML, err)
		}
		return []patch{p}, nil
	}
	indent := strings.Repeat(" ", root.Column-1)
	text := indent + "images:" + s.newline() + indentLines(s.blockEntry(nil, entry), indent)
	return []patch{s.insertLines(root, text)}, nil
}

// fillNull gives an "images:" with no value (or ~, null) its first entry.
func (k Kustomize) fillNull(s *source, key, null *yaml.Node, name string, want []field) ([]patch, error) {
	entry := append([]field{{"name", name}}, want...)
	if null.Value != "" {
		start, end, err := s.scalarSpan(null)
		if err != nil {
			return nil, permanentf("yaml path %q: %w", "images", err)
		}
		return []patch{{start: start, end: end, text: "[" + flowEntry(entry, nil) + "]"}}, nil
	}
	text := indentLines(s.blockEntry(nil, entry), strings.Repeat(" ", key.Column-1))
	if key.Line < len(s.lines) {
		off := s.lines[key.Line]
		return []patch{{start: off, end: off, text: text}}, nil
	}
	return []patch{{start: len(s.b), end: len(s.b), text: s.newline() + text}}, nil
}

// blockEntry writes a new block sequence item with list's indentation (the
// dash where list's dashes are, the keys where its first entry's keys are)
// and quoting; a list whose entries are flow mappings gets one too.
func (s *source) blockEntry(list *yaml.Node, entry []field) string {
	dash, keys := 0, 2
	if list != nil {
		dash = list.Column - 1
		for _, e := range list.Content {
			if e.Kind == yaml.MappingNode && e.Style&yaml.FlowStyle != 0 {
				return strings.Repeat(" ", dash) + "- " + flowEntry(entry, list) + s.newline()
			}
			if e.Kind == yaml.MappingNode {
				keys = max(e.Column-list.Column, 2)
				break
			}
		}
	}
	var b strings.Builder
	for i, f := range entry {
		if f.value == "" {
			continue
		}
		if i == 0 {
			b.WriteString(strings.Repeat(" ", dash) + "-" + strings.Repeat(" ", keys-1))
		} else {
			b.WriteString(strings.Repeat(" ", dash+keys))
		}
		b.WriteString(f.key + ": " + render(f.value, styleOf(list, f.key)) + s.newline())
	}
	return b.String()
}

// flowEntry writes {name: x, newTag: y} with list's quoting.
func flowEntry(entry []field, list *yaml.Node) string {
	var items []string
	for _, f := range entry {
		if f.value != "" {
			items = append(items, f.key+": "+render(f.value, styleOf(list, f.key)))
		}
	}
	return "{" + strings.Join(items, ", ") + "}"
}

// styleOf is the quoting style the list's entries use for key (plain when
// they do not have it), so an added newTag is quoted like its neighbours.
func styleOf(list *yaml.Node, key string) yaml.Style {
	if list == nil {
		return 0
	}
	for _, e := range list.Content {
		if v := mapValue(e, key); v != nil && v.Kind == yaml.ScalarNode {
			return v.Style & (yaml.DoubleQuotedStyle | yaml.SingleQuotedStyle)
		}
	}
	return 0
}

// indentLines prefixes every line of text with indent.
func indentLines(text, indent string) string {
	if indent == "" {
		return text
	}
	lines := strings.SplitAfter(text, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = indent + l
		}
	}
	return strings.Join(lines, "")
}
