package configschema

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGenerateRoots(t *testing.T) {
	for _, tc := range []struct {
		root    string
		wantErr string
		wantDoc bool
	}{
		{root: "", wantDoc: false},
		{root: "../../..", wantDoc: true},
		{root: "elsewhere", wantErr: `root "elsewhere"`},
	} {
		t.Run(tc.root, func(t *testing.T) {
			out, err := Generate(tc.root)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Generate(%q) = %v, want an error with %q", tc.root, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				ID   string         `json:"$id"`
				Defs map[string]any `json:"$defs"`
			}
			if err := json.Unmarshal(out, &doc); err != nil {
				t.Fatal(err)
			}
			if doc.ID != ID {
				t.Errorf("$id = %q, want %q", doc.ID, ID)
			}
			// A field's doc comment is its description with a root only.
			app, _ := json.Marshal(doc.Defs["Application"])
			if got := strings.Contains(string(app), `"description"`); got != tc.wantDoc {
				t.Errorf("Application has descriptions: %v, want %v", got, tc.wantDoc)
			}
		})
	}
}

// TestSpecialTypes: the types the loader reads in a form of their own
// have the shape it accepts (they are inlined where a field uses them).
func TestSpecialTypes(t *testing.T) {
	out, err := Generate("")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Defs map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	// shape is a schema's type, or its alternatives' ("|"), each
	// alternative's own alternatives in brackets.
	var shape func(raw json.RawMessage) string
	shape = func(raw json.RawMessage) string {
		var s struct {
			Type  string            `json:"type"`
			AnyOf []json.RawMessage `json:"anyOf"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		if s.Type != "" {
			return s.Type
		}
		var types []string
		for _, a := range s.AnyOf {
			if sub := shape(a); strings.Contains(sub, "|") {
				types = append(types, "("+sub+")")
			} else {
				types = append(types, sub)
			}
		}
		return strings.Join(types, "|")
	}
	got := map[string]string{
		"Wave.bakeTime":  shape(doc.Defs["Wave"].Properties["bakeTime"]),
		"Wave.approvals": shape(doc.Defs["Wave"].Properties["approvals"]),
	}
	// Each field may be null, as the loader takes it (unset).
	want := map[string]string{"Wave.bakeTime": "string|null", "Wave.approvals": "(integer|object)|null"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("shapes (-want +got):\n%s", diff)
	}
}
