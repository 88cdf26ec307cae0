package tracing_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/store"
	"github.com/flotilla-cd/flotilla/pkg/testkit/otlptest"
	"github.com/flotilla-cd/flotilla/pkg/tracing"
)

// The Tracer follows a real journal and exports through the real
// otlptracehttp exporter to an OTLP/HTTP receiver on loopback, which
// decodes the protobuf.
func TestTracerExportsOverOTLPHTTP(t *testing.T) {
	s, err := store.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	// Before the tracer starts: not traced (it follows the journal from its end).
	old := mustEvent(t, "old", events.TypeWaveStarted, "old-rollout", events.WaveStarted{RolloutID: "old-rollout"})
	if _, err := s.Append(t.Context(), old); err != nil {
		t.Fatal(err)
	}

	recv := otlptest.NewReceiver()
	t.Cleanup(recv.Close)
	tr, err := tracing.New(t.Context(), s, recv.URL(), tracing.WithHeaders(map[string]string{"Authorization": "Bearer sesame"}),
		tracing.WithInstance("flotilla-test"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx) }()

	const rid = "app-1"
	wave := mustEvent(t, "w", events.TypeWaveStarted, rid, events.WaveStarted{RolloutID: rid, Wave: 0, Clusters: []string{"c1"}})
	req := mustEvent(t, "w/run", events.TypePipelineRunRequested, rid, events.PipelineRunRequested{RolloutID: rid, Cluster: "c1", Purpose: events.PurposeApply, Step: 1})
	fin := mustEvent(t, "w/run/fin", events.TypePipelineRunFinished, rid, events.PipelineRunFinished{RolloutID: rid, Cluster: "c1", Purpose: events.PurposeApply, Step: 1})
	ok := mustEvent(t, "w/ok", events.TypeClusterSucceeded, rid, events.ClusterResult{RolloutID: rid, Cluster: "c1"})
	wok := mustEvent(t, "w/done", events.TypeWaveSucceeded, rid, events.WaveResult{RolloutID: rid})
	end := mustEvent(t, "end", events.TypeRolloutSucceeded, rid, events.RolloutResult{RolloutID: rid})
	if _, err := s.Append(t.Context(), wave, req, fin, ok, wok, end); err != nil {
		t.Fatal(err)
	}
	// The batcher exports within its delay (5s), without waiting for Run
	// to end.
	deadline := time.After(20 * time.Second)
	for !hasRoot(recv.Spans()) {
		changed := recv.Changed()
		if hasRoot(recv.Spans()) {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no root span received; got %v", recv.Spans())
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
	}

	spans := recv.Spans()
	byID := map[string]otlptest.Span{}
	for _, sp := range spans {
		byID[sp.SpanID] = sp
	}
	var got []string
	for _, sp := range spans {
		parent := "-"
		if sp.ParentID != "" {
			parent = byID[sp.ParentID].Name
		}
		got = append(got, fmt.Sprintf("%s < %s", sp.Name, parent))
		if sp.TraceID != tracing.TraceID(rid).String() {
			t.Errorf("span %s in trace %s, want %s", sp.Name, sp.TraceID, tracing.TraceID(rid))
		}
		if diff := cmp.Diff(map[string]string{"service.name": "flotilla", "service.instance.id": "flotilla-test"}, sp.Resource); diff != "" {
			t.Errorf("span %s: resource (-want +got):\n%s", sp.Name, diff)
		}
	}
	want := []string{"pipeline apply c1 < cluster c1", "cluster c1 < wave 1", "wave 1 < rollout " + rid, "rollout " + rid + " < -"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spans, child < parent (-want +got):\n%s", diff)
	}
	for i, h := range recv.Headers() {
		if h.Get("Authorization") != "Bearer sesame" || h.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("export %d: headers %v", i, h)
		}
	}
	for _, p := range recv.Paths() {
		if p != tracing.DefaultPath {
			t.Errorf("exported to %s, want %s", p, tracing.DefaultPath)
		}
	}
}

func TestNewRefusesABadEndpoint(t *testing.T) {
	s, err := store.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	for _, u := range []string{"", "localhost:4318", "grpc://collector:4317", "http://"} {
		if _, err := tracing.New(t.Context(), s, u); err == nil {
			t.Errorf("New(%q): no error", u)
		}
	}
}

func mustEvent(t *testing.T, id, typ, rid string, payload any) cloudevents.Event {
	t.Helper()
	e, err := events.New(id, "/test", typ, payload)
	if err != nil {
		t.Fatal(err)
	}
	e.SetExtension(events.ExtRolloutID, rid)
	return e
}

func hasRoot(spans []otlptest.Span) bool {
	for _, s := range spans {
		if s.ParentID == "" {
			return true
		}
	}
	return false
}
