package gitops

import (
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestRender(t *testing.T) {
	tests := []struct {
		value string
		style yaml.Style
		want  string
	}{
		{"1.4.2", 0, "1.4.2"},
		{"1.10", 0, `"1.10"`}, // a plain 1.10 is the number 1.1
		{"5", 0, `"5"`},
		{"true", 0, `"true"`},
		{"null", 0, `"null"`},
		{"", 0, `""`},
		{"v1.2@sha256:ab", 0, "v1.2@sha256:ab"},
		{"a: b", 0, `"a: b"`},
		{"a #b", 0, `"a #b"`},
		{"a,b", 0, `"a,b"`}, // not plain inside a flow collection
		{"-1", 0, `"-1"`},
		{"1.4.2", yaml.DoubleQuotedStyle, `"1.4.2"`},
		{`say "hi"`, yaml.DoubleQuotedStyle, `"say \"hi\""`},
		{"1.4.2", yaml.SingleQuotedStyle, "'1.4.2'"},
		{"it's", yaml.SingleQuotedStyle, "'it''s'"},
		{"1.4.2", yaml.TaggedStyle, "1.4.2"},
	}
	for _, tt := range tests {
		got := render(tt.value, tt.style)
		if got != tt.want {
			t.Errorf("render(%q, %v) = %s, want %s", tt.value, tt.style, got, tt.want)
		}
		var back string
		if err := yaml.Unmarshal([]byte(got), &back); err != nil || back != tt.value {
			t.Errorf("render(%q) = %s reads back as %q, %v", tt.value, got, back, err)
		}
	}
}

func TestOffsetCountsCharacters(t *testing.T) {
	s, err := parseSource([]byte("\ufeffé: ü\nnaïve: x\n"))
	if err != nil {
		t.Fatal(err)
	}
	root := s.root()
	for i, want := range map[int]string{1: "ü", 3: "x"} {
		start, end, err := s.scalarSpan(root.Content[i])
		if err != nil || string(s.b[start:end]) != want {
			t.Errorf("span of value %d = %q, %v; want %q", i, s.b[start:end], err, want)
		}
	}
}

func TestApplyPatchesRejectsOverlap(t *testing.T) {
	if _, err := applyPatches([]byte("abcdef"), []patch{{1, 4, "x"}, {3, 5, "y"}}); err == nil {
		t.Error("applyPatches accepted overlapping patches")
	}
	got, err := applyPatches([]byte("abcdef"), []patch{{4, 4, "+"}, {0, 1, "A"}, {6, 6, "!"}})
	if err != nil || string(got) != "Abcd+ef!" {
		t.Errorf("applyPatches = %q, %v; want Abcd+ef!", got, err)
	}
}
