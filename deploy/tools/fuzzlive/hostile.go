package main

import (
	"encoding/json"
	"math/rand"
	"strings"
)

// Hostile values the structure-aware mutator puts into fixtures. The times
// are the ones that once took flotilla down (outside years 0001-9999 once in
// UTC) and their neighbours.
var (
	hostileTimes = []string{
		"0000-01-01T00:00:00+01:00", // year 0 in UTC is year -1
		"9999-12-31T23:59:59-01:00", // year 10000 in UTC
		"287396-10-12T08:59:00Z",
		"0001-01-01T00:00:00Z",
		"0001-01-01T00:59:59+01:00",
		"9999-12-31T23:59:59Z",
		"9999-12-31T23:59:59.999999999Z",
		"-0001-01-01T00:00:00Z",
		"+10000-01-01T00:00:00Z",
		"10000-01-01T00:00:00Z",
		"1969-12-31T23:59:59Z",
		"1970-01-01T00:00:00Z",
		"2026-13-45T25:61:61Z",
		"2026-02-30T00:00:00Z",
		"2026-01-02T15:04:05.123456789123Z",
		"2026-01-02T15:04:05+0100",
		"2026-01-02T15:04:05+24:00",
		"2026-01-02T15:04:05-99:99",
		"2026-01-02 15:04:05",
		"2026-01-02",
		"15:04:05",
		"Mon, 02 Jan 2026 15:04:05 GMT",
		"now",
		"",
		"T",
		"0",
		"9007199254740993",
		"-62135596801",
		"253402300800",
	}
	hostileNumbers = []string{
		"9007199254740993",     // 2^53 + 1: not a float64
		"-9007199254740993",    //
		"1767366245000",        // unix ms where seconds are expected
		"1767366245000000000",  // unix ns
		"253402300800",         // 10000-01-01 in unix seconds
		"253402300799999",      // 9999-12-31 in unix ms
		"8210266876800000",     // unix ms far beyond year 9999
		"-62135596801",         // before year 1 in unix seconds
		"-62135596801000",      //
		"9223372036854775807",  // max int64
		"9223372036854775808",  // max int64 + 1
		"-9223372036854775809", // min int64 - 1
		"18446744073709551616", // 2^64
		"1e308", "-1e308", "1e400", "-1e400", "1e-400",
		"0", "-0", "-1", "0.5", "-0.0000001", "1.0e+2",
		"123456789012345678901234567890",
	}
	hostileStrings = []string{
		"", " ", "null", "true", "0", "-1", "NaN", "Infinity",
		"\u0000", "a\u0000b", "\ufeff", "\u202eevil", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "日本語/レジストリ", "e\u0301", "\U0010ffff",
		"\n", "\r\n", "a\nb", "\t",
		"../../../../etc/passwd", "..", "/", "//", "a//b", "%00", "%2F", "%", "%zz",
		"sha256:", "sha256:zz", "sha256:" + strings.Repeat("0", 64), "sha512:" + strings.Repeat("f", 128),
		"md5:d41d8cd98f00b204e9800998ecf8427e",
		"@sha256:" + strings.Repeat("a", 64),
		"registry.example.com:99999/shop/api", "localhost:0/x", "127.0.0.1:5000", ":5000/x", "[::1]:5000/x",
		"UPPER/Case:Tag", "shop/api:1.4.2@sha256:" + strings.Repeat("b", 64), "a:b:c", "-leading-dash",
		strings.Repeat("t", 129), strings.Repeat("a/", 200) + "b",
		"refs/heads/", "refs/tags/", "refs/heads/../../x", "refs/heads/main\x00",
		"0000000000000000000000000000000000000000", strings.Repeat("0", 64),
		"pkg:oci/", "pkg:oci/api@sha256%3A?repository_url=&tag=", "pkg:docker/%", "pkg:oci/a?repository_url=%zz",
		"https://", "http://[::1", "javascript:alert(1)", "file:///etc/passwd",
		"{\"a\":1}", "[1,2", "\\", "\"",
		"Promotion completed!", "Rolling back", "Canary failed!", "New revision detected!",
		"INSERT", "DELETE", "PUSH", "SUCCESS", "push", "pushed",
	}
)

// hostileString returns a hostile string: from the list, a long one, or
// garbage.
func hostileString(r *rand.Rand) string {
	switch n := r.Intn(100); {
	case n < 3:
		return strings.Repeat(pick(r, "A", "é", "𝔘", "/", "\u0000"), 100_000/4+r.Intn(100_000))
	case n < 8:
		return strings.Repeat(pick(r, "a", "1", "ab/"), 200+r.Intn(5000))
	case n < 18:
		b := make([]byte, 1+r.Intn(64))
		r.Read(b)
		return string(b) // invalid UTF-8, mostly: encoding/json makes it U+FFFD
	case n < 30:
		return pick(r, hostileTimes...)
	default:
		return pick(r, hostileStrings...)
	}
}

func hostileTime(r *rand.Rand) any {
	if r.Intn(4) == 0 {
		return json.Number(pick(r, hostileNumbers...))
	}
	return pick(r, hostileTimes...)
}

func hostileNumber(r *rand.Rand) any {
	if r.Intn(8) == 0 {
		return pick(r, hostileNumbers...) // a number as a string
	}
	return json.Number(pick(r, hostileNumbers...))
}

// maxNesting keeps generated nesting under encoding/json's limit (10,000),
// so structure-aware mutations stay JSON the fuzzer can encode. Raw
// mutations go deeper.
const maxNesting = 9000

// hostileValue returns a value of any JSON type, often of the wrong one.
func hostileValue(r *rand.Rand) any {
	switch r.Intn(14) {
	case 0:
		return nil
	case 1:
		return r.Intn(2) == 0
	case 2:
		return []any{}
	case 3:
		return map[string]any{}
	case 4:
		return nested(r.Intn(2) == 0, 1+r.Intn(maxNesting))
	case 5:
		arr := make([]any, 1+r.Intn(20_000))
		for i := range arr {
			arr[i] = json.Number("1")
		}
		return arr
	case 6:
		return map[string]any{"": nil, "\u0000": "x", strings.Repeat("k", 1000): []any{nil}}
	case 7, 8:
		return hostileNumber(r)
	case 9:
		return hostileTime(r)
	default:
		return hostileString(r)
	}
}

// nested is depth arrays ([[[...]]]) or objects ({"a":{"a":...}}).
func nested(arrays bool, depth int) any {
	var v any = json.Number("1")
	for range depth {
		if arrays {
			v = []any{v}
		} else {
			v = map[string]any{"a": v}
		}
	}
	return v
}
