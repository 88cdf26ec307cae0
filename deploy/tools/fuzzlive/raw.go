package main

import (
	"bytes"
	"fmt"
	"math/rand"
	"regexp"
	"strings"
)

// mutateRaw returns body changed at the byte level: cut, flipped, spliced,
// nested too deep for encoding/json, and so on. The result is rarely valid
// JSON; that is the point.
func mutateRaw(r *rand.Rand, body []byte) ([]byte, []string) {
	b := bytes.Clone(body)
	if len(b) == 0 {
		b = []byte("{}")
	}
	at := r.Intn(len(b))
	switch r.Intn(12) {
	case 0:
		return b[:at], []string{fmt.Sprintf("raw: cut at byte %d", at)}
	case 1:
		n := 1 + r.Intn(10)
		for range n {
			b[r.Intn(len(b))] ^= byte(1 << r.Intn(8))
		}
		return b, []string{fmt.Sprintf("raw: %d bits flipped", n)}
	case 2:
		ins := randomBytes(r)
		if len(ins) > 64 {
			ins = ins[:64]
		}
		return concat(b[:at], ins, b[at:]), []string{fmt.Sprintf("raw: %d random bytes inserted at %d", len(ins), at)}
	case 3:
		end := at + r.Intn(len(b)-at+1)
		return concat(b[:at], b[end:]), []string{fmt.Sprintf("raw: bytes %d-%d removed", at, end)}
	case 4:
		end := at + r.Intn(len(b)-at+1)
		return concat(b[:end], b[at:end], b[end:]), []string{fmt.Sprintf("raw: bytes %d-%d repeated", at, end)}
	case 5:
		depth := 10_001 + r.Intn(90_000)
		open, closing := "[", "]"
		if r.Intn(2) == 0 {
			open, closing = `{"a":`, "}"
		}
		return []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(closing, depth)),
			[]string{fmt.Sprintf("raw: nesting %d deep", depth)}
	case 6:
		return rawReplaceNumber(r, b)
	case 7:
		return concat([]byte("\ufeff"), b), []string{"raw: byte order mark"}
	case 8:
		return concat(b, pick(r, []byte("garbage"), []byte("\x00"), []byte("}"), []byte(`{"a":1}`), b)), []string{"raw: trailing data"}
	case 9:
		return rawInvalidUTF8(r, b)
	case 10:
		// A duplicate key, the first or the second value winning depending
		// on the decoder.
		if i := bytes.IndexByte(b, '{'); i >= 0 {
			return concat(b[:i+1], []byte(`"id":"dup","timestamp":"0000-01-01T00:00:00+01:00",`), b[i+1:]), []string{"raw: duplicate keys"}
		}
		return b, nil
	default:
		return bytes.Repeat(b, 2+r.Intn(8)), []string{"raw: body repeated"}
	}
}

var numberLiteral = regexp.MustCompile(`[0-9]{2,}`)

// rawReplaceNumber replaces a number (or digits in a string) with a literal
// no decoder can hold.
func rawReplaceNumber(r *rand.Rand, b []byte) ([]byte, []string) {
	locs := numberLiteral.FindAllIndex(b, -1)
	if len(locs) == 0 {
		return b, nil
	}
	l := locs[r.Intn(len(locs))]
	lit := pick(r, "1e999999", "-1e999999", strings.Repeat("9", 400), "0x1F", "1_000", "01", "-", "1.", ".5", "NaN", "Infinity")
	return concat(b[:l[0]], []byte(lit), b[l[1]:]), []string{fmt.Sprintf("raw: %q at byte %d", lit, l[0])}
}

// rawInvalidUTF8 puts bytes that are not UTF-8 inside a string.
func rawInvalidUTF8(r *rand.Rand, b []byte) ([]byte, []string) {
	start := r.Intn(len(b))
	j := bytes.IndexByte(b[start:], '"')
	if j < 0 {
		return concat(b, []byte{0xff, 0xfe}), []string{"raw: invalid UTF-8 appended"}
	}
	i := start + j
	bad := pick(r, []byte{0xff}, []byte{0xc0, 0x80}, []byte{0xed, 0xa0, 0x80}, []byte{0xf4, 0x90, 0x80, 0x80})
	return concat(b[:i+1], bad, b[i+1:]), []string{fmt.Sprintf("raw: invalid UTF-8 %x after byte %d", bad, i)}
}

// randomBytes is up to 4 KiB of random bytes, or of JSON-ish noise.
func randomBytes(r *rand.Rand) []byte {
	n := r.Intn(4096)
	if r.Intn(2) == 0 {
		b := make([]byte, n)
		r.Read(b)
		return b
	}
	const alphabet = `{}[]",:0123456789.eE-+truefalsnl \n\\abc`
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.Intn(len(alphabet))]
	}
	return b
}

func concat(parts ...[]byte) []byte {
	return bytes.Join(parts, nil)
}
