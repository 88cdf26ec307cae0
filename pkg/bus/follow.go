package bus

import (
	"context"
	"time"
)

// Reader is what following the bus reads: the records after a position,
// and the signal of the next append.
type Reader interface {
	Read(ctx context.Context, after uint64, limit int) ([]Record, error)
	Changed() <-chan struct{}
}

// The back-off of a follower whose read (or handling) fails: from
// Follower.Backoff (default DefaultBackoff), doubling, up to MaxBackoff.
const (
	DefaultBackoff = time.Second
	MaxBackoff     = time.Minute
	DefaultBatch   = 256
)

// Follower follows a bus from a position, in order, every follower the
// same way: take the change signal, read a batch, hand it over, and wait
// for the next append when there is nothing to read. A failed read or
// hand-over stalls the follower with one back-off (Backoff doubling up to
// MaxBackoff); it reports the stall and the recovery, and never ends on
// its own: only ctx ends it.
type Follower struct {
	// Batch bounds one read (default DefaultBatch).
	Batch int
	// Backoff is the first wait after a failure (default DefaultBackoff).
	Backoff time.Duration
	// Ready, when set, runs before each read, given the position: it
	// returns the position to read after (a follower nobody needs may skip
	// ahead), how many records it takes now (<= 0: Batch), and false when
	// ctx ended. It may block (for room, for a reader).
	Ready func(ctx context.Context, after uint64) (uint64, int, bool)
	// Idle, when set, waits after a read that found nothing, instead of
	// waiting for changed alone; false when ctx ended.
	Idle func(ctx context.Context, changed <-chan struct{}) bool
	// Stalled, when set, hears of each failure and the wait before the
	// next try; Resumed of the first success after failures.
	Stalled func(err error, retryIn time.Duration)
	Resumed func()
}

// Run follows r from after until ctx ends, handing each batch read to
// handle, which returns the position to go on from (the last record it
// took) and an error that stalls the follower (it then goes on from that
// position). It returns nil when ctx ends.
func (f Follower) Run(ctx context.Context, r Reader, after uint64, handle func(context.Context, []Record) (uint64, error)) error {
	batch, first := f.Batch, f.Backoff
	if batch <= 0 {
		batch = DefaultBatch
	}
	if first <= 0 {
		first = DefaultBackoff
	}
	delay := first
	failed := func(err error) bool {
		if ctx.Err() != nil {
			return false
		}
		if f.Stalled != nil {
			f.Stalled(err, delay)
		}
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		delay = min(2*delay, MaxBackoff)
		return true
	}
	for ctx.Err() == nil {
		changed := r.Changed()
		limit := batch
		if f.Ready != nil {
			var n int
			var ok bool
			if after, n, ok = f.Ready(ctx, after); !ok {
				return nil
			}
			if n > 0 {
				limit = min(n, batch)
			}
		}
		recs, err := r.Read(ctx, after, limit)
		if err == nil && len(recs) > 0 {
			after, err = handle(ctx, recs)
		}
		if err != nil {
			if !failed(err) {
				return nil
			}
			continue
		}
		if delay != first {
			delay = first
			if f.Resumed != nil {
				f.Resumed()
			}
		}
		if len(recs) == limit {
			continue // more may wait
		}
		if f.Idle != nil {
			if !f.Idle(ctx, changed) {
				return nil
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
	return nil
}
