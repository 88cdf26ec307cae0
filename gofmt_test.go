package main

import (
	"bytes"
	"go/format"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGofmt keeps every Go file of the module as gofmt writes it (make
// verify rewrites them; this fails make test instead of letting an
// unformatted file land). testdata, hidden directories and node_modules are
// not the module's code.
func TestGofmt(t *testing.T) {
	unformatted, err := unformattedGoFiles(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range unformatted {
		t.Errorf("%s is not gofmt'd: run gofmt -w %s (or make verify)", path, path)
	}
}

// unformattedGoFiles returns the .go files under root whose bytes differ from
// go/format's (gofmt's) output, or that do not parse.
func unformattedGoFiles(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(name, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if formatted, err := format.Source(src); err != nil || !bytes.Equal(formatted, src) {
			out = append(out, filepath.ToSlash(path))
		}
		return nil
	})
	return out, err
}

func TestUnformattedGoFilesNamesThem(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"ok.go":            "package x\n\nfunc F() {}\n",
		"bad.go":           "package x\nfunc  G( ) {  }\n",
		"broken.go":        "package x\nfunc {\n",
		"testdata/skip.go": "package x\nfunc  H( ) {  }\n",
		"notes.txt":        "func  I( ) {  }\n",
	}
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := unformattedGoFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		got[i] = strings.TrimPrefix(got[i], filepath.ToSlash(dir)+"/")
	}
	if diff := cmp.Diff([]string{"bad.go", "broken.go"}, got); diff != "" {
		t.Errorf("unformatted files (-want +got):\n%s", diff)
	}
}
