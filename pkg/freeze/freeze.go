package freeze

import (
	"fmt"
	"strings"
	"time"

	// Windows name IANA time zones: the database is embedded, so they
	// resolve on a host or image without one (distroless, scratch).
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
	"github.com/teambition/rrule-go"
)

// Window is one freeze window.
type Window struct {
	Name     string
	Duration time.Duration
	loc      *time.Location
	// last returns the last start at or before t (zero if none).
	last func(t time.Time) time.Time
}

// defaultStart anchors a recurrence rule given without DTSTART.
const defaultStart = "DTSTART:20000101T000000\n"

// New compiles a window starting by a cron schedule (five fields, or a
// descriptor such as @weekly) or by an RFC 5545 recurrence rule (RRULE,
// with or without DTSTART: without, it starts 2000-01-01 at midnight),
// exactly one of them, lasting d, in the time zone tz ("" is UTC).
func New(name, schedule, rule string, d time.Duration, tz string) (Window, error) {
	w := Window{Name: name, Duration: d}
	if d <= 0 {
		return w, fmt.Errorf("duration %s: want a positive duration", d)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return w, fmt.Errorf("time zone %q: %w", tz, err)
	}
	w.loc = loc
	switch {
	case (schedule == "") == (rule == ""):
		return w, fmt.Errorf("set exactly one of schedule (cron) and rrule")
	case schedule != "":
		s, err := cron.ParseStandard(schedule)
		if err != nil {
			return w, fmt.Errorf("schedule %q: %w", schedule, err)
		}
		w.last = func(t time.Time) time.Time {
			// The first start after t-d is at or before t if the window
			// that starts then still runs at t.
			if n := s.Next(t.Add(-d).In(loc)); !n.After(t) {
				return n
			}
			return time.Time{}
		}
	default:
		text := rule
		if !strings.Contains(strings.ToUpper(text), "DTSTART") {
			text = defaultStart + text
		}
		var lines []string
		for l := range strings.Lines(strings.TrimSpace(text)) {
			if l = strings.TrimSpace(l); !strings.Contains(l, ":") {
				l = "RRULE:" + l // a bare rule
			}
			lines = append(lines, l)
		}
		set, err := rrule.StrSliceToRRuleSetInLoc(lines, loc)
		if err != nil {
			return w, fmt.Errorf("rrule %q: %w", rule, err)
		}
		w.last = func(t time.Time) time.Time { return set.Before(t.In(loc), true) }
	}
	return w, nil
}

// Active reports whether t falls in the window, and when that occurrence
// ends.
func (w Window) Active(t time.Time) (until time.Time, ok bool) {
	start := w.last(t)
	if start.IsZero() {
		return time.Time{}, false
	}
	until = start.Add(w.Duration)
	return until, t.Before(until)
}

// Active returns the window of ws that holds t the longest, and when it
// ends; ok is false when none holds t.
func Active(ws []Window, t time.Time) (w Window, until time.Time, ok bool) {
	for _, x := range ws {
		if u, in := x.Active(t); in && (!ok || u.After(until)) {
			w, until, ok = x, u, true
		}
	}
	return w, until, ok
}
