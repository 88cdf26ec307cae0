package app

import (
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/testkit/otlptest"
	"github.com/flotilla-cd/flotilla/pkg/tracing"
)

// With telemetry.tracing set, serve exports the journal's rollouts to the
// endpoint, with the configured headers, as this instance.
func TestServeExportsTraces(t *testing.T) {
	recv := otlptest.NewReceiver()
	t.Cleanup(recv.Close)
	t.Setenv("FLOTILLA_TEST_OTLP_AUTH", "Bearer sesame")
	cfg := testConfig(t, "  instance: traced\ntelemetry:\n  tracing:\n    endpoint: "+recv.URL()+"/v1/traces\n"+
		"    headers: {Authorization: {env: FLOTILLA_TEST_OTLP_AUTH}}\n")
	s := runServer(t, cfg, Options{NoPrune: true})

	const rid = "podinfo-0123456789"
	var evs []string
	for _, e := range []struct {
		id, typ string
		payload any
	}{
		{"w", events.TypeWaveStarted, events.WaveStarted{RolloutID: rid, Clusters: []string{"c1"}}},
		{"w/ok", events.TypeRolloutSucceeded, events.RolloutResult{RolloutID: rid}},
	} {
		ev, err := events.New(e.id, "/test", e.typ, e.payload)
		if err != nil {
			t.Fatal(err)
		}
		ev.SetExtension(events.ExtRolloutID, rid)
		if _, err := s.store.Append(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e.id)
	}
	deadline := time.After(20 * time.Second)
	for {
		changed := recv.Changed()
		if spans := recv.Spans(); len(spans) == 2 {
			for _, sp := range spans {
				if sp.TraceID != tracing.TraceID(rid).String() || sp.Resource["service.instance.id"] != "traced" {
					t.Errorf("span %+v: want trace %s of instance traced", sp, tracing.TraceID(rid))
				}
			}
			if h := recv.Headers()[0].Get("Authorization"); h != "Bearer sesame" {
				t.Errorf("Authorization %q", h)
			}
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("spans of %v: got %+v", evs, recv.Spans())
		}
	}
}
