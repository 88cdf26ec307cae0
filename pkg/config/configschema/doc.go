// Package configschema reflects flotilla's configuration file, pkg/config's
// Config, into a JSON Schema (github.com/invopop/jsonschema) for editors:
// config/flotilla.schema.json, which `flotilla config schema` prints and
// config/example.yaml names in its yaml-language-server modeline.
//
// The schema says what the loader's schema walk (pkg/config's checkSchema)
// says: every field by its JSON name, no unknown field, durations as Go
// duration strings, approvals as a number or its mapping, ports as a number
// or a name, quantities as Kubernetes quantities. What needs more than a
// field's shape (required fields, references between fields, ranges) stays
// with `flotilla config check`: the schema requires nothing, so an editor
// never flags a file the loader would take.
package configschema
