package natsjs

import (
	"context"
	"fmt"
	"strconv"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/pkg/bus"
)

// View is one partition of the bus, for the engine of the replica that
// holds it: it reads that partition's events, keeps that partition's
// cursors and fires its timers; what it appends or schedules goes to the
// partition of each event, as on the whole bus. A partition's events are
// in stream order; their sequences are the stream's, with gaps.
type View struct {
	b    *Bus
	part int
}

var _ bus.Bus = (*View)(nil)

// Partition returns the view of partition p.
func (b *Bus) Partition(p int) (*View, error) {
	if p < 0 || p >= b.o.Partitions {
		return nil, fmt.Errorf("partition %d of %d", p, b.o.Partitions)
	}
	return &View{b: b, part: p}, nil
}

// Partitions is how many the stream has.
func (b *Bus) Partitions() int { return b.o.Partitions }

func (v *View) consumer(name string) string { return "p" + strconv.Itoa(v.part) + "/" + name }

// Append appends to the bus (each event to its own partition).
func (v *View) Append(ctx context.Context, evs ...cloudevents.Event) ([]bus.Record, error) {
	return v.b.Append(ctx, evs...)
}

// Read reads the partition's events after seq.
func (v *View) Read(ctx context.Context, after uint64, limit int) ([]bus.Record, error) {
	return v.b.read(ctx, v.b.subject(v.part), after, limit)
}

// Changed is closed at the next append to the bus (to any partition: a
// reader reads again and may find nothing new).
func (v *View) Changed() <-chan struct{} { return v.b.Changed() }

// Cursor is consumer's position in this partition.
func (v *View) Cursor(ctx context.Context, consumer string) (uint64, error) {
	return v.b.Cursor(ctx, v.consumer(consumer))
}

// SetCursor saves consumer's position in this partition.
func (v *View) SetCursor(ctx context.Context, consumer string, seq uint64) error {
	return v.b.SetCursor(ctx, v.consumer(consumer), seq)
}

// DeleteCursor forgets consumer's position in this partition.
func (v *View) DeleteCursor(ctx context.Context, consumer string) error {
	return v.b.DeleteCursor(ctx, v.consumer(consumer))
}

// Schedule schedules on the bus (each timer in its event's partition).
func (v *View) Schedule(ctx context.Context, evs ...cloudevents.Event) error {
	return v.b.Schedule(ctx, evs...)
}

// NextDue is when the partition's earliest timer is due.
func (v *View) NextDue(ctx context.Context) (time.Time, bool, error) {
	return v.b.nextDue(ctx, v.part)
}

// FireDue fires the partition's timers due by now.
func (v *View) FireDue(ctx context.Context, now time.Time, limit int) (int, error) {
	return v.b.fireDue(ctx, now, limit, v.part)
}

// TimersChanged is closed at the next Schedule (of any partition).
func (v *View) TimersChanged() <-chan struct{} { return v.b.TimersChanged() }
