package chart

import (
	"encoding/json"
	"fmt"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// ValuesTable is the Markdown table of the chart's values: every leaf of
// values.yaml (and every list or map value) with its default and the text
// of its "# -- " comment, as helm-docs writes it. The chart's README holds
// it under "## Values" (`make manifests` writes it; a test checks it).
func ValuesTable(values []byte) (string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(values, &doc); err != nil {
		return "", fmt.Errorf("parsing values: %w", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return "", fmt.Errorf("values: want a mapping")
	}
	var b strings.Builder
	b.WriteString("| Key | Default | Description |\n|---|---|---|\n")
	if err := rows(&b, doc.Content[0], ""); err != nil {
		return "", err
	}
	return b.String(), nil
}

func rows(b *strings.Builder, m *yaml.Node, prefix string) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		key := prefix + k.Value
		desc := describe(k.HeadComment)
		// A documented map is one value (config, secrets); an undocumented
		// one is a group of values.
		if v.Kind == yaml.MappingNode && len(v.Content) > 0 && desc == "" {
			if err := rows(b, v, key+"."); err != nil {
				return err
			}
			continue
		}
		var val any
		if err := v.Decode(&val); err != nil {
			return fmt.Errorf("values %s: %w", key, err)
		}
		def, err := json.Marshal(val)
		if err != nil {
			return fmt.Errorf("values %s: %w", key, err)
		}
		d := string(def)
		if len(d) > 60 {
			d = "(see values.yaml)"
		}
		fmt.Fprintf(b, "| `%s` | `%s` | %s |\n", key, strings.ReplaceAll(d, "|", `\|`), desc)
	}
	return nil
}

// describe is the text of a "# -- " comment (its first line starts with
// "-- "), on one line.
func describe(comment string) string {
	lines := strings.Split(comment, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#")), "-- ") {
			start = i
		}
	}
	if start < 0 {
		return ""
	}
	var words []string
	for _, l := range lines[start:] {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#"))
		words = append(words, strings.TrimPrefix(l, "-- "))
	}
	return strings.ReplaceAll(strings.Join(words, " "), "|", `\|`)
}
