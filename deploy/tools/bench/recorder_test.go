package main

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The waits return once every cluster asked for was seen, whatever else
// was, and time out otherwise.
func TestRecorderWaits(t *testing.T) {
	r := newRecorder(nil)
	done := make(chan error, 1)
	go func() { done <- r.waitStarted(t.Context(), time.Minute, "img", []string{"c1", "c2"}) }()
	r.see("img", sighting{cluster: "c1", started: true})
	r.see("other", sighting{cluster: "c2", started: true})
	r.see("img", sighting{cluster: "c3", started: true})
	select {
	case err := <-done:
		t.Fatalf("waitStarted returned (%v) before c2 started", err)
	case <-time.After(50 * time.Millisecond):
	}
	r.see("img", sighting{cluster: "c2", started: true})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := r.until(t.Context(), 50*time.Millisecond, "img", []string{"c1"}, func(s sighting) bool { return !s.started }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("wait for an end that never came = %v, want the deadline", err)
	}
	r.calls["img"] = map[string]*call{"c1": {rollout: "r1"}}
	r.see("img", sighting{cluster: "c1"})
	got, err := r.wait(t.Context(), time.Minute, "img", []string{"c1"})
	if err != nil || got["c1"].rollout != "r1" {
		t.Errorf("wait = %v, %v; want c1's call", got, err)
	}
}
