package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// mutateBody returns a body made from f and what was done to it: mostly a
// structure-aware mutation (the fixture decoded, some values replaced by
// hostile ones, encoded again: valid JSON), sometimes a byte-level one or
// random bytes (invalid JSON, mostly), sometimes the fixture as it is.
func mutateBody(r *rand.Rand, f fixture) ([]byte, []string) {
	switch n := r.Intn(100); {
	case n < 8:
		return f.Body, nil
	case n < 80:
		doc, err := decodeJSON(f.Body)
		if err != nil {
			return mutateRaw(r, f.Body)
		}
		doc, what := mutateJSON(r, doc, mutationCount(r))
		if tooBig(doc) {
			// Growth compounds (an array grown with copies of itself); such
			// a document is not worth encoding: past the intake's 1 MiB all
			// bodies are the same 413.
			return bytes.Repeat(f.Body, 1+(1<<20)/len(f.Body)), append(what, "over 2 MiB: the fixture repeated past 1 MiB instead")
		}
		b, err := encodeJSON(doc)
		if err != nil {
			// Cannot happen with the values hostile.go makes; if it does,
			// the fixture goes out as it is and says so.
			return f.Body, []string{"encoding the mutated document failed: " + err.Error()}
		}
		return b, what
	case n < 94:
		return mutateRaw(r, f.Body)
	default:
		return randomBytes(r), []string{"random bytes"}
	}
}

// mutationCount is 1 to 3 mostly, up to 8 sometimes.
func mutationCount(r *rand.Rand) int {
	n := 1 + r.Intn(3)
	if r.Intn(4) == 0 {
		n += r.Intn(6)
	}
	return n
}

// node is one value in a decoded document and where it is.
type node struct {
	path []any // map keys (string) and array indexes (int) from the root
	key  string
	val  any
}

func (n node) String() string { return pathString(n.path) }

func pathString(path []any) string {
	var b strings.Builder
	b.WriteString("$")
	for _, p := range path {
		switch p := p.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", p)
		default:
			fmt.Fprintf(&b, ".%s", p)
		}
	}
	return b.String()
}

// Bounds of nodes: a document the mutator made deep or wide earlier is not
// walked to its end (paths would cost depth squared).
const (
	maxWalkDepth = 64
	maxWalkNodes = 4096
)

// nodes lists the values of doc, the root first, containers before their
// elements, down to maxWalkDepth and up to maxWalkNodes of them.
func nodes(doc any) []node {
	var out []node
	var walk func(v any, path []any, key string)
	walk = func(v any, path []any, key string) {
		if len(out) >= maxWalkNodes {
			return
		}
		out = append(out, node{path: path, key: key, val: v})
		if len(path) >= maxWalkDepth {
			return
		}
		switch c := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(c)) {
				walk(c[k], append(path[:len(path):len(path)], k), k)
			}
		case []any:
			for i, e := range c {
				walk(e, append(path[:len(path):len(path)], i), key)
			}
		}
	}
	walk(doc, nil, "")
	return out
}

// replaceAt applies f to the value at path in doc: f returns the new value,
// or false to remove it. It returns the new doc (the root may change).
func replaceAt(doc any, path []any, f func(old any) (any, bool)) any {
	v, keep := replaceIn(doc, path, f)
	if !keep {
		return nil
	}
	return v
}

func replaceIn(v any, path []any, f func(any) (any, bool)) (any, bool) {
	if len(path) == 0 {
		return f(v)
	}
	switch c := v.(type) {
	case map[string]any:
		k, _ := path[0].(string)
		nv, keep := replaceIn(c[k], path[1:], f)
		if keep {
			c[k] = nv
		} else {
			delete(c, k)
		}
		return c, true
	case []any:
		i, _ := path[0].(int)
		if i >= len(c) {
			return c, true
		}
		nv, keep := replaceIn(c[i], path[1:], f)
		if keep {
			c[i] = nv
			return c, true
		}
		return append(c[:i], c[i+1:]...), true
	}
	return v, true
}

// mutateJSON applies n mutations to doc, which it changes; it returns the
// new doc and what each mutation did.
func mutateJSON(r *rand.Rand, doc any, n int) (any, []string) {
	var what []string
	for range n {
		ns := nodes(doc)
		target := ns[r.Intn(len(ns))]
		// Payloads inside payloads (GAR's base64 Pub/Sub data, JSON in a
		// string) get their share: they are where the interesting fields
		// of those senders are.
		if r.Intn(2) == 0 {
			if nested := nestedNodes(ns); len(nested) > 0 {
				target = nested[r.Intn(len(nested))]
			}
		}
		var did string
		doc = replaceAt(doc, target.path, func(old any) (any, bool) {
			nv, keep, d := mutateValue(r, target.key, old, ns)
			did = d
			return nv, keep
		})
		what = append(what, target.String()+" "+did)
		if tooBig(doc) {
			break
		}
	}
	return doc, what
}

// maxDocSize bounds a mutated document: some are over the intake's 1 MiB
// (413), none is hundreds of them.
const maxDocSize = 2 << 20

// tooBig tells whether v encodes to more than maxDocSize, roughly.
func tooBig(v any) bool { return approxSize(v, maxDocSize) > maxDocSize }

// approxSize is about the size of v encoded, counted no further than just
// past limit: a document whose parts are shared many times over is big
// encoded, though small in memory.
func approxSize(v any, limit int) int {
	n := 0
	var walk func(v any) bool
	walk = func(v any) bool {
		switch c := v.(type) {
		case map[string]any:
			n += 2
			for k, e := range c {
				n += len(k) + 4
				if n > limit || !walk(e) {
					return false
				}
			}
		case []any:
			n += 2
			for _, e := range c {
				n++
				if n > limit || !walk(e) {
					return false
				}
			}
		case string:
			n += len(c) + 2
		case json.Number:
			n += len(c)
		default:
			n += 5
		}
		return n <= limit
	}
	walk(v)
	return n
}

// mutateValue mutates one value whose object key is key (or the key of the
// array it is in); others are the document's nodes, to borrow from.
func mutateValue(r *rand.Rand, key string, old any, others []node) (any, bool, string) {
	if s, ok := old.(string); ok && r.Intn(3) != 0 {
		if inner, enc, ok := nestedDoc(s); ok {
			inner, what := mutateJSON(r, inner, 1+r.Intn(3))
			if !tooBig(inner) {
				return enc(inner), true, "(nested: " + strings.Join(what, "; ") + ")"
			}
		}
	}
	switch op := r.Intn(20); {
	case op < 9: // a hostile value of the same kind
		nv := sameKindHostile(r, key, old)
		return nv, true, "= " + preview(nv)
	case op < 13: // any value, often of the wrong type
		nv := hostileValue(r)
		return nv, true, "= " + preview(nv)
	case op < 15:
		return nil, false, "removed"
	case op < 16: // another node's value
		nv := deepCopy(others[r.Intn(len(others))].val) // a copy: never a cycle
		return nv, true, "= " + preview(nv)
	case op < 18: // more of the same
		switch c := old.(type) {
		case []any:
			if len(c) > 0 {
				// Up to 200 more, and no more than about a megabyte. Copies,
				// not the element again: a later mutation in place must
				// change one value, not all of them (growth would compound).
				e := c[r.Intn(len(c))]
				times := min(1+r.Intn(200), max(1, (1<<20)/approxSize(e, 1<<20)))
				for range times {
					c = append(c, deepCopy(e))
				}
				return c, true, fmt.Sprintf("grown by %d copies of an element", times)
			}
		case map[string]any:
			k := pick(r, "id", "timestamp", "time", "tag", "digest", "ref", "__proto__", "", "extra"+strconv.Itoa(r.Intn(100)))
			nv := hostileValue(r)
			c[k] = nv
			return c, true, fmt.Sprintf("added %q = %s", k, preview(nv))
		}
		return []any{old, deepCopy(old)}, true, "wrapped in an array, twice"
	default:
		nv := map[string]any{"value": old}
		if r.Intn(2) == 0 {
			return []any{old}, true, "wrapped in an array"
		}
		return nv, true, "wrapped in an object"
	}
}

// sameKindHostile returns a hostile value of old's kind: a hostile time for
// a time (by its key or its look), a number for a number, a string for a
// string.
func sameKindHostile(r *rand.Rand, key string, old any) any {
	if timeish(key, old) && r.Intn(10) < 7 {
		return hostileTime(r)
	}
	switch old.(type) {
	case json.Number:
		return hostileNumber(r)
	case string:
		return hostileString(r)
	case bool:
		return pick[any](r, "true", json.Number("1"), nil, "yes")
	}
	return hostileValue(r)
}

var (
	timeKey   = regexp.MustCompile(`(?i)(time|date|timestamp|_at$|^at$|[a-z]At$|occur)`)
	timeValue = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ]`)
)

// timeish tells whether a value looks like a time, by its key or its text.
func timeish(key string, v any) bool {
	if timeKey.MatchString(key) {
		return true
	}
	s, ok := v.(string)
	return ok && timeValue.MatchString(s)
}

// nestedNodes are the string nodes that hold a JSON document of their own.
func nestedNodes(ns []node) []node {
	var out []node
	for _, n := range ns {
		if s, ok := n.val.(string); ok {
			if _, _, ok := nestedDoc(s); ok {
				out = append(out, n)
			}
		}
	}
	return out
}

// nestedDoc decodes a JSON object or array held in s, as JSON text or in
// base64 (standard or URL-safe, padded or not), and returns the function
// that encodes it back the same way.
func nestedDoc(s string) (any, func(any) string, bool) {
	if len(s) < 2 {
		return nil, nil, false
	}
	if s[0] == '{' || s[0] == '[' {
		if v, err := decodeJSON([]byte(s)); err == nil {
			return v, func(v any) string { b, _ := encodeJSON(v); return string(b) }, true
		}
		return nil, nil, false
	}
	if len(s) < 8 {
		return nil, nil, false
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		b, err := enc.DecodeString(s)
		if err != nil || len(b) == 0 || (b[0] != '{' && b[0] != '[') {
			continue
		}
		if v, err := decodeJSON(b); err == nil {
			return v, func(v any) string { b, _ := encodeJSON(v); return enc.EncodeToString(b) }, true
		}
	}
	return nil, nil, false
}

// preview is v for a mutation log: JSON, cut to 100 bytes.
func preview(v any) string {
	if approxSize(v, 1<<20) > 1<<20 {
		return fmt.Sprintf("(%T of over 1 MiB)", v)
	}
	b, err := encodeJSON(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	if len(b) > 100 {
		return fmt.Sprintf("%s... (%d bytes)", b[:100], len(b))
	}
	return string(b)
}

// deepCopy copies a decoded JSON value.
func deepCopy(v any) any {
	switch c := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(c))
		for k, e := range c {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(c))
		for i, e := range c {
			a[i] = deepCopy(e)
		}
		return a
	}
	return v
}
