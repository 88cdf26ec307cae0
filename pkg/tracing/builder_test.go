package tracing

import (
	"fmt"
	"slices"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/flotilla-cd/flotilla/events"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// journal builds the events of a test in journal order, each a second
// after t0 times its at.
type journal struct {
	t   *testing.T
	evs []cloudevents.Event
}

// add appends an event; parent, when set, is the event it derives from
// (its id is derived as events.Derive does).
func (j *journal) add(at int, parent *cloudevents.Event, id, typ, rollout string, payload any) cloudevents.Event {
	j.t.Helper()
	if parent != nil {
		id = parent.ID() + "/" + typ + "/" + id
	}
	e, err := events.New(id, "/test", typ, payload)
	if err != nil {
		j.t.Fatal(err)
	}
	e.SetTime(t0.Add(time.Duration(at) * time.Second))
	if rollout != "" {
		e.SetExtension(events.ExtRolloutID, rollout)
	}
	j.evs = append(j.evs, e)
	return e
}

// got is a span as the tests compare it: times in seconds after t0, its
// parent by name.
type got struct {
	Name, Parent string
	Start, End   int
	Status       string
	Events       []string
}

// build runs evs through a builder and returns the spans exported.
func build(t *testing.T, evs []cloudevents.Event, ratio float64) (*Builder, tracetest.SpanStubs) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := NewTracerProvider(ratio, sdktrace.WithSyncer(exp))
	b := NewBuilder(tp)
	for _, e := range evs {
		b.Add(t.Context(), e)
	}
	if err := tp.ForceFlush(t.Context()); err != nil {
		t.Fatal(err)
	}
	return b, exp.GetSpans()
}

// view checks the spans' trace and parent ids and returns them as got,
// ordered by start then name.
func view(t *testing.T, rid string, spans tracetest.SpanStubs) []got {
	t.Helper()
	names := map[string]string{}
	for _, s := range spans {
		names[s.SpanContext.SpanID().String()] = s.Name
	}
	var out []got
	for _, s := range spans {
		if s.SpanContext.TraceID() != TraceID(rid) {
			t.Errorf("span %q: trace %s, want %s", s.Name, s.SpanContext.TraceID(), TraceID(rid))
		}
		g := got{Name: s.Name, Start: int(s.StartTime.Sub(t0) / time.Second), End: int(s.EndTime.Sub(t0) / time.Second)}
		if s.Parent.IsValid() {
			if g.Parent = names[s.Parent.SpanID().String()]; g.Parent == "" {
				t.Errorf("span %q: parent %s was not exported", s.Name, s.Parent.SpanID())
			}
			if s.Parent.TraceID() != TraceID(rid) {
				t.Errorf("span %q: parent in trace %s", s.Name, s.Parent.TraceID())
			}
		} else if s.SpanContext.SpanID() != RootSpanID(rid) {
			t.Errorf("root span %q: id %s, want %s", s.Name, s.SpanContext.SpanID(), RootSpanID(rid))
		}
		if s.Status.Code == codes.Error {
			g.Status = "error: " + s.Status.Description
		}
		for _, ev := range s.Events {
			g.Events = append(g.Events, fmt.Sprintf("%s@%d", ev.Name, int(ev.Time.Sub(t0)/time.Second)))
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b got) int {
		if a.Start != b.Start {
			return a.Start - b.Start
		}
		return cmpString(a.Name, b.Name)
	})
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func run(j *journal, at int, cause cloudevents.Event, rid, cluster, purpose string, wave, step int) cloudevents.Event {
	return j.add(at, &cause, fmt.Sprintf("%s/%s/%d", cluster, purpose, step), events.TypePipelineRunRequested, rid, events.PipelineRunRequested{
		RolloutID: rid, Wave: wave, Cluster: cluster, Purpose: purpose, Step: step, Image: "reg/demo/app@sha256:1"})
}

func finished(j *journal, at int, req cloudevents.Event, rid, cluster, purpose string, wave, step int, errMsg string) {
	j.add(at, &req, "", events.TypePipelineRunFinished, rid, events.PipelineRunFinished{
		RolloutID: rid, Wave: wave, Cluster: cluster, Purpose: purpose, Step: step, Error: errMsg})
}

func cluster(j *journal, at int, cause cloudevents.Event, typ, rid, name string, wave int, reason string) {
	j.add(at, &cause, name, typ, rid, events.ClusterResult{RolloutID: rid, Wave: wave, Cluster: name, Reason: reason})
}

func TestBuilder(t *testing.T) {
	const rid = "app-0123456789"
	tests := []struct {
		name    string
		journal func(j *journal)
		want    []got
	}{{
		name: "a push through two waves is one trace: the push, each wave, each cluster's apply",
		journal: func(j *journal) {
			p := j.add(0, nil, "push-1", events.TypeImagePushed, "", events.ImagePushed{Registry: "reg", Repository: "demo/app", Tag: "1.1.0", Sender: "distribution"})
			v := j.add(1, &p, "", events.TypeImageVerified, "", events.ImageVerified{Image: "reg/demo/app", Tag: "1.1.0", Digest: "sha256:1"})
			s := j.add(2, &v, "app", events.TypeRolloutStarted, rid, events.RolloutStarted{RolloutID: rid, Application: "app", Image: "reg/demo/app", Tag: "1.1.0", Digest: "sha256:1", Waves: [][]string{{"c1"}, {"c2", "c3"}}})
			w1 := j.add(2, &v, "app", events.TypeWaveStarted, rid, events.WaveStarted{RolloutID: rid, Wave: 0, Clusters: []string{"c1"}})
			r := run(j, 3, w1, rid, "c1", events.PurposeApply, 0, 1)
			j.add(3, &r, "", events.TypePipelineRunStarted, rid, events.PipelineRunStart{RolloutID: rid, Cluster: "c1", Purpose: events.PurposeApply, Step: 1})
			finished(j, 4, r, rid, "c1", events.PurposeApply, 0, 1, "")
			cluster(j, 4, r, events.TypeClusterApplied, rid, "c1", 0, "")
			cluster(j, 5, r, events.TypeClusterSucceeded, rid, "c1", 0, "")
			j.add(6, &s, "0", events.TypeWaveSucceeded, rid, events.WaveResult{RolloutID: rid, Wave: 0})
			w2 := j.add(6, &s, "1", events.TypeWaveStarted, rid, events.WaveStarted{RolloutID: rid, Wave: 1, Clusters: []string{"c2", "c3"}})
			r2 := run(j, 7, w2, rid, "c2", events.PurposeApply, 1, 1)
			r3 := run(j, 7, w2, rid, "c3", events.PurposeApply, 1, 1)
			finished(j, 8, r2, rid, "c2", events.PurposeApply, 1, 1, "")
			finished(j, 8, r3, rid, "c3", events.PurposeApply, 1, 1, "")
			cluster(j, 9, r2, events.TypeClusterSucceeded, rid, "c2", 1, "")
			cluster(j, 10, r3, events.TypeClusterSucceeded, rid, "c3", 1, "")
			j.add(10, &s, "1", events.TypeWaveSucceeded, rid, events.WaveResult{RolloutID: rid, Wave: 1})
			j.add(10, &s, "", events.TypeRolloutSucceeded, rid, events.RolloutResult{RolloutID: rid})
		},
		want: []got{
			{Name: "push reg/demo/app:1.1.0", Parent: "rollout app 1.1.0", Start: 0, End: 1},
			{Name: "rollout app 1.1.0", Start: 0, End: 10},
			{Name: "wave 1", Parent: "rollout app 1.1.0", Start: 2, End: 6},
			{Name: "cluster c1", Parent: "wave 1", Start: 3, End: 5, Events: []string{"applied@4"}},
			{Name: "pipeline apply c1", Parent: "cluster c1", Start: 3, End: 4, Events: []string{"started@3"}},
			{Name: "wave 2", Parent: "rollout app 1.1.0", Start: 6, End: 10},
			{Name: "cluster c2", Parent: "wave 2", Start: 7, End: 9},
			{Name: "cluster c3", Parent: "wave 2", Start: 7, End: 10},
			{Name: "pipeline apply c2", Parent: "cluster c2", Start: 7, End: 8},
			{Name: "pipeline apply c3", Parent: "cluster c3", Start: 7, End: 8},
		},
	}, {
		name: "a failed cluster fails its wave; the rollback reverts it",
		journal: func(j *journal) {
			s := j.add(0, nil, "plan", events.TypeRolloutStarted, rid, events.RolloutStarted{RolloutID: rid, Application: "app", Tag: "1.2.0"})
			w := j.add(0, nil, "wave", events.TypeWaveStarted, rid, events.WaveStarted{RolloutID: rid, Wave: 0, Clusters: []string{"c1"}})
			r := run(j, 1, w, rid, "c1", events.PurposeApply, 0, 1)
			finished(j, 2, r, rid, "c1", events.PurposeApply, 0, 1, "")
			cluster(j, 3, r, events.TypeClusterFailed, rid, "c1", 0, "analysis failed")
			f := j.add(3, &s, "", events.TypeRolloutFailed, rid, events.RolloutResult{RolloutID: rid, Reason: "c1 failed"})
			rv := run(j, 4, f, rid, "c1", events.PurposeRevert, 0, 2)
			finished(j, 5, rv, rid, "c1", events.PurposeRevert, 0, 2, "")
			cluster(j, 6, rv, events.TypeClusterReverted, rid, "c1", 0, "")
			j.add(7, &f, "", events.TypeRolloutRolledBack, rid, events.RolloutResult{RolloutID: rid})
		},
		want: []got{
			{Name: "rollout app 1.2.0", Start: 0, End: 7, Status: "error: rolled back: c1 failed", Events: []string{"failed@3"}},
			{Name: "wave 1", Parent: "rollout app 1.2.0", Start: 0, End: 3, Status: "error: c1 failed"},
			{Name: "cluster c1", Parent: "wave 1", Start: 1, End: 3, Status: "error: analysis failed"},
			{Name: "pipeline apply c1", Parent: "cluster c1", Start: 1, End: 2},
			{Name: "rollback", Parent: "rollout app 1.2.0", Start: 3, End: 7},
			{Name: "pipeline revert c1", Parent: "revert c1", Start: 4, End: 5},
			{Name: "revert c1", Parent: "rollback", Start: 4, End: 6},
		},
	}, {
		name: "a failed run; a rollback that fails; spans still open end with the rollout",
		journal: func(j *journal) {
			w := j.add(0, nil, "wave", events.TypeWaveStarted, rid, events.WaveStarted{RolloutID: rid, Wave: 0, Clusters: []string{"c1", "c2"}})
			r := run(j, 1, w, rid, "c1", events.PurposeApply, 0, 1)
			run(j, 1, w, rid, "c2", events.PurposeApply, 0, 1)
			finished(j, 2, r, rid, "c1", events.PurposeApply, 0, 1, "pipeline failed: boom")
			cluster(j, 2, r, events.TypeClusterFailed, rid, "c1", 0, "pipeline failed: boom")
			f := j.add(3, nil, "failed", events.TypeRolloutFailed, rid, events.RolloutResult{RolloutID: rid, Reason: "c1"})
			run(j, 4, f, rid, "c1", events.PurposeRevert, 0, 2)
			j.add(5, &f, "", events.TypeRolloutRollbackFailed, rid, events.RolloutResult{RolloutID: rid, Reason: "c1 not reverted"})
		},
		want: []got{
			// Its start was not seen (a restart): the root starts at the
			// first event seen.
			{Name: "rollout " + rid, Start: 0, End: 5, Status: "error: rollback failed: c1 not reverted", Events: []string{"failed@3"}},
			{Name: "wave 1", Parent: "rollout " + rid, Start: 0, End: 3, Status: "error: c1"},
			{Name: "cluster c1", Parent: "wave 1", Start: 1, End: 2, Status: "error: pipeline failed: boom"},
			{Name: "cluster c2", Parent: "wave 1", Start: 1, End: 5},
			{Name: "pipeline apply c1", Parent: "cluster c1", Start: 1, End: 2, Status: "error: pipeline failed: boom"},
			{Name: "pipeline apply c2", Parent: "cluster c2", Start: 1, End: 5},
			{Name: "rollback", Parent: "rollout " + rid, Start: 3, End: 5, Status: "error: rollback failed: c1 not reverted"},
			{Name: "pipeline revert c1", Parent: "revert c1", Start: 4, End: 5},
			{Name: "revert c1", Parent: "rollback", Start: 4, End: 5},
		},
	}, {
		name: "events of no rollout, and ends of what never started, make nothing",
		journal: func(j *journal) {
			j.add(0, nil, "push", events.TypeImagePushed, "", events.ImagePushed{Registry: "reg", Repository: "demo/app", Tag: "1"})
			j.add(1, nil, "ok", events.TypeClusterSucceeded, rid, events.ClusterResult{RolloutID: rid, Cluster: "c1"})
			j.add(2, nil, "done", events.TypeRolloutSucceeded, rid, events.RolloutResult{RolloutID: rid})
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &journal{t: t}
			tt.journal(j)
			b, spans := build(t, j.evs, 1)
			if diff := cmp.Diff(tt.want, view(t, rid, spans)); diff != "" {
				t.Errorf("spans (-want +got):\n%s", diff)
			}
			if len(b.rollouts) != 0 {
				t.Errorf("%d rollouts still followed after they ended", len(b.rollouts))
			}
		})
	}
}

func TestBuilderPartialRootIsMarked(t *testing.T) {
	const rid = "r"
	j := &journal{t: t}
	w := j.add(0, nil, "wave", events.TypeWaveStarted, rid, events.WaveStarted{RolloutID: rid, Wave: 0})
	j.add(1, &w, "", events.TypeRolloutSucceeded, rid, events.RolloutResult{RolloutID: rid})
	_, spans := build(t, j.evs, 1)
	for _, s := range spans {
		if s.Name != "rollout r" {
			continue
		}
		for _, a := range s.Attributes {
			if a.Key == AttrPartial && a.Value.AsBool() {
				return
			}
		}
		t.Fatalf("root attributes %v: want %s=true", s.Attributes, AttrPartial)
	}
	t.Fatal("no root span")
}

// A rollout sampled out has none of its spans exported; the decision is
// the trace id's, so every flotilla agrees.
func TestBuilderSamplesWholeTraces(t *testing.T) {
	j := &journal{t: t}
	for i := range 50 {
		rid := fmt.Sprintf("r%d", i)
		w := j.add(0, nil, rid+"/wave", events.TypeWaveStarted, rid, events.WaveStarted{RolloutID: rid, Wave: 0, Clusters: []string{"c1"}})
		j.add(1, &w, "", events.TypeWaveSucceeded, rid, events.WaveResult{RolloutID: rid})
		j.add(2, &w, "", events.TypeRolloutSucceeded, rid, events.RolloutResult{RolloutID: rid})
	}
	_, spans := build(t, j.evs, 0.5)
	perTrace := map[string]int{}
	for _, s := range spans {
		perTrace[s.SpanContext.TraceID().String()]++
	}
	for tid, n := range perTrace {
		if n != 2 {
			t.Errorf("trace %s: %d spans, want the rollout's 2", tid, n)
		}
	}
	if len(perTrace) == 0 || len(perTrace) == 50 {
		t.Errorf("%d of 50 traces kept at ratio 0.5", len(perTrace))
	}
	if _, spans := build(t, j.evs, 0); len(spans) != 0 {
		t.Errorf("ratio 0 exported %d spans", len(spans))
	}
}

// Memory stays bounded: pushes that start no rollout and rollouts that
// never end are forgotten past the bounds.
func TestBuilderBounds(t *testing.T) {
	b := NewBuilder(NewTracerProvider(1))
	b.max = 3
	for i := range 3*MaxPushes + 1 {
		e, err := events.New(fmt.Sprintf("push-%d", i), "/test", events.TypeImagePushed, events.ImagePushed{Registry: "r", Repository: "a", Tag: "1"})
		if err != nil {
			t.Fatal(err)
		}
		b.Add(t.Context(), e)
	}
	if n := len(b.pushes.m); n != 2*MaxPushes {
		t.Errorf("%d pushes remembered, want %d", n, 2*MaxPushes)
	}
	for i := range 5 {
		rid := fmt.Sprintf("r%d", i)
		e, err := events.New(rid, "/test", events.TypeWaveStarted, events.WaveStarted{RolloutID: rid})
		if err != nil {
			t.Fatal(err)
		}
		e.SetTime(t0.Add(time.Duration(i) * time.Second))
		e.SetExtension(events.ExtRolloutID, rid)
		b.Add(t.Context(), e)
	}
	var followed []string
	for id := range b.rollouts {
		followed = append(followed, id)
	}
	slices.Sort(followed)
	if diff := cmp.Diff([]string{"r2", "r3", "r4"}, followed); diff != "" {
		t.Errorf("rollouts followed (-want +got):\n%s", diff)
	}
}
