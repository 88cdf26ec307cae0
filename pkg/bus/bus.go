package bus

import (
	"context"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// Record is an event on the bus and its sequence number.
type Record struct {
	Seq   uint64
	Event cloudevents.Event
	// Err is non-nil when the stored bytes, intact, are not a readable
	// event (written by a version that let such an event in); Event is zero
	// then. A reader sets the record aside and goes on.
	Err error
}

// Bus is an ordered, durable log of CloudEvents with consumers' cursors and
// timers.
type Bus interface {
	// Append records evs durably, in order, before it returns, and returns
	// the records it added. An event whose id the bus has already (within
	// its de-duplication window) is skipped. An event the bus cannot keep
	// as it is fails the call with a permanent error (pkg/fault) and
	// nothing is added.
	Append(ctx context.Context, evs ...cloudevents.Event) ([]Record, error)
	// Read returns up to limit records with Seq > after, in order (a
	// limit <= 0: no limit). Records removed by retention are skipped.
	Read(ctx context.Context, after uint64, limit int) ([]Record, error)
	// Changed returns a channel closed at the next Append that adds
	// records: take it before Read, wait on it after an empty Read.
	Changed() <-chan struct{}

	// Cursor returns the position a consumer saved (0 if none); SetCursor
	// saves it durably.
	Cursor(ctx context.Context, consumer string) (uint64, error)
	SetCursor(ctx context.Context, consumer string, seq uint64) error
	// DeleteCursor forgets a consumer that is gone, so that it no longer
	// holds retention back.
	DeleteCursor(ctx context.Context, consumer string) error

	// Schedule keeps events carrying a due time after now (the CloudEvents
	// extension events.ExtDue) as timers, and appends the others. A timer
	// scheduled twice (same id, same due time) is one timer. Timers
	// survive restarts.
	Schedule(ctx context.Context, evs ...cloudevents.Event) error
	// NextDue returns when the earliest timer is due (ok false: none).
	NextDue(ctx context.Context) (due time.Time, ok bool, err error)
	// FireDue appends up to limit timers due at or before now, then forgets
	// them, and returns how many it fired. A timer fired twice (a crash
	// between the two) is appended once, by its id.
	FireDue(ctx context.Context, now time.Time, limit int) (int, error)
	// TimersChanged returns a channel closed at the next Schedule of a
	// timer: take it before NextDue.
	TimersChanged() <-chan struct{}
}
