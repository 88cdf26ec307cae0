package dispatch_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/dispatch"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// sink is a real CloudEvents HTTP receiver. It answers 500 to the first
// refuse requests, then records every event it accepts.
type sink struct {
	URL string

	mu       sync.Mutex
	refuse   int
	attempts map[string]int
	got      []cloudevents.Event
	accepted chan string
	refused  chan string // non-blocking: tests that care read it
}

func newSink(t *testing.T, refuse int) *sink {
	t.Helper()
	s := &sink{refuse: refuse, attempts: map[string]int{}, accepted: make(chan string, 100), refused: make(chan string, 1)}
	p, err := cloudevents.NewHTTP()
	if err != nil {
		t.Fatal(err)
	}
	receive, err := cloudevents.NewHTTPReceiveHandler(context.Background(), p, func(e cloudevents.Event) {
		s.mu.Lock()
		s.got = append(s.got, e)
		s.mu.Unlock()
		s.accepted <- e.ID()
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.attempts[r.Header.Get("Ce-Id")]++
		refused := s.refuse > 0
		if refused {
			s.refuse--
		}
		s.mu.Unlock()
		if refused {
			select {
			case s.refused <- r.Header.Get("Ce-Id"):
			default:
			}
			http.Error(w, "sink unavailable", http.StatusInternalServerError)
			return
		}
		receive.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

func (s *sink) events() []cloudevents.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]cloudevents.Event(nil), s.got...)
}

func newMirror(t *testing.T, s *store.Store, url string) *dispatch.Mirror {
	t.Helper()
	m, err := dispatch.NewMirror(s, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMirrorPostsEveryEventInOrder(t *testing.T) {
	s := newStore(t)
	snk := newSink(t, 0)
	var in []cloudevents.Event
	for _, id := range []string{"e1", "e2", "e3"} {
		in = append(in, newEvent(t, id, typeIn))
	}
	appendEvents(t, s, in...)
	start(t, newMirror(t, s, snk.URL))
	waitCalls(t, snk.accepted, 3)
	// Events journaled while the mirror runs follow.
	appendEvents(t, s, newEvent(t, "e4", typeOut))
	waitCalls(t, snk.accepted, 1)

	type summary struct{ ID, Type, Source, Data string }
	var got []summary
	for _, e := range snk.events() {
		got = append(got, summary{e.ID(), e.Type(), e.Source(), string(e.Data())})
	}
	want := []summary{
		{"e1", typeIn, "/test", `{"id":"e1"}`},
		{"e2", typeIn, "/test", `{"id":"e2"}`},
		{"e3", typeIn, "/test", `{"id":"e3"}`},
		{"e4", typeOut, "/test", `{"id":"e4"}`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sink received (-want +got):\n%s", diff)
	}
}

func TestMirrorRetriesWhileSinkFails(t *testing.T) {
	s := newStore(t)
	snk := newSink(t, 2)
	appendEvents(t, s, newEvent(t, "e1", typeIn), newEvent(t, "e2", typeIn))
	start(t, newMirror(t, s, snk.URL))
	if diff := cmp.Diff([]string{"e1", "e2"}, waitCalls(t, snk.accepted, 2)); diff != "" {
		t.Errorf("accepted (-want +got):\n%s", diff)
	}
	snk.mu.Lock()
	defer snk.mu.Unlock()
	if diff := cmp.Diff(map[string]int{"e1": 3, "e2": 1}, snk.attempts); diff != "" {
		t.Errorf("attempts per event (-want +got):\n%s", diff)
	}
}

// TestMirrorStopsWhileSinkIsDown cancels a mirror retrying against a sink
// that refuses everything: Run returns at once and acknowledges nothing.
func TestMirrorStopsWhileSinkIsDown(t *testing.T) {
	s := newStore(t)
	snk := newSink(t, 1<<30)
	appendEvents(t, s, newEvent(t, "e1", typeIn))
	stop := start(t, newMirror(t, s, snk.URL))
	// The first refusal shows the mirror is retrying.
	if diff := cmp.Diff([]string{"e1"}, waitCalls(t, snk.refused, 1)); diff != "" {
		t.Errorf("refused (-want +got):\n%s", diff)
	}
	if err := stop(); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	if cursor, err := s.Cursor(t.Context(), "sink"); err != nil || cursor != 0 {
		t.Errorf("sink cursor = %d, %v; want 0, nothing acknowledged", cursor, err)
	}
}

func TestMirrorResumesFromCursor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	s := openStore(t, path)
	snk := newSink(t, 0)
	appendEvents(t, s, newEvent(t, "e1", typeIn), newEvent(t, "e2", typeIn), newEvent(t, "e3", typeIn))
	stop := start(t, newMirror(t, s, snk.URL))
	waitCalls(t, snk.accepted, 3)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	cursor, err := s.Cursor(t.Context(), "sink")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, path)
	appendEvents(t, s, newEvent(t, "e4", typeIn))
	start(t, newMirror(t, s, snk.URL))
	// At least once: what the sink acknowledged after the cursor was last
	// saved is sent again; nothing before it.
	want := []string{"e1", "e2", "e3", "e4"}[cursor:]
	if diff := cmp.Diff(want, waitCalls(t, snk.accepted, len(want))); diff != "" {
		t.Errorf("after restart the sink received (-want +got):\n%s", diff)
	}
	if cursor < 2 {
		t.Errorf("cursor after the sink acknowledged 3 events = %d, want at least 2", cursor)
	}
}

// TestMirrorTransforms posts what the transform makes of each event under
// the mirror's own cursor: two for one, none for another, and an event it
// fails on for good is skipped.
func TestMirrorTransforms(t *testing.T) {
	s := newStore(t)
	snk := newSink(t, 0)
	appendEvents(t, s, newEvent(t, "e1", typeIn), newEvent(t, "e2", typeIn), newEvent(t, "e3", typeIn), newEvent(t, "e4", typeIn))
	calls := map[string]int{}
	m := newMirror(t, s, snk.URL).WithTransform("translated", func(_ context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
		calls[e.ID()]++
		switch e.ID() {
		case "e1":
			a, b := e.Clone(), e.Clone()
			a.SetID("e1-a")
			b.SetID("e1-b")
			return []cloudevents.Event{a, b}, nil
		case "e2":
			return nil, nil
		case "e3":
			return nil, fault.Permanent(errors.New("cannot translate"))
		}
		if calls[e.ID()] == 1 { // a transient failure first
			return nil, errors.New("state busy")
		}
		out := e.Clone()
		out.SetType(typeOut)
		return []cloudevents.Event{out}, nil
	})
	start(t, m)
	waitCalls(t, snk.accepted, 3)
	var got []string
	for _, e := range snk.events() {
		got = append(got, e.ID()+" "+e.Type())
	}
	if diff := cmp.Diff([]string{"e1-a " + typeIn, "e1-b " + typeIn, "e4 " + typeOut}, got); diff != "" {
		t.Errorf("sink received (-want +got):\n%s", diff)
	}
	// The cursor is saved once the batch is posted.
	var seq uint64
	for deadline := time.Now().Add(10 * time.Second); seq == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var err error
		if seq, err = s.Cursor(t.Context(), "translated"); err != nil {
			t.Fatal(err)
		}
	}
	if sink, _ := s.Cursor(t.Context(), "sink"); seq == 0 || sink != 0 {
		t.Errorf("cursors: translated %d, sink %d; want the mirror's own only", seq, sink)
	}
}

func TestForgetMirrorsExcept(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	for _, c := range []string{"cdevents:http://a/", "cdevents:http://b/", "sink", "functions"} {
		if err := s.SetCursor(ctx, c, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := dispatch.ForgetMirrorsExcept(ctx, s, "cdevents:", []string{"cdevents:http://b/"}); err != nil {
		t.Fatal(err)
	}
	names, err := s.CursorNames(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"cdevents:http://b/", "functions", "sink"}, names); diff != "" {
		t.Errorf("cursors left (-want +got):\n%s", diff)
	}
}

// A mirror whose cursor could not be read at start (NATS busy past its
// bound) used to return from Run, sending nothing more until a restart.
// It retries until the read works.
func TestMirrorRetriesReadingItsCursor(t *testing.T) {
	s := newStore(t)
	j := &journalFailing{Store: s, err: errors.New("nats: timeout")}
	j.reads.Store(true)
	snk := newSink(t, 0)
	m, err := dispatch.NewMirror(j, snk.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, newEvent(t, "e1", typeIn))
	start(t, m)
	time.Sleep(300 * time.Millisecond) // a few failed reads
	j.reads.Store(false)
	if diff := cmp.Diff([]string{"e1"}, waitCalls(t, snk.accepted, 1)); diff != "" {
		t.Errorf("the sink received (-want +got):\n%s", diff)
	}
}
