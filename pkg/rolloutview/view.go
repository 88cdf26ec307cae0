package rolloutview

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Column is a column a caller adds after the standard ones.
type Column struct {
	Header string
	Cell   func(rollout.Cluster) string
}

// Options shape a table.
type Options struct {
	// Color paints states with ANSI colours (for a terminal).
	Color bool
	// Columns follow WAVE, CLUSTER, STATE, FLAGGER and WEIGHT.
	Columns []Column
}

// Table writes r as waves x clusters: one row per cluster, its wave first
// ("*" marks the wave in flight).
func Table(w io.Writer, r rollout.Rollout, o Options) {
	headers := []string{"WAVE", "CLUSTER", "STATE", "FLAGGER", "WEIGHT"}
	for _, c := range o.Columns {
		headers = append(headers, c.Header)
	}
	rows := [][]string{headers}
	var phases []string // each row's cluster phase and Flagger phase, for colour
	for i, wave := range r.Waves {
		marker := " "
		if i == r.Wave && !r.Phase.Done() {
			marker = "*"
		}
		for _, c := range wave.Clusters {
			row := []string{fmt.Sprintf("%s%d %s", marker, i+1, wave.Name), c.Name, State(c), Dash(c.CanaryPhase), Bar(c.CanaryWeight)}
			for _, col := range o.Columns {
				row = append(row, Dash(col.Cell(c)))
			}
			rows = append(rows, row)
			phases = append(phases, State(c), c.CanaryPhase)
		}
	}
	widths := make([]int, len(headers))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	for n, row := range rows {
		var b strings.Builder
		for i, cell := range row {
			pad := cell + strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell))
			if i == len(row)-1 {
				pad = cell
			}
			if o.Color && n > 0 && (i == 2 || i == 3) {
				pad = Paint(pad, PhaseColor(phases[2*(n-1)+i-2]))
			}
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(pad)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// State is a cluster's state as the table shows it: its phase, or
// "Failed, reverted" for a cluster whose own result failed its wave and
// that is reverted since, so it stands apart from the clusters reverted
// because of it.
func State(c rollout.Cluster) string {
	if c.Failure != "" && c.Phase != rollout.ClusterFailed && c.Phase != rollout.ClusterSucceeded {
		return "Failed, " + strings.ToLower(string(c.Phase))
	}
	return string(c.Phase)
}

// Line is r in one line: its phase, then each cluster's state, Flagger
// phase and weight, wave by wave.
func Line(r rollout.Rollout) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-11s", r.Phase)
	for i, w := range r.Waves {
		fmt.Fprintf(&b, " | wave %d:", i+1)
		for _, c := range w.Clusters {
			fmt.Fprintf(&b, " %s=%s/%s/%d%%", c.Name, c.Phase, Dash(c.CanaryPhase), c.CanaryWeight)
		}
	}
	return b.String()
}

// Bar draws a canary weight: "[###.......]  30%".
func Bar(weight int) string {
	n := max(0, min(10, weight/10))
	return fmt.Sprintf("[%s%s] %3d%%", strings.Repeat("#", n), strings.Repeat(".", 10-n), weight)
}

// PhaseColor is the ANSI colour of a rollout's, a cluster's or Flagger's
// phase.
func PhaseColor(p string) string {
	switch p {
	case "Succeeded", "Initialized":
		return "32" // green
	case "Failed", "RevertFailed", "RollbackFailed", "Failed, reverting", "Failed, reverted", "Failed, revertfailed":
		return "31" // red
	case "Reverted", "RolledBack", "Reverting", "Promoting", "Finalising", "WaitingPromotion", "Applying", "Waiting":
		return "33" // yellow
	case "Progressing":
		return "36" // cyan
	}
	return "0"
}

// Paint wraps s in an ANSI colour.
func Paint(s, code string) string {
	if code == "0" || code == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// Dash is s, or "-" for nothing.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
