package mdsection

import "testing"

func TestReplace(t *testing.T) {
	doc := "# Benchmarks\n\n## Reaction\n\nA\n\n## Reproduce\n\nR\n"
	for _, tc := range []struct {
		name, doc, heading, section, before, want string
	}{
		{"inserted before the given heading", doc, "## Image", "## Image\n\none", "## Reproduce",
			"# Benchmarks\n\n## Reaction\n\nA\n\n## Image\n\none\n## Reproduce\n\nR\n"},
		{"inserted before the first section", doc, "## Intake", "## Intake\n\ni\n", "",
			"# Benchmarks\n\n## Intake\n\ni\n## Reaction\n\nA\n\n## Reproduce\n\nR\n"},
		{"replaced up to the next section", "# B\n\n## Image\n\none\n## Reproduce\n\nR\n", "## Image", "## Image\n\ntwo\n", "## Reproduce",
			"# B\n\n## Image\n\ntwo\n## Reproduce\n\nR\n"},
		{"a heading that only starts another is not it", "# B\n\n## Images of others\n\nx\n", "## Image", "## Image\n\nnew\n", "",
			"# B\n\n## Image\n\nnew\n## Images of others\n\nx\n"},
		{"appended when there is no section", "# B\n", "## Image", "## Image\n\nnew\n", "## Reproduce", "# B\n\n## Image\n\nnew\n"},
	} {
		if got := replace(tc.doc, tc.heading, tc.section, tc.before); got != tc.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tc.name, got, tc.want)
		}
	}
}
