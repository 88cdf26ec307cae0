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
