package natsjs_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/bus/natsjs"
)

// Retention waits for the cursors: an event older than the retention goes
// only once every consumer that reads it (its partition's, the whole
// bus's) has passed it, and each partition keeps its last event. With a
// stream MaxAge an events sink down for longer than the retention lost
// what it had not read.
func TestRetireWaitsForTheCursors(t *testing.T) {
	ctx := context.Background()
	o := newOptions()
	o.Partitions = 2
	o.PartitionKey = func(e cloudevents.Event) string { return e.Subject() }
	b := open(t, o)
	// Key "a" and a key "b..." of the other partition.
	bKey := "b"
	for i := 0; b.PartitionOf(bKey) == b.PartitionOf("a"); i++ {
		bKey = "b" + strconv.Itoa(i)
	}
	p0, p1 := b.PartitionOf("a"), b.PartitionOf(bKey)
	keyed := func(id, key string) cloudevents.Event {
		e := event(t, id)
		if key == "b" {
			key = bKey
		}
		e.SetSubject(key)
		return e
	}
	// Sequences: a1=1 b1=2 a2=3 b2=4 a3=5 b3=6.
	if _, err := b.Append(ctx, keyed("a1", "a"), keyed("b1", "b"), keyed("a2", "a"), keyed("b2", "b"), keyed("a3", "a"), keyed("b3", "b")); err != nil {
		t.Fatal(err)
	}
	va, err := b.Partition(p0)
	if err != nil {
		t.Fatal(err)
	}
	vb, err := b.Partition(p1)
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour) // every event is past a minute's retention
	retire := func(step string, want natsjs.Retired, left []string) {
		t.Helper()
		got, err := b.Retire(ctx, time.Minute, later)
		if err != nil {
			t.Fatalf("%s: Retire: %v", step, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: Retire (-want +got):\n%s", step, diff)
		}
		start := time.Now()
		recs, err := b.Read(ctx, 0, 0)
		if err != nil {
			t.Fatalf("%s: Read: %v", step, err)
		}
		if diff := cmp.Diff(left, ids(recs)); diff != "" {
			t.Errorf("%s: events left (-want +got):\n%s", step, diff)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("%s: Read took %v", step, took)
		}
	}
	none := map[int]natsjs.Cursor{}
	// No consumer has read anything: every event stays.
	retire("no cursors", natsjs.Retired{Before: 7, Purged: map[int]uint64{}, Held: none},
		[]string{"a1", "b1", "a2", "b2", "a3", "b3"})

	// Partition a's dispatcher read up to a2 (3): a1 and a2 go, a3 (unread)
	// stays; partition b's none: all of b stays.
	if err := va.SetCursor(ctx, "runtime", 3); err != nil {
		t.Fatal(err)
	}
	retire("a read to a2", natsjs.Retired{Before: 7, Purged: map[int]uint64{p0: 4}, Held: map[int]natsjs.Cursor{p0: {Consumer: "p" + strconv.Itoa(p0) + "/runtime", Seq: 3}}},
		[]string{"b1", "b2", "a3", "b3"})

	// A sink's mirror (the whole bus) that read only to b1 holds both.
	if err := b.SetCursor(ctx, "sink", 2); err != nil {
		t.Fatal(err)
	}
	if err := vb.SetCursor(ctx, "runtime", 6); err != nil {
		t.Fatal(err)
	}
	if err := va.SetCursor(ctx, "runtime", 5); err != nil {
		t.Fatal(err)
	}
	sink := natsjs.Cursor{Consumer: "sink", Seq: 2}
	retire("a sink behind", natsjs.Retired{Before: 7, Purged: map[int]uint64{p0: 3, p1: 3}, Held: map[int]natsjs.Cursor{p0: sink, p1: sink}},
		[]string{"b2", "a3", "b3"})

	// Everyone read everything: each partition keeps its last event.
	if err := b.SetCursor(ctx, "sink", 6); err != nil {
		t.Fatal(err)
	}
	retire("all read", natsjs.Retired{Before: 7, Purged: map[int]uint64{p0: 5, p1: 6}, Held: none},
		[]string{"a3", "b3"})

	// Within the retention nothing goes, and a partition's reader goes on.
	if _, err := b.Append(ctx, keyed("a4", "a")); err != nil {
		t.Fatal(err)
	}
	got, err := b.Retire(ctx, time.Hour, time.Now())
	if err != nil || len(got.Purged) != 0 {
		t.Errorf("Retire within the retention = %+v, %v; want nothing purged", got, err)
	}
	recs, err := va.Read(ctx, 5, 0)
	if err != nil || len(recs) != 1 || recs[0].Event.ID() != "a4" {
		t.Errorf("partition a after its cursor = %v, %v; want a4", ids(recs), err)
	}
}
