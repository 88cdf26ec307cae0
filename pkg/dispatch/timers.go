package dispatch

import (
	"context"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
)

// splitDue separates the events due after now (timers) from the others.
func splitDue(evs []cloudevents.Event, now time.Time) (journal, later []cloudevents.Event) {
	for _, e := range evs {
		if at, ok := events.Due(e); ok && at.After(now) {
			later = append(later, e)
			continue
		}
		journal = append(journal, e)
	}
	return journal, later
}

// fireBatch bounds the timers journaled at once.
const fireBatch = 256

// runTimers journals timers as they fall due, until ctx ends. A journal
// that fails stalls the dispatcher (Err) and is retried.
func (d *Dispatcher) runTimers(ctx context.Context) {
	delay := d.o.StallBackoff
	for ctx.Err() == nil {
		changed := d.j.TimersChanged()
		next, err := d.fireDue(ctx)
		// Fired timers are deleted after they are journaled: WaitIdle
		// hears of it here.
		d.act.bump()
		var wake <-chan time.Time
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d.stall(err, delay)
			wake, delay = d.o.Clock.After(delay), min(2*delay, time.Minute)
		} else {
			if delay != d.o.StallBackoff {
				d.unstall()
				delay = d.o.StallBackoff
			}
			// An instant, not a duration: a clock set meanwhile (a
			// virtual one jumps) still wakes this loop at the timer.
			wake = d.until(next)
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-wake:
		}
	}
}

// fireDue journals the due timers and returns when the next falls due (an
// hour from now when none waits).
func (d *Dispatcher) fireDue(ctx context.Context) (time.Time, error) {
	for {
		n, err := d.j.FireDue(ctx, d.o.Clock.Now(), fireBatch)
		if err != nil {
			return time.Time{}, fmt.Errorf("firing timers: %w", err)
		}
		d.m.timers.Add(float64(n))
		if n < fireBatch {
			break
		}
	}
	due, ok, err := d.j.NextDue(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("reading timers: %w", err)
	}
	if !ok {
		return d.o.Clock.Now().Add(time.Hour), nil
	}
	return due, nil
}
