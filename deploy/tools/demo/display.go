package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/rolloutview"
)

// screen shows the demo's progress. On a terminal it redraws one screen (the
// steps so far, then the rollout in flight as waves x clusters); otherwise it
// appends a line per step and per change of a rollout.
type screen struct {
	out   io.Writer
	tty   bool
	start time.Time

	mu        sync.Mutex
	steps     []string
	current   string // the rollout view last drawn
	lastPlain string
}

func newScreen(out *os.File) *screen {
	tty := false
	if fi, err := out.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb" {
		tty = true
	}
	return &screen{out: out, tty: tty, start: time.Now()}
}

func (s *screen) stamp() string {
	return fmt.Sprintf("%6.1fs", time.Since(s.start).Seconds())
}

// step records a line of the demo's narrative.
func (s *screen) step(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	line := s.stamp() + "  " + fmt.Sprintf(format, args...)
	s.steps = append(s.steps, line)
	if s.tty {
		s.redraw()
		return
	}
	_, _ = fmt.Fprintln(s.out, line)
}

// endRollout leaves the rollout's last view on screen and stops redrawing it.
func (s *screen) endRollout() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tty && s.current != "" {
		s.steps = append(s.steps, "")
		s.steps = append(s.steps, strings.Split(strings.TrimRight(s.current, "\n"), "\n")...)
		s.steps = append(s.steps, "")
		s.current = ""
		s.redraw()
	}
	s.lastPlain = ""
}

// rollout shows the rollout in flight.
func (s *screen) rollout(title string, r *rollout.Rollout, elapsed time.Duration, describe func(string) string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.tty {
		line := rolloutview.Line(*r)
		if line != s.lastPlain {
			s.lastPlain = line
			_, _ = fmt.Fprintf(s.out, "%s  %s %s\n", s.stamp(), r.Tag, line)
		}
		return
	}
	s.current = table(title, r, elapsed, describe, true)
	s.redraw()
}

// redraw paints the whole screen: the steps (the last ones that fit), then
// the rollout view. Called with mu held.
func (s *screen) redraw() {
	var b strings.Builder
	b.WriteString("\x1b[H\x1b[2J")
	b.WriteString(bold("flotilla demo") + "  3 clusters, waves [c1] then [c2, c3]; a real registry notifies flotilla\n\n")
	steps := s.steps
	if max := 40; len(steps) > max {
		steps = steps[len(steps)-max:]
	}
	for _, l := range steps {
		b.WriteString(l + "\n")
	}
	if s.current != "" {
		b.WriteString("\n" + s.current)
	}
	_, _ = io.WriteString(s.out, b.String())
}

// table renders a rollout as waves x clusters (pkg/rolloutview, as
// `flotilla describe rollout --watch` does), with what each cluster's
// primary runs now.
func table(title string, r *rollout.Rollout, elapsed time.Duration, describe func(string) string, color bool) string {
	var b strings.Builder
	paint := func(s, code string) string {
		if !color {
			return s
		}
		return rolloutview.Paint(s, code)
	}
	fmt.Fprintf(&b, "%s  rollout %s  phase %s  %s\n", paint(title, "1"), r.ID, paint(string(r.Phase), rolloutview.PhaseColor(string(r.Phase))),
		elapsed.Round(100*time.Millisecond))
	if r.Reason != "" {
		fmt.Fprintf(&b, "  reason: %s\n", truncate(r.Reason, 110))
	}
	rolloutview.Table(&b, *r, rolloutview.Options{Color: color, Columns: []rolloutview.Column{
		{Header: "PRIMARY NOW", Cell: func(c rollout.Cluster) string { return describe(c.Name) }},
	}})
	return b.String()
}

func bold(s string) string { return "\x1b[1m" + s + "\x1b[0m" }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func short(digest string) string {
	if _, hex, ok := strings.Cut(digest, ":"); ok && len(hex) > 12 {
		return digest[:len(digest)-len(hex)] + hex[:12]
	}
	return digest
}
