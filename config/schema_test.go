package config_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/config"
	"github.com/flotilla-cd/flotilla/pkg/config/configschema"
)

func TestSchemaIsCurrent(t *testing.T) {
	want, err := configschema.Generate("..")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(config.Schema, want) {
		t.Error("config/flotilla.schema.json is not what pkg/config's types give: run go generate ./config (make verify does)")
	}
}

func compile(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(config.Schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(configschema.ID, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(configschema.ID)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validate(s *jsonschema.Schema, data []byte) error {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// TestExamplesFollowTheSchema: every example configuration is valid by the
// schema an editor checks it with (the loader's own tests load them).
func TestExamplesFollowTheSchema(t *testing.T) {
	s := compile(t)
	files, err := filepath.Glob(filepath.Join("examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append([]string{"example.yaml"}, files...) {
		t.Run(f, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := validate(s, data); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		})
	}
}

// TestSchemaRefusesWhatTheLoaderRefuses: a field's wrong shape, which the
// loader refuses by its schema walk, is refused by the schema too, at the
// same path; and what the loader takes in a form of its own is taken.
func TestSchemaRefusesWhatTheLoaderRefuses(t *testing.T) {
	s := compile(t)
	tests := []struct {
		name, doc string
		wantPath  string // empty: valid
	}{
		{"an unknown field", "server:\n  listn: 127.0.0.1:8080\n", "/server"},
		{"an unknown top-level field", "fleets: {}\n", ""},
		{"a duration as a number", "server:\n  retention: 10\n", "/server/retention"},
		{"a duration that is not one", "server:\n  retention: 10 days\n", "/server/retention"},
		{"a duration", "server:\n  retention: 168h\n", "-"},
		{"a boolean as a string", "server:\n  anonymousRead: \"yes\"\n", "/server/anonymousRead"},
		{"a list as a mapping", "receivers: {name: x}\n", "/receivers"},
		{"approvals as a number", "fleet:\n  waves:\n  - name: prod\n    approvals: 2\n", "-"},
		{"approvals as a mapping", "fleet:\n  waves:\n  - name: prod\n    approvals: {required: 2, from: [group:release-managers], separationOfDuties: true}\n", "-"},
		{"approvals with an unknown field", "fleet:\n  waves:\n  - name: prod\n    approvals: {required: 2, who: [x]}\n", "/fleet/waves/0/approvals"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validate(s, []byte(tt.doc))
			switch {
			case tt.wantPath == "-":
				if err != nil {
					t.Errorf("refused: %v", err)
				}
			case err == nil:
				t.Errorf("taken; want refused at %q", tt.wantPath)
			case !strings.Contains(err.Error(), "at '"+tt.wantPath+"'"):
				t.Errorf("refused, but not at %q: %v", tt.wantPath, err)
			}
		})
	}
}
