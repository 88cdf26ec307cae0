package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// fixture is one real delivery body from events/intake/testdata.
type fixture struct {
	// Dir is its directory under events/intake/testdata (the sender it came from,
	// which is not always the receiver's type: ghcr for github, gitea for
	// forgejo); Name its file name.
	Dir, Name string
	Body      []byte
}

func (f fixture) String() string { return f.Dir + "/" + f.Name }

// loadFixtures reads the fixtures of dirs under testdata, in a stable order.
func loadFixtures(testdata string, dirs []string) ([]fixture, error) {
	var out []fixture
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(testdata, dir, "*.json"))
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("no fixtures in %s", filepath.Join(testdata, dir))
		}
		slices.Sort(files)
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				return nil, err
			}
			out = append(out, fixture{Dir: dir, Name: filepath.Base(file), Body: b})
		}
	}
	return out, nil
}

// decodeJSON decodes b keeping numbers as written (json.Number), so that a
// fixture's integers survive a round trip exactly.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

// encodeJSON encodes v without escaping <, > and & (senders see what a
// sender would send).
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
