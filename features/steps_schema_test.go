package features

// `flotilla config schema` (#35 item 5): the JSON Schema an editor checks
// a configuration with. The step reads the schema the binary prints and
// applies it, as an editor's YAML language server does, to the very file
// the scenario's flotilla serves, and to that file with a misspelled
// field, which `flotilla config check` refuses too.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/cucumber/godog"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"
)

func (s *scenario) registerSchemaSteps(sc *godog.ScenarioContext) {
	sc.Step("^the schema `flotilla config schema` prints accepts the configuration flotilla serves, and refuses it with the application's field \"([^\"]*)\" misspelled \"([^\"]*)\", as `flotilla config check` does$", s.schemaJudgesConfig)
}

func (s *scenario) schemaJudgesConfig(ctx context.Context, field, typo string) error {
	out, code, err := runFlotilla(ctx, "config", "schema")
	if err != nil || code != 0 {
		return fmt.Errorf("flotilla config schema exited %d (%v):\n%.500s", code, err, out)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		return fmt.Errorf("flotilla config schema printed no JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("flotilla.schema.json", doc); err != nil {
		return err
	}
	schema, err := c.Compile("flotilla.schema.json")
	if err != nil {
		return fmt.Errorf("the printed schema does not compile: %w", err)
	}
	validate := func(path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		j, err := yaml.YAMLToJSON(b)
		if err != nil {
			return err
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
		if err != nil {
			return err
		}
		return schema.Validate(v)
	}
	if err := validate(s.w.flotilla.config); err != nil {
		return fmt.Errorf("the schema refuses the configuration flotilla serves: %w", err)
	}
	bad, err := s.editedConfig("misspelled.yaml", func(cfg map[string]any) error {
		apps, _ := cfg["applications"].([]any)
		if len(apps) == 0 {
			return fmt.Errorf("the configuration has no application")
		}
		app, _ := apps[0].(map[string]any)
		v, ok := app[field]
		if !ok {
			return fmt.Errorf("the application has no field %s", field)
		}
		delete(app, field)
		app[typo] = v
		return nil
	})
	if err != nil {
		return err
	}
	verr := validate(bad)
	if verr == nil || !strings.Contains(verr.Error(), typo) {
		return fmt.Errorf("the schema judged the configuration with %s misspelled %s: %v, want a refusal naming %s", field, typo, verr, typo)
	}
	out, code, err = configCheck(ctx, bad, false)
	if err != nil {
		return err
	}
	if code != 1 || !strings.Contains(out, typo) {
		return fmt.Errorf("config check of the misspelled configuration exited %d, want 1 naming %s:\n%s", code, typo, out)
	}
	return nil
}
