package natsjs_test

import (
	"context"
	"slices"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/bus/natsjs"
	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// Events are partitioned by key: a partition's view reads its keys'
// events only, in order; the views together read every event once; each
// view fires its own partition's timers and keeps its own cursors.
func TestViewsSplitTheBusByKey(t *testing.T) {
	ctx := context.Background()
	o := newOptions()
	o.Partitions = 4
	o.PartitionKey = func(e cloudevents.Event) string { return e.Subject() }
	b := open(t, o)
	keyed := func(id, key string) cloudevents.Event {
		e := event(t, id)
		e.SetSubject(key)
		return e
	}
	var evs []cloudevents.Event
	for i, key := range []string{"k1", "k2", "k3", "k4", "k5", "k6", "k1", "k2", "k1"} {
		evs = append(evs, keyed(string(rune('a'+i)), key))
	}
	if _, err := b.Append(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(time.Hour)
	if err := b.Schedule(ctx, events.At(keyed("timer-k1", "k1"), due), events.At(keyed("timer-k2", "k2"), due)); err != nil {
		t.Fatal(err)
	}
	var union []string
	byKey := map[string][]string{}
	timersFired := 0
	for p := range b.Partitions() {
		v, err := b.Partition(p)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := v.Read(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		keys := map[string]bool{}
		for i, r := range recs {
			if i > 0 && r.Seq <= recs[i-1].Seq {
				t.Errorf("partition %d out of order at %d", p, i)
			}
			union = append(union, r.Event.ID())
			byKey[r.Event.Subject()] = append(byKey[r.Event.Subject()], r.Event.ID())
			keys[r.Event.Subject()] = true
		}
		if err := v.SetCursor(ctx, "dispatch", uint64(100+p)); err != nil {
			t.Fatal(err)
		}
		n, err := v.FireDue(ctx, due, 10)
		if err != nil {
			t.Fatal(err)
		}
		timersFired += n
		if n > 0 && !keys["k1"] && !keys["k2"] {
			t.Errorf("partition %d fired %d timers of keys it does not hold", p, n)
		}
	}
	slices.Sort(union)
	if diff := cmp.Diff([]string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}, union); diff != "" {
		t.Errorf("the views together (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "g", "i"}, byKey["k1"]); diff != "" {
		t.Errorf("k1's events, in order (-want +got):\n%s", diff)
	}
	if timersFired != 2 {
		t.Errorf("the views fired %d timers, want 2", timersFired)
	}
	for p := range b.Partitions() {
		v, _ := b.Partition(p)
		if got, err := v.Cursor(ctx, "dispatch"); got != uint64(100+p) || err != nil {
			t.Errorf("partition %d's cursor = %d, %v", p, got, err)
		}
	}
	if _, err := b.Partition(4); err == nil {
		t.Error("a view of partition 4 of 4")
	}

	o.Partitions = 8
	ctx2, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := natsjs.Open(ctx2, connect(t), o)
	if err == nil || !fault.IsPermanent(err) {
		t.Errorf("opening the stream with another partition count = %v, want a permanent error", err)
	}
}
