package dispatch

import "time"

// Clock is the time the dispatcher's timers follow: which of a function's
// events are due later (timers), when a timer falls due, how long to wait
// for the next. The wall clock by default; `flotilla simulate` (pkg/simulate)
// gives a virtual one, so that a two-hour bake passes in milliseconds.
// Retry backoffs and the metrics' durations stay on the wall clock: they
// measure the machine, not the rollout.
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

// Handled is the dispatcher's watermark: every event of the journal at or
// below it was handled (0 before Run). With the journal's last sequence
// number it tells whether the dispatcher is idle (pkg/simulate advances its
// virtual clock only then).
func (d *Dispatcher) Handled() uint64 {
	if s := d.sched.Load(); s != nil {
		return s.watermark()
	}
	return 0
}
