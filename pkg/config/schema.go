package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// checkSchema walks the YAML document against Config's Go type and reports,
// with line numbers and paths, every unknown field and every value of the
// wrong shape. The JSON decoder behind sigs.k8s.io/yaml would report only
// the first, matches field names case-insensitively and names no line.
func checkSchema(data []byte) error {
	dec := yamlv3.NewDecoder(strings.NewReader(string(data)))
	var doc yamlv3.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil // empty file: validation reports what is missing
	} else if err != nil {
		return err
	}
	var extra yamlv3.Node
	if err := dec.Decode(&extra); err == nil {
		return fmt.Errorf("line %d: want a single YAML document, found another", extra.Line)
	} else if !errors.Is(err, io.EOF) {
		return err
	}
	var w schemaWalker
	if len(doc.Content) > 0 {
		w.walk(doc.Content[0], reflect.TypeFor[Config](), "")
	}
	if len(w.problems) > 0 {
		return errors.New(strings.Join(w.problems, "\n"))
	}
	return nil
}

type schemaWalker struct {
	problems []string
	depth    int
}

var (
	durationType        = reflect.TypeFor[Duration]()
	intOrStringType     = reflect.TypeFor[intstr.IntOrString]()
	quantityType        = reflect.TypeFor[resource.Quantity]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	approvalsType       = reflect.TypeFor[Approvals]()
)

func (w *schemaWalker) addf(n *yamlv3.Node, path, format string, args ...any) {
	p := fmt.Sprintf("line %d: ", n.Line)
	if path != "" {
		p += path + ": "
	}
	w.problems = append(w.problems, p+fmt.Sprintf(format, args...))
}

func (w *schemaWalker) walk(n *yamlv3.Node, t reflect.Type, path string) {
	// Aliases may nest; a config has no business nesting them deeply.
	w.depth++
	defer func() { w.depth-- }()
	if w.depth > 64 {
		w.addf(n, path, "document nested too deeply")
		return
	}
	if n.Kind == yamlv3.AliasNode {
		w.walk(n.Alias, t, path)
		return
	}
	if n.Kind == yamlv3.ScalarNode && n.Tag == "!!null" {
		return // absent: defaults and validation deal with it
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == durationType:
		if n.Kind != yamlv3.ScalarNode {
			w.addf(n, path, "want a duration such as \"10s\", got a %s", kindName(n))
		} else if _, err := parseDuration(n.Value); err != nil {
			w.addf(n, path, "invalid duration %q: want a Go duration such as \"10s\" or \"1m30s\"", n.Value)
		}
	case t == intOrStringType:
		if n.Kind != yamlv3.ScalarNode {
			w.addf(n, path, "want a port number or name, got a %s", kindName(n))
		}
	case t == quantityType: // in Kubernetes' types, e.g. a pod template's volumes
		if n.Kind != yamlv3.ScalarNode {
			w.addf(n, path, "want a quantity such as \"1Gi\" or \"500m\", got a %s", kindName(n))
		} else if _, err := resource.ParseQuantity(n.Value); err != nil {
			w.addf(n, path, "invalid quantity %q: want a Kubernetes quantity such as \"1Gi\" or \"500m\"", n.Value)
		}
	case t == approvalsType: // a number, or its fields
		if n.Kind == yamlv3.MappingNode {
			w.walkStruct(n, t, path)
		} else if n.Kind != yamlv3.ScalarNode || n.Tag != "!!int" {
			w.addf(n, path, "want a number of approvers or {required, from, separationOfDuties}, got %s", describe(n))
		}
	case reflect.PointerTo(t).Implements(jsonUnmarshalerType):
		// Another type that decodes itself (metav1.Time, ...): the strict
		// decode that follows judges it.
	case t.Kind() == reflect.Struct:
		if n.Kind != yamlv3.MappingNode {
			w.addf(n, path, "want a mapping of fields, got a %s", kindName(n))
			return
		}
		w.walkStruct(n, t, path)
	case t.Kind() == reflect.Slice:
		if n.Kind != yamlv3.SequenceNode {
			w.addf(n, path, "want a list, got a %s", kindName(n))
			return
		}
		for i, e := range n.Content {
			w.walk(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	case t.Kind() == reflect.Map:
		if n.Kind != yamlv3.MappingNode {
			w.addf(n, path, "want a mapping, got a %s", kindName(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			w.walk(n.Content[i+1], t.Elem(), fmt.Sprintf("%s[%q]", path, n.Content[i].Value))
		}
	case t.Kind() == reflect.String:
		// Any scalar will do: sigs.k8s.io/yaml turns numbers and booleans
		// into strings for string fields.
		if n.Kind != yamlv3.ScalarNode {
			w.addf(n, path, "want a string, got a %s", kindName(n))
		}
	case t.Kind() == reflect.Bool:
		if n.Kind != yamlv3.ScalarNode || n.Tag != "!!bool" {
			w.addf(n, path, "want true or false, got %s", describe(n))
		}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		if n.Kind != yamlv3.ScalarNode || n.Tag != "!!int" {
			w.addf(n, path, "want an integer, got %s", describe(n))
		} else if _, err := strconv.ParseInt(n.Value, 0, t.Bits()); err != nil {
			w.addf(n, path, "integer %s out of range", n.Value)
		}
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		if n.Kind != yamlv3.ScalarNode || n.Tag != "!!int" {
			w.addf(n, path, "want an integer, got %s", describe(n))
		} else if _, err := strconv.ParseUint(n.Value, 0, t.Bits()); err != nil {
			w.addf(n, path, "want an integer 0..%d, got %s", uint64(1)<<t.Bits()-1, n.Value)
		}
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		if n.Kind != yamlv3.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
			w.addf(n, path, "want a number, got %s", describe(n))
		}
	}
}

func (w *schemaWalker) walkStruct(n *yamlv3.Node, t reflect.Type, path string) {
	fields := jsonFields(t)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Tag == "!!merge" { // "<<: *anchor" merges the anchor's fields
			w.walkMerge(v, t, path)
			continue
		}
		ft, ok := fields[k.Value]
		if !ok {
			w.addf(k, path, "unknown field %q%s", k.Value, suggest(k.Value, fields))
			continue
		}
		w.walk(v, ft, joinPath(path, k.Value))
	}
}

func (w *schemaWalker) walkMerge(v *yamlv3.Node, t reflect.Type, path string) {
	if v.Kind == yamlv3.SequenceNode {
		for _, e := range v.Content {
			w.walk(e, t, path)
		}
		return
	}
	w.walk(v, t, path)
}

// jsonFields maps the JSON names of t's fields to their types. The fields
// of an embedded struct with no JSON name (Kubernetes' `json:",inline"`, as
// corev1.Volume's VolumeSource) are t's, as encoding/json has them; t's own
// fields win.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	var promoted []map[string]reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if et := f.Type; f.Anonymous && name == "" {
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				promoted = append(promoted, jsonFields(et))
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	for _, p := range promoted {
		for name, ft := range p {
			if _, ok := fields[name]; !ok {
				fields[name] = ft
			}
		}
	}
	return fields
}

// suggest names the field the user probably meant when only case differs.
func suggest(key string, fields map[string]reflect.Type) string {
	for name := range fields {
		if strings.EqualFold(name, key) {
			return fmt.Sprintf(" (did you mean %q?)", name)
		}
	}
	return ""
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func kindName(n *yamlv3.Node) string {
	switch n.Kind {
	case yamlv3.MappingNode:
		return "mapping"
	case yamlv3.SequenceNode:
		return "list"
	default:
		return "scalar"
	}
}

func describe(n *yamlv3.Node) string {
	if n.Kind == yamlv3.ScalarNode {
		return strconv.Quote(n.Value)
	}
	return "a " + kindName(n)
}
