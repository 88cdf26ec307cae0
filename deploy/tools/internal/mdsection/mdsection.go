package mdsection

import (
	"os"
	"strings"
)

// Replace puts section (starting with heading) in place of the section of
// the Markdown file at path that starts with heading, up to the next "## "
// heading. When there is none, it goes before the heading before (e.g.
// "## Reproduce"), or, with before empty or absent, before the first "## "
// heading (after the title), else at the end.
func Replace(path, heading, section, before string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(replace(string(b), heading, section, before)), 0o644)
}

func replace(doc, heading, section, before string) string {
	if !strings.HasSuffix(section, "\n") {
		section += "\n"
	}
	if i := index(doc, heading); i >= 0 {
		end := len(doc)
		if j := strings.Index(doc[i+len(heading):], "\n## "); j >= 0 {
			end = i + len(heading) + j + 1
		}
		return doc[:i] + section + doc[end:]
	}
	if before != "" {
		if j := index(doc, before); j >= 0 {
			return doc[:j] + section + doc[j:]
		}
	}
	if j := strings.Index(doc, "\n## "); j >= 0 {
		return doc[:j+1] + section + doc[j+1:]
	}
	return doc + "\n" + section
}

// index finds heading at the start of a line.
func index(doc, heading string) int {
	if strings.HasPrefix(doc, heading+"\n") {
		return 0
	}
	if i := strings.Index(doc, "\n"+heading+"\n"); i >= 0 {
		return i + 1
	}
	return -1
}
