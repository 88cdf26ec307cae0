package config

import _ "embed"

// Schema is flotilla.schema.json: the JSON Schema of flotilla's
// configuration file, for editors (yaml-language-server reads the modeline
// of example.yaml) and `flotilla config schema`. go generate writes it from
// pkg/config's types and doc comments (pkg/config/configschema); a test
// fails when it is not current.
//
//go:generate go run ../deploy/tools/configschema -out flotilla.schema.json -root ..
//go:embed flotilla.schema.json
var Schema []byte
