package embedded

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"k8s.io/apimachinery/pkg/selection"
)

// nextRef finds the first Tekton variable reference $(ref) in s, ref
// holding none of "(", ")" and "$": the text before it, the ref and the
// text after it. ok is false when s holds none. It is what the regular
// expression `\$\(([^()$]+)\)` matches, without a regexp engine: it runs
// for every param of every run (a fifth of the embedded executor's CPU
// was the regexp's).
func nextRef(s string) (before, ref, after string, ok bool) {
	for off := 0; ; {
		i := strings.Index(s[off:], "$(")
		if i < 0 {
			return "", "", "", false
		}
		start := off + i
		j := strings.IndexAny(s[start+2:], "()$")
		if j > 0 && s[start+2+j] == ')' {
			return s[:start], s[start+2 : start+2+j], s[start+3+j:], true
		}
		off = start + 1
	}
}

// bracketRef rewrites params["x"] and params['x'] to params.x.
var bracketRef = regexp.MustCompile(`^(\w+)\[["']([^"']+)["']\]$`)

// normalizeRef turns a reference into its dotted form: params.x,
// tasks.t.results.r, results.r.path, context.pipelineRun.name.
func normalizeRef(ref string) string {
	ref = strings.TrimSpace(ref)
	if !strings.Contains(ref, "[") {
		return ref
	}
	if m := bracketRef.FindStringSubmatch(ref); m != nil {
		return m[1] + "." + m[2]
	}
	return ref
}

// vars resolves dotted references; ok is false for a reference it does not
// know.
type vars func(ref string) (value string, ok bool)

// substitute replaces every $(ref) in s. A reference vars does not know is
// a permanent error: Tekton would refuse it too.
func substitute(s string, v vars) (string, error) {
	if !strings.Contains(s, "$(") {
		return s, nil
	}
	var b strings.Builder
	for {
		before, raw, after, ok := nextRef(s)
		if !ok {
			break
		}
		ref := normalizeRef(raw)
		val, ok := v(ref)
		if !ok {
			return "", fault.Permanent(fmt.Errorf("unknown variable $(%s)", ref))
		}
		b.WriteString(before)
		b.WriteString(val)
		s = after
	}
	if b.Len() == 0 {
		return s, nil
	}
	b.WriteString(s)
	return b.String(), nil
}

// substituteAll substitutes in each string of ss, in place.
func substituteAll(ss []string, v vars) error {
	for i := range ss {
		var err error
		if ss[i], err = substitute(ss[i], v); err != nil {
			return err
		}
	}
	return nil
}

// resultRefs lists the tasks.<task>.results.<result> references in s, as
// [task, result] pairs.
func resultRefs(s string) [][2]string {
	if !strings.Contains(s, "$(tasks") {
		return nil
	}
	var out [][2]string
	for {
		_, raw, after, ok := nextRef(s)
		if !ok {
			return out
		}
		if t, r, ok := parseResultRef(normalizeRef(raw)); ok {
			out = append(out, [2]string{t, r})
		}
		s = after
	}
}

// parseResultRef splits tasks.<task>.results.<result>.
func parseResultRef(ref string) (task, result string, ok bool) {
	parts := strings.SplitN(ref, ".", 4)
	if len(parts) != 4 || parts[0] != "tasks" || parts[2] != "results" {
		return "", "", false
	}
	return parts[1], parts[3], true
}

// pipelineTaskStrings are the strings of a pipeline task that may refer to
// params and results: its param values and when expressions.
func pipelineTaskStrings(pt tektonv1.PipelineTask) []string {
	var ss []string
	for _, p := range pt.Params {
		ss = append(ss, p.Value.StringVal)
		ss = append(ss, p.Value.ArrayVal...)
		for _, v := range p.Value.ObjectVal {
			ss = append(ss, v)
		}
	}
	for _, w := range pt.When {
		ss = append(ss, w.Input)
		ss = append(ss, w.Values...)
	}
	return ss
}

// whenAllows evaluates when expressions whose input and values are already
// substituted: every one must hold. CEL expressions are not supported.
func whenAllows(ws tektonv1.WhenExpressions) (bool, error) {
	for _, w := range ws {
		if w.CEL != "" {
			return false, fault.Permanent(fmt.Errorf("when expression %q: CEL is not supported by the embedded executor", w.CEL))
		}
		in := false
		for _, v := range w.Values {
			if v == w.Input {
				in = true
				break
			}
		}
		switch w.Operator {
		case selection.In:
			if !in {
				return false, nil
			}
		case selection.NotIn:
			if in {
				return false, nil
			}
		default:
			return false, fault.Permanent(fmt.Errorf("when expression on %q: operator %q, want in or notin", w.Input, w.Operator))
		}
	}
	return true, nil
}
