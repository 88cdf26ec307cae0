package gitops

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// source is a YAML file's bytes, its documents as yaml.v3 nodes, and the
// index that turns a node's line and column (the parser counts columns in
// characters, not bytes) into a byte offset. Edits read nodes from it and
// return patches on the bytes; the documents are never re-encoded.
type source struct {
	b     []byte
	lines []int // byte offset where each line starts: lines[0] is line 1
	docs  []*yaml.Node
}

func parseSource(b []byte) (*source, error) {
	s := &source{b: b, lines: []int{0}}
	for i, c := range b {
		if c == '\n' {
			s.lines = append(s.lines, i+1)
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return s, nil
		}
		if err != nil {
			return nil, permanentf("%w: %w", ErrInvalidYAML, err)
		}
		s.docs = append(s.docs, &n)
	}
}

// root is the top node of the first document that has one, or nil.
func (s *source) root() *yaml.Node {
	for _, d := range s.docs {
		if d.Kind == yaml.DocumentNode && len(d.Content) > 0 {
			return d.Content[0]
		}
	}
	return nil
}

// offset turns a 1-based line and character column into a byte offset.
func (s *source) offset(line, col int) (int, error) {
	if line < 1 || line > len(s.lines) {
		return 0, fmt.Errorf("line %d out of range", line)
	}
	off := s.lines[line-1]
	if line == 1 && bytes.HasPrefix(s.b, []byte("\ufeff")) { // the parser skips a BOM
		off += 3
	}
	for range col - 1 {
		if off >= len(s.b) || s.b[off] == '\n' {
			return 0, fmt.Errorf("line %d has no column %d", line, col)
		}
		_, w := utf8.DecodeRune(s.b[off:])
		off += w
	}
	return off, nil
}

// start is the byte offset of n's own text, after any anchor (&a) or tag
// (!!str) the parser counts as part of the node.
func (s *source) start(n *yaml.Node) (int, error) {
	off, err := s.offset(n.Line, n.Column)
	if err != nil {
		return 0, err
	}
	for off < len(s.b) && (s.b[off] == '&' || s.b[off] == '!') {
		for off < len(s.b) && !isBlank(s.b[off]) {
			off++
		}
		for off < len(s.b) && isBlank(s.b[off]) {
			off++
		}
	}
	return off, nil
}

// scalarSpan is the byte span of scalar n, quotes included. It only accepts
// single-line plain scalars and quoted scalars, and checks that the span
// reads back as n's value, so a splice can never land beside its target.
func (s *source) scalarSpan(n *yaml.Node) (start, end int, err error) {
	if n.Kind != yaml.ScalarNode || n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return 0, 0, fmt.Errorf("%w (%s)", ErrNotScalar, describe(n))
	}
	start, err = s.start(n)
	if err != nil {
		return 0, 0, err
	}
	switch {
	case n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0:
		end = quotedEnd(s.b, start)
		var v string
		if end < 0 || yaml.Unmarshal(s.b[start:end], &v) != nil || v != n.Value {
			return 0, 0, fmt.Errorf("%w: cannot locate quoted scalar %q at line %d", ErrNotScalar, n.Value, n.Line)
		}
	default:
		if n.Value == "" || !bytes.HasPrefix(s.b[start:], []byte(n.Value)) {
			return 0, 0, fmt.Errorf("%w: cannot locate plain scalar %q at line %d (multi-line?)", ErrNotScalar, n.Value, n.Line)
		}
		end = start + len(n.Value)
	}
	return start, end, nil
}

// quotedEnd is the offset just past the closing quote of the quoted scalar
// that starts at b[start], or -1.
func quotedEnd(b []byte, start int) int {
	if start >= len(b) {
		return -1
	}
	q := b[start]
	for i := start + 1; i < len(b); i++ {
		switch {
		case q == '"' && b[i] == '\\':
			i++
		case b[i] == q && q == '\'' && i+1 < len(b) && b[i+1] == '\'':
			i++
		case b[i] == q:
			return i + 1
		}
	}
	return -1
}

// patch replaces b[start:end] with text; start == end inserts.
type patch struct {
	start, end int
	text       string
}

func applyPatches(b []byte, ps []patch) ([]byte, error) {
	ps = slices.Clone(ps)
	slices.SortStableFunc(ps, func(x, y patch) int { return x.start - y.start })
	var out bytes.Buffer
	out.Grow(len(b) + 64)
	at := 0
	for _, p := range ps {
		if p.start < at || p.end < p.start || p.end > len(b) {
			return nil, fmt.Errorf("overlapping edits at byte %d", p.start)
		}
		out.Write(b[at:p.start])
		out.WriteString(p.text)
		at = p.end
	}
	out.Write(b[at:])
	return out.Bytes(), nil
}

// setScalar patches scalar n to hold v, keeping its quoting style; nil when
// it already does.
func (s *source) setScalar(n *yaml.Node, v string) (*patch, error) {
	if n.Kind == yaml.ScalarNode && n.Value == v {
		return nil, nil
	}
	if isEmpty(n) { // "tag:" with nothing after the colon
		off, err := s.start(n)
		if err != nil {
			return nil, err
		}
		text := render(v, 0)
		if off > 0 && s.b[off-1] == ':' {
			text = " " + text
		}
		return &patch{start: off, end: off, text: text}, nil
	}
	start, end, err := s.scalarSpan(n)
	if err != nil {
		return nil, err
	}
	return &patch{start: start, end: end, text: render(v, n.Style)}, nil
}

// render writes v as a YAML scalar in style: kept as it was when the value
// can be written that way, double-quoted otherwise (a plain 1.10 would read
// back as the number 1.1).
func render(v string, style yaml.Style) string {
	switch {
	case style&yaml.SingleQuotedStyle != 0 && strconv.CanBackquote(v):
		return "'" + strings.ReplaceAll(v, "'", "''") + "'"
	case style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0 && plainSafe(v):
		return v
	default:
		return strconv.Quote(v) // Go's escapes are all valid YAML escapes
	}
}

// plainSafe tells whether v reads back as the string v when written plain,
// in block and in flow context.
func plainSafe(v string) bool {
	if v == "" || strings.ContainsAny(v, "\n\r\t") {
		return false
	}
	for _, doc := range []string{v, "[" + v + "]"} {
		var n yaml.Node
		if yaml.Unmarshal([]byte(doc), &n) != nil || len(n.Content) != 1 {
			return false
		}
		sc := n.Content[0]
		if sc.Kind == yaml.SequenceNode {
			if len(sc.Content) != 1 {
				return false
			}
			sc = sc.Content[0]
		}
		if sc.Kind != yaml.ScalarNode || sc.Tag != "!!str" || sc.Style != 0 || sc.Value != v {
			return false
		}
	}
	return true
}

// lookup follows a dotted path ("api.image.tag") of mapping keys, or of
// sequence indexes, from n.
func lookup(n *yaml.Node, path string) (*yaml.Node, error) {
	for seg := range strings.SplitSeq(path, ".") {
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			next = mapValue(n, seg)
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
			}
		}
		if next == nil {
			return nil, permanentf("yaml path %q: %w (no %q in %s at line %d)", path, ErrPathNotFound, seg, describe(n), n.Line)
		}
		n = next
	}
	return n, nil
}

// mapValue is the value of key in mapping m, or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	if k := mapKey(m, key); k >= 0 {
		return m.Content[k+1]
	}
	return nil
}

// mapKey is the index in m.Content of key's key node, or -1.
func mapKey(m *yaml.Node, key string) int {
	if m == nil || m.Kind != yaml.MappingNode {
		return -1
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key {
			return i
		}
	}
	return -1
}

// scalarValue is the value of key in mapping m when it is a scalar, or "".
func scalarValue(m *yaml.Node, key string) string {
	if v := mapValue(m, key); v != nil && v.Kind == yaml.ScalarNode {
		return v.Value
	}
	return ""
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a sequence"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		if n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
			return "a block scalar"
		}
		return "a scalar"
	default:
		return "a document"
	}
}

// blockEnd is the offset where a line after block collection n can be
// inserted: past n's last node and past the more-indented lines that
// continue it, before trailing blank lines and before any less-indented
// line (a comment or key of the parent). atEOF tells that the offset is the
// end of a file whose last line has no newline.
func (s *source) blockEnd(n *yaml.Node) (off int, atEOF bool) {
	last := maxLine(n)
	for l := last + 1; l <= len(s.lines); l++ {
		indent, blank := s.indent(l)
		if blank {
			continue
		}
		if indent < n.Column {
			break
		}
		last = l
	}
	if last < len(s.lines) {
		return s.lines[last], false
	}
	return len(s.b), len(s.b) > 0 && s.b[len(s.b)-1] != '\n'
}

// insertLines is a patch inserting text (whole lines, newline-terminated)
// after block collection n.
func (s *source) insertLines(n *yaml.Node, text string) patch {
	off, atEOF := s.blockEnd(n)
	if atEOF {
		text = s.newline() + text
	}
	return patch{start: off, end: off, text: text}
}

// newline is the file's line ending: "\r\n" when its first line has one.
func (s *source) newline() string {
	if i := bytes.IndexByte(s.b, '\n'); i > 0 && s.b[i-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}

// indent is the number of leading spaces of line l, and whether the line is
// blank.
func (s *source) indent(l int) (int, bool) {
	start := s.lines[l-1]
	end := len(s.b)
	if l < len(s.lines) {
		end = s.lines[l]
	}
	line := s.b[start:end]
	n := 0
	for n < len(line) && line[n] == ' ' {
		n++
	}
	return n, len(bytes.TrimSpace(line)) == 0
}

// maxLine is the last line any node under n starts on (for a quoted scalar,
// ends on).
func maxLine(n *yaml.Node) int {
	m := n.Line
	if n.Kind == yaml.ScalarNode && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		m += strings.Count(n.Value, "\n") // at least the lines it folds
	}
	for _, c := range n.Content {
		m = max(m, maxLine(c))
	}
	return m
}

// flowClose is the offset of the bracket that closes flow collection n.
func (s *source) flowClose(n *yaml.Node) (int, error) {
	start, err := s.start(n)
	if err != nil {
		return 0, err
	}
	if start >= len(s.b) || (s.b[start] != '[' && s.b[start] != '{') {
		return 0, fmt.Errorf("no flow collection at line %d", n.Line)
	}
	depth := 0
	prev := byte(0) // last non-blank byte outside a scalar
	for i := start; i < len(s.b); i++ {
		c := s.b[i]
		switch {
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
			if depth == 0 {
				return i, nil
			}
		case (c == '"' || c == '\'') && bytes.IndexByte([]byte("[{,:?"), prev) >= 0:
			end := quotedEnd(s.b, i)
			if end < 0 {
				return 0, fmt.Errorf("unterminated quote at byte %d", i)
			}
			i = end - 1
		case c == '#' && (i == 0 || isBlank(s.b[i-1])):
			for i < len(s.b) && s.b[i] != '\n' {
				i++
			}
			continue
		}
		if !isBlank(c) {
			prev = c
		}
	}
	return 0, fmt.Errorf("unterminated flow collection at line %d", n.Line)
}

// appendFlow is a patch adding item as the last element of flow collection
// n: right after the current last element, or inside empty brackets.
func (s *source) appendFlow(n *yaml.Node, item string) (patch, error) {
	var off int
	if len(n.Content) == 0 {
		start, err := s.start(n)
		if err != nil {
			return patch{}, err
		}
		off = start + 1
	} else {
		var err error
		last := n.Content[len(n.Content)-1]
		if last.Kind == yaml.ScalarNode {
			_, off, err = s.scalarSpan(last)
		} else {
			off, err = s.flowClose(last)
			off++
		}
		if err != nil {
			return patch{}, err
		}
		item = ", " + item
	}
	return patch{start: off, end: off, text: item}, nil
}

// removePair is a patch deleting the pair at m.Content[k:k+2]: its whole
// line when it has one of its own in a block mapping, else (a flow mapping,
// or the first key of a sequence item) its value set to "".
func (s *source) removePair(m *yaml.Node, k int) (*patch, error) {
	key, val := m.Content[k], m.Content[k+1]
	if m.Style&yaml.FlowStyle == 0 && val.Kind == yaml.ScalarNode {
		ks, err := s.start(key)
		if err != nil {
			return nil, err
		}
		lineStart := s.lines[key.Line-1]
		ve, err := s.start(val)
		if !isEmpty(val) {
			_, ve, err = s.scalarSpan(val)
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimLeft(s.b[lineStart:ks], " ")) == 0 {
			end := len(s.b)
			if i := bytes.IndexByte(s.b[ve:], '\n'); i >= 0 {
				end = ve + i + 1
			}
			return &patch{start: lineStart, end: end}, nil
		}
	}
	return s.setScalar(val, "")
}

// isEmpty tells whether n is a null written as nothing at all ("tag:").
func isEmpty(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Style == 0 && n.Value == "" && n.Tag == "!!null"
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// run parses src, asks plan for patches, applies them, and checks the result:
// it must parse, and planning again on it must find nothing left to do. That
// check turns a splice that went wrong into an error instead of a commit.
func run(src []byte, plan func(*source) ([]patch, error)) ([]byte, bool, error) {
	s, err := parseSource(src)
	if err != nil {
		return nil, false, err
	}
	ps, err := plan(s)
	if err != nil || len(ps) == 0 {
		return src, false, err
	}
	out, err := applyPatches(src, ps)
	if err != nil {
		return nil, false, permanentf("applying edit: %w", err)
	}
	s2, err := parseSource(out)
	if err != nil {
		return nil, false, permanentf("edit produced invalid YAML: %w", err)
	}
	again, err := plan(s2)
	if err != nil {
		return nil, false, permanentf("checking edit: %w", err)
	}
	if len(again) > 0 {
		return nil, false, permanentf("%w: edit did not take (unsupported layout)", ErrInvalidYAML)
	}
	return out, true, nil
}
