package dispatch

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Idleness: `flotilla simulate` (pkg/simulate) moves its virtual clock only
// when the dispatcher has nothing left to do at the clock's now. WaitIdle
// tells it exactly when that is, from the dispatcher's own accounting of
// the work in flight, not from how long it has looked quiet: a worker kept
// from a CPU for a while is still work in flight.

// activity signals every change of the work in flight: an event admitted
// or handled, a partition parked for a retry or back from one, timers
// fired. gen counts the changes.
type activity struct {
	mu      sync.Mutex
	gen     uint64
	changed chan struct{}
}

func (a *activity) bump() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gen++
	if a.changed != nil {
		close(a.changed)
		a.changed = nil
	}
}

// watch returns the count of changes so far and a channel closed at the
// next change.
func (a *activity) watch() (uint64, <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.changed == nil {
		a.changed = make(chan struct{})
	}
	return a.gen, a.changed
}

func (a *activity) count() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.gen
}

// WaitIdle waits until the dispatcher has nothing to do at its clock's
// now: every journaled event read and handled by its functions (in every
// lane, the pipeline runner's too) or waiting for a retry due later, and
// no timer due. It returns when something falls due next, a timer or a
// retry (ok false: nothing waits). Nothing but the clock moving or an
// append from outside (a webhook, a person) makes a dispatcher so found
// busy again. It waits for Run to start, and fails when ctx ends.
func (d *Dispatcher) WaitIdle(ctx context.Context) (next time.Time, ok bool, err error) {
	select {
	case <-d.started:
	case <-ctx.Done():
		return time.Time{}, false, fmt.Errorf("waiting for the dispatcher to start: %w", ctx.Err())
	}
	s := d.sched.Load()
	for {
		gen, changed := d.act.watch()
		journal, timers := d.j.Changed(), d.j.TimersChanged()
		idle, next, ok, err := s.quiet(ctx, gen)
		if err != nil || idle {
			return next, ok, err
		}
		select {
		case <-ctx.Done():
			return time.Time{}, false, fmt.Errorf("waiting for the dispatcher to be idle: %w", ctx.Err())
		case <-changed:
		case <-journal:
		case <-timers:
		}
	}
}

// quiet tells whether nothing is to do at the clock's now, as of change
// gen of the work in flight, and what is due next. Each check reads a part
// of the state at its own moment; none changed between them when gen is
// still the count of changes after the last (new work is admitted,
// unparked or fired, each a change).
func (s *scheduler) quiet(ctx context.Context, gen uint64) (idle bool, next time.Time, ok bool, err error) {
	now := s.d.o.Clock.Now()
	s.mu.Lock()
	// Every partition in s.parts is queued, running or parked.
	busy := len(s.parts) > len(s.parked)
	for _, at := range s.parked {
		if !at.After(now) {
			busy = true
		}
		if !ok || at.Before(next) {
			next, ok = at, true
		}
	}
	read := s.readSeq
	s.mu.Unlock()
	if busy {
		return false, time.Time{}, false, nil
	}
	unread, err := s.d.j.Read(ctx, read, 1)
	if err != nil {
		return false, time.Time{}, false, err
	}
	if len(unread) > 0 {
		return false, time.Time{}, false, nil
	}
	due, dok, err := s.d.j.NextDue(ctx)
	if err != nil {
		return false, time.Time{}, false, err
	}
	if dok && !due.After(now) {
		return false, time.Time{}, false, nil
	}
	if dok && (!ok || due.Before(next)) {
		next, ok = due, true
	}
	if s.d.act.count() != gen {
		return false, time.Time{}, false, nil
	}
	return true, next, ok, nil
}
