package bus_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/bus"
)

// log is a Reader over appended sequence numbers whose reads fail while
// failing > 0 (a fake, to inject failures).
type log struct {
	mu      sync.Mutex
	seqs    []uint64
	changed chan struct{}
	failing int
	limits  []int
}

func newLog() *log { return &log{changed: make(chan struct{})} }

func (l *log) append(seqs ...uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seqs = append(l.seqs, seqs...)
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *log) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

func (l *log) Read(_ context.Context, after uint64, limit int) ([]bus.Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.limits = append(l.limits, limit)
	if l.failing > 0 {
		l.failing--
		return nil, errors.New("disk on fire")
	}
	var out []bus.Record
	for _, s := range l.seqs {
		if s > after && (limit <= 0 || len(out) < limit) {
			out = append(out, bus.Record{Seq: s})
		}
	}
	return out, nil
}

// follow runs f over l from after, collecting what handle sees, until
// want records were seen.
func follow(t *testing.T, f bus.Follower, l *log, after uint64, want int, handle func([]bus.Record) error) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var mu sync.Mutex
	var seen []uint64
	done := make(chan error, 1)
	go func() {
		done <- f.Run(ctx, l, after, func(_ context.Context, recs []bus.Record) (uint64, error) {
			mu.Lock()
			defer mu.Unlock()
			if handle != nil {
				if err := handle(recs); err != nil {
					return recs[0].Seq - 1, err
				}
			}
			for _, r := range recs {
				seen = append(seen, r.Seq)
			}
			if len(seen) >= want {
				cancel()
			}
			return recs[len(recs)-1].Seq, nil
		})
	}()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil when ctx ends", err)
	}
	if ctx.Err() != context.Canceled {
		t.Fatalf("gave up waiting: saw %v", seen)
	}
	return seen
}

func TestFollowerReadsInOrderAndWaitsForAppends(t *testing.T) {
	l := newLog()
	l.append(1, 2, 3)
	go func() {
		time.Sleep(20 * time.Millisecond)
		l.append(4, 5)
	}()
	got := follow(t, bus.Follower{Batch: 2}, l, 1, 4, nil)
	if diff := cmp.Diff([]uint64{2, 3, 4, 5}, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

func TestFollowerStallsWithOneBackoffAndResumes(t *testing.T) {
	l := newLog()
	l.append(1, 2)
	l.failing = 3
	var stalls []time.Duration
	resumed := 0
	f := bus.Follower{
		Backoff: time.Millisecond,
		Stalled: func(err error, retryIn time.Duration) { stalls = append(stalls, retryIn) },
		Resumed: func() { resumed++ },
	}
	got := follow(t, f, l, 0, 2, nil)
	if diff := cmp.Diff([]uint64{1, 2}, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond}, stalls); diff != "" {
		t.Errorf("back-off (-want +got):\n%s", diff)
	}
	if resumed != 1 {
		t.Errorf("resumed %d times, want 1", resumed)
	}
}

func TestFollowerRetriesAFailedHandOverFromItsPosition(t *testing.T) {
	l := newLog()
	l.append(1, 2, 3)
	failures := 2
	var stalls int
	f := bus.Follower{Backoff: time.Millisecond, Stalled: func(error, time.Duration) { stalls++ }}
	got := follow(t, f, l, 0, 3, func([]bus.Record) error {
		if failures > 0 {
			failures--
			return errors.New("sink away")
		}
		return nil
	})
	if diff := cmp.Diff([]uint64{1, 2, 3}, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if stalls != 2 {
		t.Errorf("stalled %d times, want 2", stalls)
	}
}

func TestFollowerReadyLimitsAndSkips(t *testing.T) {
	l := newLog()
	l.append(1, 2, 3, 4, 5, 6)
	f := bus.Follower{Batch: 10, Ready: func(_ context.Context, after uint64) (uint64, int, bool) {
		return max(after, 3), 1, true // skip what nobody needs; one at a time
	}}
	got := follow(t, f, l, 0, 3, nil)
	if diff := cmp.Diff([]uint64{4, 5, 6}, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	for _, n := range l.limits {
		if n != 1 {
			t.Fatalf("read limits %v, want 1 each", l.limits)
		}
	}
}

func TestFollowerIdleWaitsInstead(t *testing.T) {
	l := newLog()
	l.append(1)
	idle := 0
	f := bus.Follower{Idle: func(ctx context.Context, changed <-chan struct{}) bool {
		idle++
		if idle == 1 {
			go l.append(2)
		}
		select {
		case <-ctx.Done():
			return false
		case <-changed:
			return true
		}
	}}
	got := follow(t, f, l, 0, 2, nil)
	if diff := cmp.Diff([]uint64{1, 2}, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if idle == 0 {
		t.Error("Idle never ran")
	}
}
