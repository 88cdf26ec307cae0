package store_test

import (
	"context"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	catalogue "github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

func ids(recs []store.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Event.ID())
	}
	return out
}

func TestTimers(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	now := t0
	s, path := openStore(t, store.WithClock(func() time.Time { return now }))

	changed := s.TimersChanged()
	if err := s.Schedule(ctx,
		catalogue.At(event(t, "later"), t0.Add(2*time.Minute)),
		catalogue.At(event(t, "sooner"), t0.Add(time.Minute)),
		catalogue.At(event(t, "past"), t0.Add(-time.Minute)),
		event(t, "plain"),
	); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Error("TimersChanged was not closed by Schedule")
	}
	recs, err := s.Read(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"past", "plain"}, ids(recs)); diff != "" {
		t.Errorf("journaled at once (-want +got):\n%s", diff)
	}
	due, ok, err := s.NextDue(ctx)
	if err != nil || !ok || !due.Equal(t0.Add(time.Minute)) {
		t.Fatalf("NextDue = %v, %v, %v; want %v", due, ok, err, t0.Add(time.Minute))
	}
	if n, err := s.FireDue(ctx, t0.Add(59*time.Second), 10); n != 0 || err != nil {
		t.Fatalf("FireDue before anything is due = %d, %v", n, err)
	}
	// A timer scheduled twice is one timer.
	if err := s.Schedule(ctx, catalogue.At(event(t, "sooner"), t0.Add(time.Minute))); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Timers(ctx); n != 2 || err != nil {
		t.Fatalf("Timers = %d, %v; want 2", n, err)
	}
	if n, err := s.FireDue(ctx, t0.Add(time.Minute), 10); n != 1 || err != nil {
		t.Fatalf("FireDue at the first due time = %d, %v; want 1", n, err)
	}
	// Timers survive a restart.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, store.WithClock(func() time.Time { return now }))
	if n, err := s.Timers(ctx); n != 1 || err != nil {
		t.Fatalf("Timers after reopening = %d, %v; want 1", n, err)
	}
	if n, err := s.FireDue(ctx, t0.Add(time.Hour), 10); n != 1 || err != nil {
		t.Fatalf("FireDue after reopening = %d, %v; want 1", n, err)
	}
	if _, ok, _ := s.NextDue(ctx); ok {
		t.Error("NextDue reports a timer after all fired")
	}
	recs, err = s.Read(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"past", "plain", "sooner", "later"}, ids(recs)); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	if due, ok := catalogue.Due(recs[3].Event); !ok || !due.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("a fired timer's due time reads back as %v, %v", due, ok)
	}
}

func TestUpdateAndAppendSchedulesTimers(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	s, _ := openStore(t, store.WithClock(func() time.Time { return t0 }))
	var doc struct{ N int }
	recs, err := s.UpdateAndAppend(ctx, "docs", "a", &doc, func(bool) ([]cloudevents.Event, error) {
		doc.N++
		return []cloudevents.Event{event(t, "now"), catalogue.At(event(t, "deadline"), t0.Add(time.Minute))}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"now"}, ids(recs)); diff != "" {
		t.Errorf("journaled (-want +got):\n%s", diff)
	}
	if n, err := s.Timers(ctx); n != 1 || err != nil {
		t.Fatalf("Timers = %d, %v; want 1", n, err)
	}
}

func TestExtDueIsTheCatalogues(t *testing.T) {
	if store.ExtDue != catalogue.ExtDue {
		t.Errorf("store.ExtDue = %q, events.ExtDue = %q", store.ExtDue, catalogue.ExtDue)
	}
}
