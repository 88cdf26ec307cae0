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
		wait, err := d.fireDue(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d.stall(err, delay)
			wait, delay = delay, min(2*delay, time.Minute)
		} else if delay != d.o.StallBackoff {
			d.unstall()
			delay = d.o.StallBackoff
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-d.o.Clock.After(wait):
		}
	}
}

// fireDue journals the due timers and returns how long until the next.
func (d *Dispatcher) fireDue(ctx context.Context) (time.Duration, error) {
	for {
		n, err := d.j.FireDue(ctx, d.o.Clock.Now(), fireBatch)
		if err != nil {
			return 0, fmt.Errorf("firing timers: %w", err)
		}
		d.m.timers.Add(float64(n))
		if n < fireBatch {
			break
		}
	}
	due, ok, err := d.j.NextDue(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading timers: %w", err)
	}
	if !ok {
		return time.Hour, nil
	}
	return max(due.Sub(d.o.Clock.Now()), 0), nil
}
