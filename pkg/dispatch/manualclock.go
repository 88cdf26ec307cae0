package dispatch

import (
	"sync"
	"time"
)

// ManualClock is a Clock that moves only when it is set: the virtual
// clock of pkg/simulate, and of tests of timers.
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []manualWaiter
}

type manualWaiter struct {
	at time.Time
	c  chan time.Time
}

// NewManualClock returns a manual clock at start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start.UTC()} }

// Now is the virtual time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives once the clock reached now+d.
func (c *ManualClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.until(c.now.Add(d))
}

// Until returns a channel that receives once the clock reached t (at once
// when it has): unlike After, a wait computed before the clock was set
// ends at its instant, not that much after the new time.
func (c *ManualClock) Until(t time.Time) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.until(t)
}

func (c *ManualClock) until(t time.Time) <-chan time.Time {
	ch := make(chan time.Time, 1)
	if !t.After(c.now) {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, manualWaiter{at: t, c: ch})
	return ch
}

// Set moves the clock to t (never back) and wakes the waiters due.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.After(c.now) {
		return
	}
	c.now = t.UTC()
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.c <- c.now
	}
	clear(c.waiters[len(kept):])
	c.waiters = kept
}

// Advance moves the clock d ahead (Set of Now()+d).
func (c *ManualClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }
