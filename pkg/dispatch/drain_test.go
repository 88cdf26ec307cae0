package dispatch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/dispatch"
)

// Drain lets the call under way end and starts nothing more: its event is
// handled and journaled, so the next run replays only what was never
// started; a drain whose deadline passes says so.
func TestDrainLetsTheCallUnderWayEnd(t *testing.T) {
	s := newStore(t)
	entered, release := make(chan string, 10), make(chan struct{})
	f := &fn{name: "a", consumes: []string{typeIn}, handle: func(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
		entered <- e.ID()
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return emit(typeOut)(ctx, e)
	}}
	d, err := dispatch.New(s, []dispatch.Function{f}, dispatch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// One key: e2 waits behind e1.
	appendEvents(t, s, rolloutEvents(t, typeIn, "e1", "e2")...)
	stop := start(t, d)
	waitCalls(t, entered, 1)

	short, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := d.Drain(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Drain past its deadline with a call under way: %v, want %v", err, context.DeadlineExceeded)
	}
	drained := make(chan error, 1)
	go func() { drained <- d.Drain(t.Context()) }()
	close(release)
	select {
	case err := <-drained:
		if err != nil {
			t.Fatalf("Drain: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Drain did not return after the call ended")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	waitJournal(t, s, "e1/"+typeOut)
	if diff := cmp.Diff([]string{"e1"}, f.calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	cursor, err := s.Cursor(t.Context(), "runtime")
	if err != nil {
		t.Fatal(err)
	}
	if cursor != 1 {
		t.Errorf("watermark after the drain: %d, want 1 (e1 handled, e2 never started)", cursor)
	}
}
