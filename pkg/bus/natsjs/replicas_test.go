package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/fault"
)

func event(t *testing.T, id string) cloudevents.Event {
	t.Helper()
	e, err := events.New(id, "/natsjs", "dev.flotilla.natsjs.v1", map[string]string{"id": id})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func ids(recs []bus.Record) []string {
	out := []string{}
	for _, r := range recs {
		out = append(out, r.Event.ID())
	}
	return out
}

func TestAppendDropsRepeatsInsideABatch(t *testing.T) {
	ctx := context.Background()
	b := open(t, newOptions())
	for _, tc := range []struct {
		append []string
		want   []string
	}{
		{[]string{"a", "b"}, []string{"a", "b"}},
		{[]string{"b", "c", "c", "d"}, []string{"c", "d"}}, // the batch holds an id the stream has
		{[]string{"a", "b", "c"}, []string{}},
		{[]string{"e"}, []string{"e"}},
		{[]string{"e"}, []string{}},
	} {
		var evs []cloudevents.Event
		for _, id := range tc.append {
			evs = append(evs, event(t, id))
		}
		recs, err := b.Append(ctx, evs...)
		if err != nil {
			t.Fatalf("Append(%v): %v", tc.append, err)
		}
		if diff := cmp.Diff(tc.want, ids(recs)); diff != "" {
			t.Errorf("Append(%v) returned (-want +got):\n%s", tc.append, diff)
		}
	}
	all, err := b.Read(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b", "c", "d", "e"}, ids(all)); diff != "" {
		t.Errorf("stream (-want +got):\n%s", diff)
	}
	for i, r := range all {
		if r.Seq != uint64(i+1) {
			t.Errorf("record %d has seq %d", i, r.Seq)
		}
	}
}

func TestAppendBeyondOneAtomicBatchKeepsOrder(t *testing.T) {
	ctx := context.Background()
	b := open(t, newOptions())
	var evs []cloudevents.Event
	var want []string
	for i := range 2500 {
		id := fmt.Sprintf("e%04d", i)
		evs, want = append(evs, event(t, id)), append(want, id)
	}
	recs, err := b.Append(ctx, evs...)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, ids(recs)); diff != "" {
		t.Errorf("Append returned (-want +got):\n%s", diff)
	}
	got, err := b.Read(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, ids(got)); diff != "" {
		t.Errorf("Read (-want +got):\n%s", diff)
	}
	page, err := b.Read(ctx, 1000, 10)
	if err != nil || len(page) != 10 || page[0].Seq != 1001 {
		t.Errorf("Read(1000, 10) = %d records from %v, %v; want 10 from 1001", len(page), page[0].Seq, err)
	}
}

func TestAnEventTooLargeIsRefusedForGood(t *testing.T) {
	b := open(t, newOptions())
	e := event(t, "big")
	if err := e.SetData(cloudevents.ApplicationJSON, map[string]string{"x": strings.Repeat("x", 2<<20)}); err != nil {
		t.Fatal(err)
	}
	_, err := b.Append(context.Background(), e)
	if err == nil || !fault.IsPermanent(err) {
		t.Fatalf("Append of 2 MiB = %v, want a permanent error", err)
	}
	if all, err := b.Read(context.Background(), 0, 0); err != nil || len(all) != 0 {
		t.Errorf("stream after the refusal = %v, %v; want empty", ids(all), err)
	}
}

// Two replicas of flotilla on one stream: what one appends wakes and
// reaches the other; a timer both fire is appended once; what one
// schedules wakes the other's timer loop.
func TestReplicasShareTheStream(t *testing.T) {
	ctx := context.Background()
	o := newOptions()
	r1, r2 := open(t, o), open(t, o)

	woken := r2.Changed()
	if _, err := r1.Append(ctx, event(t, "from-r1")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woken:
	case <-time.After(5 * time.Second):
		t.Fatal("r1's append did not wake r2's readers")
	}
	got, err := r2.Read(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"from-r1"}, ids(got)); diff != "" {
		t.Errorf("r2 reads (-want +got):\n%s", diff)
	}

	timersWoken := r2.TimersChanged()
	due := time.Now().Add(time.Hour)
	if err := r1.Schedule(ctx, events.At(event(t, "timer"), due)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-timersWoken:
	case <-time.After(5 * time.Second):
		t.Fatal("r1's timer did not wake r2's timer loop")
	}
	if next, ok, err := r2.NextDue(ctx); err != nil || !ok || next.Sub(due).Abs() > time.Millisecond {
		t.Fatalf("r2's NextDue = %v, %v, %v; want %v", next, ok, err, due)
	}
	var wg sync.WaitGroup
	fired := make([]int, 2)
	errs := make([]error, 2)
	for i, r := range []bus.Bus{r1, r2} {
		wg.Go(func() { fired[i], errs[i] = r.FireDue(ctx, due, 10) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	all, err := r1.Read(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"from-r1", "timer"}, ids(all)); diff != "" {
		t.Errorf("stream after both replicas fired the timer (fired %v) (-want +got):\n%s", fired, diff)
	}
	for _, r := range []bus.Bus{r1, r2} {
		if _, ok, err := r.NextDue(ctx); ok || err != nil {
			t.Errorf("NextDue after the timer fired = %v, %v; want none", ok, err)
		}
	}
}

// Has answers for the events Remember selects, appended by any replica;
// LastSeq and FirstSeq bound the stream.
func TestHasRemembersSelectedEvents(t *testing.T) {
	ctx := context.Background()
	o := newOptions()
	o.Remember = func(e cloudevents.Event) bool { return strings.HasPrefix(e.ID(), "answer-") }
	r1, r2 := open(t, o), open(t, o)
	if _, err := r1.Append(ctx, event(t, "answer-1"), event(t, "other")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		want bool
	}{{"answer-1", true}, {"other", false}, {"answer-2", false}} {
		if got, err := r2.Has(ctx, tc.id); got != tc.want || err != nil {
			t.Errorf("Has(%s) = %v, %v; want %v", tc.id, got, err, tc.want)
		}
	}
	if got := r1.LastSeq(); got != 2 {
		t.Errorf("LastSeq = %d, want 2", got)
	}
	if got := r2.FirstSeq(); got != 0 && got != 1 {
		t.Errorf("FirstSeq = %d", got)
	}
	if _, err := open(t, newOptions()).Has(ctx, "x"); err == nil {
		t.Error("Has without Remember answered")
	}
}

// The cursors a replica saves are listed by prefix on another; Err is nil
// while connected.
func TestCursorNamesAndErr(t *testing.T) {
	ctx := context.Background()
	o := newOptions()
	r1, r2 := open(t, o), open(t, o)
	for _, name := range []string{"cdevents/https://a", "cdevents/https://b", "runtime"} {
		if err := r1.SetCursor(ctx, name, 7); err != nil {
			t.Fatal(err)
		}
	}
	got, err := r2.CursorNames(ctx, "cdevents/")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"cdevents/https://a", "cdevents/https://b"}, got); diff != "" {
		t.Errorf("CursorNames (-want +got):\n%s", diff)
	}
	if err := r2.Err(); err != nil {
		t.Errorf("Err while connected = %v", err)
	}
}

// Events past the stream's MaxAge are gone: a reader behind them reads
// what is left and does not wait for them.
func TestAReaderBehindExpiredEventsGoesOn(t *testing.T) {
	ctx := context.Background()
	o := newOptions()
	o.MaxAge, o.Duplicates = time.Second, time.Second
	b := open(t, o)
	if _, err := b.Append(ctx, event(t, "old-1"), event(t, "old-2")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // the server expires them
	start := time.Now()
	recs, err := b.Read(ctx, 0, 0)
	if err != nil || len(recs) != 0 {
		t.Fatalf("Read after expiry = %v, %v; want nothing", ids(recs), err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Read waited %v for expired events", took)
	}
	if _, err := b.Append(ctx, event(t, "new")); err != nil {
		t.Fatal(err)
	}
	if recs, err := b.Read(ctx, 0, 0); err != nil || len(recs) != 1 || recs[0].Seq != 3 {
		t.Errorf("Read = %v, %v; want new at 3", ids(recs), err)
	}
}
