package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// printTally writes requests per receiver by status code.
func printTally(w io.Writer, t *tally) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cols := map[string]bool{}
	for _, byCol := range t.counts {
		for c := range byCol {
			cols[c] = true
		}
	}
	columns := slices.SortedFunc(maps.Keys(cols), func(a, b string) int {
		ai, aerr := strconv.Atoi(a)
		bi, berr := strconv.Atoi(b)
		switch {
		case aerr == nil && berr == nil:
			return ai - bi
		case aerr == nil:
			return -1
		case berr == nil:
			return 1
		}
		return strings.Compare(a, b)
	})
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "receiver\trequests\t%s\t5xx\t\n", strings.Join(columns, "\t"))
	totals := map[string]int{}
	var total, total5xx int
	for _, rcv := range slices.Sorted(maps.Keys(t.counts)) {
		byCol := t.counts[rcv]
		n, n5xx := 0, 0
		var cells []string
		for _, c := range columns {
			n += byCol[c]
			totals[c] += byCol[c]
			if code, err := strconv.Atoi(c); err == nil && code >= 500 {
				n5xx += byCol[c]
			}
			cells = append(cells, dash(byCol[c]))
		}
		total += n
		total5xx += n5xx
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t\n", rcv, n, strings.Join(cells, "\t"), dash(n5xx))
	}
	var cells []string
	for _, c := range columns {
		cells = append(cells, dash(totals[c]))
	}
	fmt.Fprintf(tw, "all\t%d\t%s\t%s\t\n", total, strings.Join(cells, "\t"), dash(total5xx))
	_ = tw.Flush()
}

func dash(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

// printChecks writes the end checks, one per line.
func printChecks(w io.Writer, checks []check) {
	for _, c := range checks {
		switch {
		case c.skipped:
			fmt.Fprintf(w, "  SKIP %s\n", c.name)
		case c.err != nil:
			fmt.Fprintf(w, "  FAIL %s: %v\n", c.name, indent(c.err.Error()))
		default:
			fmt.Fprintf(w, "  ok   %s (%s)\n", c.name, c.took.Round(1e6))
		}
	}
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n       ") }

// printRequest writes a logged request for a person to read.
func printRequest(w io.Writer, rec record) {
	req := rec.Request
	fmt.Fprintf(w, "  %s %s", req.method(), req.path())
	if req.PathToken == "" && usesPathToken(req.Sender) {
		fmt.Fprintf(w, "  (+ /<token>)")
	}
	fmt.Fprintf(w, "  [%s; worker %d request %d; %s]\n", rec.Why, rec.Worker, rec.Seq, statusText(rec))
	if req.Fixture != "" {
		fmt.Fprintf(w, "    from %s: %s\n", req.Fixture, strings.Join(req.Mutations, "; "))
	}
	for _, k := range slices.Sorted(maps.Keys(req.Header)) {
		fmt.Fprintf(w, "    %s: %s\n", k, truncate(strings.Join(req.Header[k], ", "), 200))
	}
	fmt.Fprintf(w, "    body (%d bytes): %s\n", len(req.Body), truncate(strconv.Quote(string(req.Body)), 600))
}

func statusText(rec record) string {
	if rec.Status == 0 && rec.Error == "" {
		return "no answer logged"
	}
	if rec.Status == 0 {
		return "no answer: " + rec.Error
	}
	return fmt.Sprintf("%d %s", rec.Status, strings.TrimSpace(truncate(rec.Response, 200)))
}

// usesPathToken tells the sender types signed with /hooks/<name>/<token>
// (some of the time, for flagger).
func usesPathToken(senderType string) bool {
	switch senderType {
	case "dockerhub", "quay", "tekton", "flagger":
		return true
	}
	return false
}
