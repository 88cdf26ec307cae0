package dispatch

import "time"

// Clock is the time the dispatcher's timers follow: which of a function's
// events are due later (timers), when a timer falls due, how long to wait
// for the next, and when a failed call is tried again (its backoff). The
// wall clock by default; `flotilla simulate` (pkg/simulate) gives a virtual
// one, so that a two-hour bake passes in milliseconds and a retry lands at
// a virtual instant. The metrics' durations and the stalls of a failing
// journal's reads and cursor saves stay on the wall clock: they measure the
// machine, not the rollout.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed on this
	// clock.
	After(d time.Duration) <-chan time.Time
}

// WallClock is the real time, the default [Options.Clock].
var WallClock Clock = wallClock{}

type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// untilClock is a Clock that waits for an instant ([ManualClock]): a wait
// computed before the clock moved still ends at its instant, not later.
type untilClock interface {
	Until(t time.Time) <-chan time.Time
}

// until returns a channel that receives once the clock reached t.
func (d *Dispatcher) until(t time.Time) <-chan time.Time {
	if u, ok := d.o.Clock.(untilClock); ok {
		return u.Until(t)
	}
	return d.o.Clock.After(t.Sub(d.o.Clock.Now()))
}

// Handled is the dispatcher's watermark: every event of the journal at or
// below it was handled (0 before Run). Whether the dispatcher has nothing
// left to do is WaitIdle's.
func (d *Dispatcher) Handled() uint64 {
	if s := d.sched.Load(); s != nil {
		return s.watermark()
	}
	return 0
}
