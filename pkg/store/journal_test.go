package store_test

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
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

func TestAppendRead(t *testing.T) {
	tests := []struct {
		name     string
		calls    [][]string // ids per Append call
		after    uint64
		limit    int
		wantIDs  []string
		wantSeqs []uint64
	}{
		{
			name:     "one call",
			calls:    [][]string{{"a", "b", "c"}},
			wantIDs:  []string{"a", "b", "c"},
			wantSeqs: []uint64{1, 2, 3},
		},
		{
			name:     "several calls keep order",
			calls:    [][]string{{"a"}, {"b", "c"}, {"d"}},
			wantIDs:  []string{"a", "b", "c", "d"},
			wantSeqs: []uint64{1, 2, 3, 4},
		},
		{
			name:     "after skips",
			calls:    [][]string{{"a", "b", "c", "d"}},
			after:    2,
			wantIDs:  []string{"c", "d"},
			wantSeqs: []uint64{3, 4},
		},
		{
			name:     "limit",
			calls:    [][]string{{"a", "b", "c", "d"}},
			after:    1,
			limit:    2,
			wantIDs:  []string{"b", "c"},
			wantSeqs: []uint64{2, 3},
		},
		{
			name:  "after the end",
			calls: [][]string{{"a", "b"}},
			after: 2,
		},
		{
			name:  "after max uint64",
			calls: [][]string{{"a", "b"}},
			after: ^uint64(0),
		},
		{
			name: "empty journal",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openStore(t)
			ctx := t.Context()
			for _, ids := range tt.calls {
				if _, err := s.Append(ctx, events(t, ids...)...); err != nil {
					t.Fatalf("Append: %v", err)
				}
			}
			recs, err := s.Read(ctx, tt.after, tt.limit)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if diff := cmp.Diff(tt.wantIDs, idsOf(recs), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSeqs, seqsOf(recs), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("seqs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadRoundTripsEvent(t *testing.T) {
	s, _ := openStore(t)
	in := event(t, "round-trip")
	in.SetSubject("web")
	in.SetExtension("deliveryid", "d-1")
	in.SetTime(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	if _, err := s.Append(t.Context(), in); err != nil {
		t.Fatalf("Append: %v", err)
	}
	recs, err := s.Read(t.Context(), 0, 10)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if len(recs) != 1 {
		t.Fatalf("got %d records, want 1", len(recs))
	}
	got := recs[0].Event
	if diff := cmp.Diff(in.Context.AsV1(), got.Context.AsV1()); diff != "" {
		t.Errorf("context (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(string(in.Data()), string(got.Data())); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
}

func TestAppendDeduplicates(t *testing.T) {
	tests := []struct {
		name         string
		calls        [][]string
		wantReturned [][]string // ids each call returns
		wantJournal  []string
	}{
		{
			name:         "across calls",
			calls:        [][]string{{"a", "b"}, {"b", "c"}, {"a"}},
			wantReturned: [][]string{{"a", "b"}, {"c"}, {}},
			wantJournal:  []string{"a", "b", "c"},
		},
		{
			name:         "within one call",
			calls:        [][]string{{"a", "a", "b", "a", "b"}},
			wantReturned: [][]string{{"a", "b"}},
			wantJournal:  []string{"a", "b"},
		},
		{
			name:         "all duplicates",
			calls:        [][]string{{"a"}, {"a", "a"}},
			wantReturned: [][]string{{"a"}, {}},
			wantJournal:  []string{"a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openStore(t)
			ctx := t.Context()
			for i, ids := range tt.calls {
				recs, err := s.Append(ctx, events(t, ids...)...)
				if err != nil {
					t.Fatalf("Append %d: %v", i, err)
				}
				if diff := cmp.Diff(tt.wantReturned[i], idsOf(recs), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("Append %d returned (-want +got):\n%s", i, diff)
				}
			}
			recs, err := s.Read(ctx, 0, 0)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if diff := cmp.Diff(tt.wantJournal, idsOf(recs)); diff != "" {
				t.Errorf("journal (-want +got):\n%s", diff)
			}
			if got, want := s.LastSeq(), uint64(len(tt.wantJournal)); got != want {
				t.Errorf("LastSeq = %d, want %d", got, want)
			}
			for _, id := range tt.wantJournal {
				if ok, err := s.Has(ctx, id); err != nil || !ok {
					t.Errorf("Has(%q) = %v, %v; want true", id, ok, err)
				}
			}
			if ok, err := s.Has(ctx, "never"); err != nil || ok {
				t.Errorf("Has(never) = %v, %v; want false", ok, err)
			}
		})
	}
}

func TestAppendRejectsInvalidEvent(t *testing.T) {
	noID := event(t, "x")
	noID.SetID("")
	noSource := event(t, "no-source")
	noSource.Context = noSource.Context.AsV1()
	noSource.Context.(*cloudevents.EventContextV1).Source = cloudevents.URIRef{}
	noType := event(t, "no-type")
	noType.SetType("")

	tests := []struct {
		name    string
		evs     []cloudevents.Event
		wantErr string // substring
	}{
		{name: "missing id", evs: []cloudevents.Event{event(t, "ok-1"), noID}, wantErr: "event 1"},
		{name: "missing source", evs: []cloudevents.Event{noSource, event(t, "ok-1")}, wantErr: `event 0 (id "no-source")`},
		{name: "missing type", evs: []cloudevents.Event{event(t, "ok-1"), event(t, "ok-2"), noType}, wantErr: `event 2 (id "no-type")`},
		{name: "id too long", evs: []cloudevents.Event{event(t, strings.Repeat("x", 40000))}, wantErr: "id is longer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openStore(t)
			changed := s.Changed()
			recs, err := s.Append(t.Context(), tt.evs...)
			if err == nil {
				t.Fatalf("Append succeeded with %d records, want error", len(recs))
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not contain %q", err, tt.wantErr)
			}
			if !fault.IsPermanent(err) {
				t.Errorf("error %q is not permanent: the sender would retry it for ever", err)
			}
			all, err := s.Read(t.Context(), 0, 0)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if len(all) != 0 || s.LastSeq() != 0 {
				t.Errorf("journal has %d records, LastSeq %d; want nothing written", len(all), s.LastSeq())
			}
			if ok, _ := s.Has(t.Context(), "ok-1"); ok {
				t.Error("valid event of the rejected call was journaled")
			}
			select {
			case <-changed:
				t.Error("Changed fired for a rejected append")
			default:
			}
		})
	}
}

func TestChanged(t *testing.T) {
	s, _ := openStore(t)
	ctx := t.Context()

	ch := s.Changed()
	select {
	case <-ch:
		t.Fatal("Changed closed before any append")
	default:
	}

	if _, err := s.Append(ctx, event(t, "a")); err != nil {
		t.Fatalf("Append: %v", err)
	}
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("Changed not closed after append")
	}

	next := s.Changed()
	if next == ch {
		t.Fatal("Changed returned the closed channel again")
	}
	if _, err := s.Append(ctx, event(t, "a")); err != nil { // duplicate only
		t.Fatalf("Append: %v", err)
	}
	select {
	case <-next:
		t.Fatal("Changed closed by an append that added nothing")
	default:
	}

	// A waiter wakes on an append from another goroutine.
	woke := make(chan uint64)
	go func() {
		<-next
		woke <- s.LastSeq()
	}()
	if _, err := s.Append(ctx, event(t, "b")); err != nil {
		t.Fatalf("Append: %v", err)
	}
	select {
	case seq := <-woke:
		if seq != 2 {
			t.Errorf("LastSeq seen by waiter = %d, want 2", seq)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken")
	}
}

func TestAppendConcurrent(t *testing.T) {
	const (
		goroutines = 50
		perG       = 40
	)
	s, _ := openStore(t)
	ctx := t.Context()

	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				// Every id is appended twice, by two different goroutines.
				id := fmt.Sprintf("ev-%d-%d", g/2, i)
				if _, err := s.Append(ctx, event(t, id)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Append: %v", err)
	}

	recs, err := s.Read(ctx, 0, 0)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	want := goroutines / 2 * perG
	if len(recs) != want {
		t.Fatalf("journal has %d records, want %d", len(recs), want)
	}
	seen := map[string]bool{}
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d, want %d", i, r.Seq, i+1)
		}
		if seen[r.Event.ID()] {
			t.Fatalf("id %q journaled twice", r.Event.ID())
		}
		seen[r.Event.ID()] = true
	}
	for g := 0; g < goroutines/2; g++ {
		for i := range perG {
			if id := fmt.Sprintf("ev-%d-%d", g, i); !seen[id] {
				t.Errorf("id %q lost", id)
			}
		}
	}
	if got := s.LastSeq(); got != uint64(want) {
		t.Errorf("LastSeq = %d, want %d", got, want)
	}
}

func TestAppendCancelledContext(t *testing.T) {
	s, _ := openStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Append(ctx, event(t, "a")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append error = %v, want context.Canceled", err)
	}
	if ok, _ := s.Has(t.Context(), "a"); ok {
		t.Error("event journaled although the context was cancelled before the call")
	}
}

func TestAppendAfterClose(t *testing.T) {
	path := t.TempDir() + "/flotilla.db"
	s, err := store.Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.Append(t.Context(), event(t, "a")); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Append after Close = %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
