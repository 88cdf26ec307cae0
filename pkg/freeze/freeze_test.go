package freeze_test

import (
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/freeze"
)

func TestWindows(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err) // pkg/freeze embeds time/tzdata: never missing
	}
	at := func(s string) time.Time {
		v, err := time.ParseInLocation("2006-01-02 15:04", s, ny)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name, schedule, rule string
		d                    time.Duration
		t                    time.Time
		wantIn               bool
		wantUntil            time.Time
	}{
		{"cron: Friday 00:00 for 72h, on Saturday", "0 0 * * 5", "", 72 * time.Hour, at("2026-11-28 12:00"), true, at("2026-11-30 00:00")},
		{"cron: before the Friday", "0 0 * * 5", "", 72 * time.Hour, at("2026-11-26 23:59"), false, time.Time{}},
		{"cron: at the end, out", "0 0 * * 5", "", 72 * time.Hour, at("2026-11-30 00:00"), false, time.Time{}},
		{"rrule: weekends", "", "FREQ=WEEKLY;BYDAY=SA", 48 * time.Hour, at("2026-11-29 08:00"), true, at("2026-11-30 00:00")},
		{"rrule: weekends, on a Tuesday", "", "FREQ=WEEKLY;BYDAY=SA", 48 * time.Hour, at("2026-12-01 08:00"), false, time.Time{}},
		{"rrule with its own start", "", "DTSTART;TZID=America/New_York:20261127T090000\nRRULE:FREQ=YEARLY", 8 * time.Hour, at("2026-11-27 16:59"), true, at("2026-11-27 17:00")},
		{"rrule before its first start", "", "DTSTART;TZID=America/New_York:20261127T090000\nRRULE:FREQ=YEARLY", 8 * time.Hour, at("2026-11-27 08:59"), false, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := freeze.New("w", tt.schedule, tt.rule, tt.d, "America/New_York")
			if err != nil {
				t.Fatal(err)
			}
			until, in := w.Active(tt.t)
			if in != tt.wantIn || in && !until.Equal(tt.wantUntil) {
				t.Errorf("Active(%s) = %s, %v; want %s, %v", tt.t, until, in, tt.wantUntil, tt.wantIn)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	for _, tt := range []struct{ name, schedule, rule, tz string }{
		{"neither", "", "", ""},
		{"both", "@daily", "FREQ=DAILY", ""},
		{"bad cron", "61 * * * *", "", ""},
		{"bad rrule", "", "FREQ=SOMETIMES", ""},
		{"bad zone", "@daily", "", "Mars/Olympus"},
	} {
		if _, err := freeze.New("w", tt.schedule, tt.rule, time.Hour, tt.tz); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
	if _, err := freeze.New("w", "@daily", "", 0, ""); err == nil {
		t.Error("a zero duration: no error")
	}
}

// The window holding the longest wins.
func TestActiveLongest(t *testing.T) {
	a, _ := freeze.New("a", "@daily", "", time.Hour, "")
	b, _ := freeze.New("b", "@daily", "", 3*time.Hour, "")
	now := time.Date(2026, 11, 24, 0, 30, 0, 0, time.UTC)
	w, until, ok := freeze.Active([]freeze.Window{a, b}, now)
	if !ok || w.Name != "b" || !until.Equal(time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)) {
		t.Errorf("Active = %s until %s, %v; want b until 03:00", w.Name, until, ok)
	}
}
