package configschema

import "testing"

// TestWithoutMarkers: the CRDs' kubebuilder markers of a doc comment are
// no part of the schema's description.
func TestWithoutMarkers(t *testing.T) {
	for in, want := range map[string]string{
		"Values override the files.\n+kubebuilder:validation:Schemaless\n+kubebuilder:pruning:PreserveUnknownFields": "Values override the files.",
		"A count\nor a percentage.":           "A count\nor a percentage.",
		"+kubebuilder:validation:Schemaless":  "",
		"Keeps + signs: a+b\n +kubebuilder:x": "Keeps + signs: a+b",
	} {
		if got := withoutMarkers(in); got != want {
			t.Errorf("withoutMarkers(%q) = %q, want %q", in, got, want)
		}
	}
}
