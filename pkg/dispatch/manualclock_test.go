package dispatch_test

import (
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/dispatch"
)

func TestClockWakesWaitersWhenSet(t *testing.T) {
	start := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	c := dispatch.NewManualClock(start)
	early, late := c.After(time.Hour), c.After(2*time.Hour)
	c.Set(start.Add(90 * time.Minute))
	select {
	case at := <-early:
		if want := start.Add(90 * time.Minute); !at.Equal(want) {
			t.Errorf("woken at %s, want %s", at, want)
		}
	default:
		t.Fatal("the waiter due after 1h was not woken at 1h30")
	}
	select {
	case <-late:
		t.Fatal("the waiter due after 2h was woken at 1h30")
	default:
	}
	c.Set(start) // never back
	if got := c.Now(); !got.Equal(start.Add(90 * time.Minute)) {
		t.Errorf("Now = %s after setting it back", got)
	}
}

// Until waits for an instant: set before the clock jumps past it, it still
// ends there; for an instant passed, at once. Catches a wait for an
// instant made of After(t - now) with a now read before the clock moved.
func TestClockUntilAnInstant(t *testing.T) {
	start := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		until  time.Duration // after start
		setTo  []time.Duration
		wokeAt time.Duration // -1: not woken
	}{
		{"an instant passed", -time.Minute, nil, 0},
		{"not reached", time.Hour, []time.Duration{59 * time.Minute}, -1},
		{"reached exactly", time.Hour, []time.Duration{time.Hour}, time.Hour},
		{"reached after a smaller step", time.Hour, []time.Duration{30 * time.Minute, time.Hour}, time.Hour},
		{"jumped past", time.Hour, []time.Duration{30 * time.Minute, 3 * time.Hour}, 3 * time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := dispatch.NewManualClock(start)
			ch := c.Until(start.Add(tc.until))
			for _, d := range tc.setTo {
				c.Set(start.Add(d))
			}
			got := time.Duration(-1)
			select {
			case at := <-ch:
				got = at.Sub(start)
			default:
			}
			if got != tc.wokeAt {
				t.Errorf("woken at %s, want %s", got, tc.wokeAt)
			}
		})
	}
}
