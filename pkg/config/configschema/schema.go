package configschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/invopop/jsonschema"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

const module = "github.com/flotilla-cd/flotilla"

// ID is the schema's $id: where config/flotilla.schema.json is published.
const ID = "https://raw.githubusercontent.com/flotilla-cd/flotilla/main/config/flotilla.schema.json"

var (
	durationType        = reflect.TypeFor[config.Duration]()
	approvalsType       = reflect.TypeFor[config.Approvals]()
	intOrStringType     = reflect.TypeFor[intstr.IntOrString]()
	quantityType        = reflect.TypeFor[resource.Quantity]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// Generate returns the configuration's JSON Schema, indented, ending in a
// newline. With root (the module's root directory, relative to the
// working directory: "." or "..", "../..") the fields' doc comments, read
// from pkg/config's sources, become their descriptions; without it the
// schema has the same shape and no descriptions.
func Generate(root string) ([]byte, error) {
	r := reflector()
	if root != "" {
		// invopop joins the module's path with each file's directory as
		// given: one made-up element per ".." keeps the join at the root.
		base := module
		for _, e := range strings.Split(filepath.ToSlash(filepath.Clean(root)), "/") {
			switch e {
			case "..":
				base += "/up"
			case ".":
			default:
				return nil, fmt.Errorf("root %q: want \".\" or \"..\" elements only", root)
			}
		}
		src := filepath.Join(root, "pkg", "config")
		if err := r.AddGoComments(base, src); err != nil {
			return nil, fmt.Errorf("reading the doc comments of %s: %w", src, err)
		}
		for k, c := range r.CommentMap {
			r.CommentMap[k] = withoutMarkers(c)
		}
	}
	s := r.Reflect(&config.Config{})
	nullable(s, map[*jsonschema.Schema]bool{})
	for _, d := range s.Definitions {
		nullable(d, map[*jsonschema.Schema]bool{})
	}
	s.ID = ID
	s.Title = "flotilla configuration"
	s.Description = "flotilla's configuration file (flotilla serve --config). The schema gives each field's shape; flotilla config check says what else is required."
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, fmt.Errorf("encoding the schema: %w", err)
	}
	return buf.Bytes(), nil
}

// withoutMarkers is a doc comment without its kubebuilder markers (the
// CRDs' schema hints, no description).
func withoutMarkers(c string) string {
	lines := strings.Split(c, "\n")
	lines = slices.DeleteFunc(lines, func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), "+kubebuilder:") })
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

func reflector() *jsonschema.Reflector {
	r := &jsonschema.Reflector{
		// Nothing is required by shape: config check says what is.
		RequiredFromJSONSchemaTags: true,
		// The loader refuses unknown fields (additionalProperties false).
		AllowAdditionalProperties: false,
	}
	r.Mapper = func(t reflect.Type) *jsonschema.Schema { return special(r, t) }
	return r
}

// special gives the schema of the types the loader reads in a form of
// their own (pkg/config's schema walk names the same ones); nil for the
// others, which are reflected by their fields.
func special(r *jsonschema.Reflector, t reflect.Type) *jsonschema.Schema {
	switch {
	case t == durationType:
		return &jsonschema.Schema{
			Type:        "string",
			Pattern:     `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`,
			Description: `A Go duration such as "10s", "1m30s" or "2h".`,
		}
	case t == intOrStringType:
		return &jsonschema.Schema{AnyOf: []*jsonschema.Schema{{Type: "integer"}, {Type: "string"}}}
	case t == quantityType:
		return &jsonschema.Schema{
			AnyOf:       []*jsonschema.Schema{{Type: "string", Pattern: `^[+-]?[0-9.]+([eE][+-]?[0-9]+|[numkMGTPE]i?|Ki)?$`}, {Type: "number"}},
			Description: `A Kubernetes quantity such as "1Gi" or "500m".`,
		}
	case t == approvalsType:
		// A number of approvers, or the mapping's fields: reflected by a
		// reflector that does not map Approvals again.
		inner := *r
		inner.Mapper = func(u reflect.Type) *jsonschema.Schema {
			if u == approvalsType {
				return nil
			}
			return special(r, u)
		}
		inner.DoNotReference = true
		fields := inner.ReflectFromType(t)
		fields.Version, fields.ID = "", ""
		return &jsonschema.Schema{
			AnyOf:       []*jsonschema.Schema{{Type: "integer", Minimum: json.Number("0")}, fields},
			Description: "A number of approvers, or {required, from, separationOfDuties}.",
		}
	case reflect.PointerTo(t).Implements(jsonUnmarshalerType) && t.Kind() == reflect.Struct:
		// Another type that decodes itself (metav1.Time, ...): the loader's
		// strict decode judges it.
		return &jsonschema.Schema{}
	}
	return nil
}

// nullable lets every field of s (and of the schemas inside it) be null,
// as the loader does: YAML's null, or a key with no value ("rateLimit:"),
// leaves a field unset, and a configuration written from Go types holds
// null for every nil pointer. Without it the schema refused files
// flotilla serves.
func nullable(s *jsonschema.Schema, seen map[*jsonschema.Schema]bool) {
	if s == nil || seen[s] {
		return
	}
	seen[s] = true
	if s.Properties != nil {
		for pair := s.Properties.Oldest(); pair != nil; pair = pair.Next() {
			p := pair.Value
			nullable(p, seen)
			inner := *p
			inner.Description = ""
			pair.Value = &jsonschema.Schema{AnyOf: []*jsonschema.Schema{&inner, {Type: "null"}}, Description: p.Description}
			seen[pair.Value] = true
		}
	}
	nullable(s.Items, seen)
	for _, a := range s.AnyOf {
		nullable(a, seen)
	}
}
