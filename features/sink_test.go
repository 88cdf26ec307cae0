package features

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// sink receives the CloudEvents flotilla mirrors (events.sink in its config),
// so scenarios watch what flotilla recorded, in order, as it happens.
type sink struct {
	srv     *httptest.Server
	mu      sync.Mutex
	seen    map[string]bool
	events  []cloudevents.Event
	changed chan struct{}
}

func newSink(ctx context.Context) (*sink, error) {
	s := &sink{seen: map[string]bool{}, changed: make(chan struct{})}
	p, err := cloudevents.NewHTTP()
	if err != nil {
		return nil, err
	}
	h, err := cloudevents.NewHTTPReceiveHandler(ctx, p, func(e cloudevents.Event) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.seen[e.ID()] { // the mirror delivers at least once
			return
		}
		s.seen[e.ID()] = true
		s.events = append(s.events, e)
		close(s.changed)
		s.changed = make(chan struct{})
	})
	if err != nil {
		return nil, err
	}
	s.srv = httptest.NewServer(h)
	return s, nil
}

func (s *sink) close() { s.srv.Close() }

// all returns the events received so far.
func (s *sink) all() []cloudevents.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]cloudevents.Event(nil), s.events...)
}

// waitFor waits until pred holds for some received event and returns it.
func (s *sink) waitFor(ctx context.Context, what string, pred func(cloudevents.Event) bool) (cloudevents.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	for {
		s.mu.Lock()
		for _, e := range s.events {
			if pred(e) {
				s.mu.Unlock()
				return e, nil
			}
		}
		changed, n := s.changed, len(s.events)
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return cloudevents.Event{}, fmt.Errorf("waiting for %s among %d events: %w\n%s", what, n, ctx.Err(), s.summary())
		}
	}
}

func (s *sink) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := ""
	for _, e := range s.events {
		out += fmt.Sprintf("  %s %s %s\n", e.Type(), e.ID(), string(e.Data()))
	}
	return out
}
