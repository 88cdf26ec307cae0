package rollback_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/functions/internal/functiontest"
	"github.com/flotilla-cd/flotilla/functions/rollback"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
)

const (
	rolloutID = "shop-1"
	image     = "registry.test/team/shop"
	ref       = image + "@sha256:new"
)

var now = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// prev is what cluster c ran before the rollout.
func prev(c string) string { return image + "@sha256:old-" + c }

// fakeStatus stands in for the clusters' canary status: each cluster's
// status is what the test set last, for the canary of app()'s workload.
type fakeStatus struct {
	mu sync.Mutex
	st map[string]rollout.CanaryStatus
}

func (f *fakeStatus) set(cl string, st rollout.CanaryStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st == nil {
		f.st = map[string]rollout.CanaryStatus{}
	}
	f.st[cl] = st
}

func (f *fakeStatus) CanaryStatus(_ context.Context, cl, namespace string, w config.Workload) (rollout.CanaryStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.st[cl]
	if !ok || namespace != "web" || w != app().Workload {
		return rollout.CanaryStatus{}, errors.New("connection refused")
	}
	return st, nil
}

// settledOn is a canary at rest with both workloads on img.
func settledOn(img string) rollout.CanaryStatus {
	return rollout.CanaryStatus{Phase: "Succeeded", PrimaryImage: img, TargetImage: img}
}

func app() config.Application {
	return config.Application{
		Name: "shop", Image: image, Namespace: "web",
		Workload: config.Workload{Kind: "Deployment", Name: "shop-api", Container: "api"},
		Service:  config.Service{Port: 8080},
		Delivery: config.Delivery{Interval: config.Duration{Duration: time.Second}, Iterations: 2, Threshold: 1,
			ProgressDeadline: config.Duration{Duration: time.Minute}},
	}
}

// The step's deadline: (2 iterations + 1 threshold + 3) x 1s + 1m + 2m.
var deadline = now.Add(3*time.Minute + 6*time.Second)

func newFunction(repo *embedded.Repo, status *fakeStatus) *rollback.Function {
	return rollback.New(&config.Config{Applications: []config.Application{app()}}, repo, status, func() time.Time { return now })
}

// failedRollout stores a rollout that failed in its second wave: c1 took the
// digest in wave 1; in wave 2 c2 failed and c3 is mid-analysis; wave 3 (c4)
// never started.
func failedRollout(t *testing.T, repo *embedded.Repo, change func(*rollout.Rollout)) {
	t.Helper()
	c := func(name string, p rollout.ClusterPhase) rollout.Cluster {
		return rollout.Cluster{Name: name, Phase: p, PreviousImage: prev(name), Step: 1}
	}
	ro := rollout.Rollout{
		ID: rolloutID, Application: "shop", Image: image, Tag: "1.3.0", Digest: "sha256:new",
		Phase: rollout.Failed, Reason: "wave 2 (rest): cluster c2 failed: analysis", Wave: 1,
		Waves: []rollout.Wave{
			{Name: "canary", Clusters: []rollout.Cluster{c("c1", rollout.ClusterSucceeded)}},
			{Name: "rest", Clusters: []rollout.Cluster{c("c2", rollout.ClusterFailed), c("c3", rollout.ClusterProgressing)}},
			{Name: "last", Clusters: []rollout.Cluster{{Name: "c4", Phase: rollout.ClusterPending}}},
		},
	}
	if change != nil {
		change(&ro)
	}
	if _, err := repo.Create(t.Context(), ro); err != nil {
		t.Fatalf("creating rollout: %v", err)
	}
}

func event(t *testing.T, id, typ string, payload any) cloudevents.Event {
	t.Helper()
	e, err := events.New(id, events.Source, typ, payload)
	if err != nil {
		t.Fatal(err)
	}
	e.SetExtension(events.ExtRolloutID, rolloutID)
	return e
}

func rolloutFailed(t *testing.T) cloudevents.Event {
	t.Helper()
	return event(t, "failed", events.TypeRolloutFailed, events.RolloutResult{RolloutID: rolloutID, Reason: "x"})
}

func clusterReverted(t *testing.T, id, cl string) cloudevents.Event {
	t.Helper()
	return event(t, id, events.TypeClusterReverted, events.ClusterResult{RolloutID: rolloutID, Cluster: cl, Reason: "observed"})
}

func finished(t *testing.T, id, cl string, step int, errText string) cloudevents.Event {
	t.Helper()
	return event(t, id, events.TypePipelineRunFinished, events.PipelineRunFinished{
		RolloutID: rolloutID, Cluster: cl, Purpose: events.PurposeRevert, Step: step, Image: prev(cl), Error: errText,
	})
}

func revertDeadline(t *testing.T, id, cl string, step int) cloudevents.Event {
	t.Helper()
	return event(t, id, events.TypeClusterDeadline, events.ClusterDeadline{RolloutID: rolloutID, Cluster: cl, Purpose: events.PurposeRevert, Step: step})
}

// outcome is what one event led to: the clusters whose revert was
// requested, the other events emitted, and the phases after.
type outcome struct {
	Requested []string
	Emitted   []string
	Phase     rollout.Phase
	Clusters  map[string]rollout.ClusterPhase
}

func observed(t *testing.T, repo *embedded.Repo, evs []cloudevents.Event) outcome {
	t.Helper()
	var o outcome
	requests, deadlines := map[string]events.PipelineRunRequested{}, map[string]bool{}
	for _, e := range evs {
		if err := e.Validate(); err != nil {
			t.Errorf("event %s is invalid: %v", e.ID(), err)
		}
		switch e.Type() {
		case events.TypePipelineRunRequested:
			r, err := events.Decode[events.PipelineRunRequested](e)
			if err != nil {
				t.Fatal(err)
			}
			if r.Purpose != events.PurposeRevert || r.Image != prev(r.Cluster) || !r.Deadline.Equal(deadline) || e.Subject() != r.Cluster {
				t.Errorf("request %+v (subject %q): want a revert to %s due %s", r, e.Subject(), prev(r.Cluster), deadline)
			}
			requests[r.Cluster] = r
			o.Requested = append(o.Requested, r.Cluster)
		case events.TypeClusterDeadline:
			d, err := events.Decode[events.ClusterDeadline](e)
			if err != nil {
				t.Fatal(err)
			}
			if due, ok := events.Due(e); !ok || !due.Equal(deadline) {
				t.Errorf("deadline of %s due %v", d.Cluster, due)
			}
			deadlines[d.Cluster] = true
		default:
			o.Emitted = append(o.Emitted, e.Type())
		}
	}
	for cl, r := range requests {
		if !deadlines[cl] {
			t.Errorf("revert of %s (step %d) has no deadline", cl, r.Step)
		}
	}
	sort.Strings(o.Requested)
	ro, err := repo.Get(t.Context(), rolloutID)
	if err != nil {
		t.Fatal(err)
	}
	o.Phase, o.Clusters = ro.Phase, map[string]rollout.ClusterPhase{}
	for _, w := range ro.Waves {
		for _, c := range w.Clusters {
			o.Clusters[c.Name] = c.Phase
		}
	}
	return o
}

type step struct {
	name   string
	e      func() cloudevents.Event
	before func()
	want   outcome
}

func run(t *testing.T, fn *rollback.Function, repo *embedded.Repo, steps []step) {
	t.Helper()
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		evs, err := fn.Handle(t.Context(), s.e())
		if err != nil {
			t.Fatalf("%s: Handle: %v", s.name, err)
		}
		if diff := cmp.Diff(s.want, observed(t, repo, evs)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", s.name, diff)
		}
	}
}

func phases(kv ...string) map[string]rollout.ClusterPhase {
	m := map[string]rollout.ClusterPhase{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = rollout.ClusterPhase(kv[i+1])
	}
	return m
}

// A whole rollback as the engine drives it: the newest wave first, the next
// only once it is reverted; runs are requested, never awaited.
func TestRollbackWaveByWave(t *testing.T) {
	repo := functiontest.NewRepo(t)
	failedRollout(t, repo, nil)
	status := &fakeStatus{}
	fn := newFunction(repo, status)
	run(t, fn, repo, []step{
		{
			name: "rollout failed: the newest wave that took the digest is reverted", e: func() cloudevents.Event { return rolloutFailed(t) },
			want: outcome{Requested: []string{"c2", "c3"}, Phase: rollout.Failed,
				Clusters: phases("c1", "Succeeded", "c2", "Reverting", "c3", "Reverting", "c4", "Pending")},
		},
		{
			name: "rollout failed redelivered: the wave is being reverted", e: func() cloudevents.Event { return rolloutFailed(t) },
			want: outcome{Phase: rollout.Failed, Clusters: phases("c1", "Succeeded", "c2", "Reverting", "c3", "Reverting", "c4", "Pending")},
		},
		{
			// Flagger reports nothing for a return to the last promoted
			// spec: the status read after the run is the news.
			name: "c2's revert ran and c2 is back", e: func() cloudevents.Event { return finished(t, "fin-c2", "c2", 2, "") },
			before: func() { status.set("c2", settledOn(prev("c2"))) },
			want:   outcome{Phase: rollout.Failed, Clusters: phases("c1", "Succeeded", "c2", "Reverted", "c3", "Reverting", "c4", "Pending")},
		},
		{
			name: "c3's revert ran; Flagger is still at work: wait", e: func() cloudevents.Event { return finished(t, "fin-c3", "c3", 2, "") },
			before: func() {
				status.set("c3", rollout.CanaryStatus{Phase: "Progressing", PrimaryImage: prev("c3"), TargetImage: ref})
			},
			want: outcome{Phase: rollout.Failed, Clusters: phases("c1", "Succeeded", "c2", "Reverted", "c3", "Reverting", "c4", "Pending")},
		},
		{
			name: "c3 reverted (observe): the older wave is reverted", e: func() cloudevents.Event { return clusterReverted(t, "r-c3", "c3") },
			want: outcome{Requested: []string{"c1"}, Phase: rollout.Failed,
				Clusters: phases("c1", "Reverting", "c2", "Reverted", "c3", "Reverted", "c4", "Pending")},
		},
		{
			name: "c1 reverted: rolled back", e: func() cloudevents.Event { return clusterReverted(t, "r-c1", "c1") },
			want: outcome{Emitted: []string{events.TypeRolloutRolledBack}, Phase: rollout.RolledBack,
				Clusters: phases("c1", "Reverted", "c2", "Reverted", "c3", "Reverted", "c4", "Pending")},
		},
		{
			name: "a late duplicate changes nothing", e: func() cloudevents.Event { return clusterReverted(t, "r-c3", "c3") },
			want: outcome{Phase: rollout.RolledBack, Clusters: phases("c1", "Reverted", "c2", "Reverted", "c3", "Reverted", "c4", "Pending")},
		},
	})
}

// A revert that fails, or misses its deadline, does not hold the rest of
// the rollback; the rollback ends RollbackFailed naming the cluster, and a
// retry, once the cluster is back, finishes it.
func TestRollbackFailsAndIsRetried(t *testing.T) {
	repo := functiontest.NewRepo(t)
	failedRollout(t, repo, func(r *rollout.Rollout) { r.Waves = r.Waves[:2] })
	status := &fakeStatus{}
	fn := newFunction(repo, status)
	run(t, fn, repo, []step{
		{
			name: "rollout failed", e: func() cloudevents.Event { return rolloutFailed(t) },
			want: outcome{Requested: []string{"c2", "c3"}, Phase: rollout.Failed,
				Clusters: phases("c1", "Succeeded", "c2", "Reverting", "c3", "Reverting")},
		},
		{
			name: "c2's revert failed for good", e: func() cloudevents.Event { return finished(t, "fin-c2", "c2", 2, "pipeline failed: forbidden") },
			want: outcome{Phase: rollout.Failed, Clusters: phases("c1", "Succeeded", "c2", "RevertFailed", "c3", "Reverting")},
		},
		{
			name: "c3 unreachable at its deadline: the older wave goes on", e: func() cloudevents.Event { return revertDeadline(t, "dl-c3", "c3", 2) },
			want: outcome{Requested: []string{"c1"}, Phase: rollout.Failed,
				Clusters: phases("c1", "Reverting", "c2", "RevertFailed", "c3", "RevertFailed")},
		},
		{
			name: "c1 back at its deadline: the rollback failed", e: func() cloudevents.Event { return revertDeadline(t, "dl-c1", "c1", 2) },
			before: func() { status.set("c1", settledOn(prev("c1"))) },
			want: outcome{Emitted: []string{events.TypeRolloutRollbackFailed}, Phase: rollout.RollbackFailed,
				Clusters: phases("c1", "Reverted", "c2", "RevertFailed", "c3", "RevertFailed")},
		},
		{
			name: "retry c3 alone", e: func() cloudevents.Event {
				return event(t, "retry-1", events.TypeRolloutRetryRequested, events.RolloutRetryRequested{RolloutID: rolloutID, Cluster: "c3", Attempt: 1})
			},
			want: outcome{Requested: []string{"c3"}, Phase: rollout.Failed,
				Clusters: phases("c1", "Reverted", "c2", "RevertFailed", "c3", "Reverting")},
		},
		{
			name: "c3 back: failed again, for c2", e: func() cloudevents.Event { return finished(t, "fin-c3", "c3", 3, "") },
			before: func() { status.set("c3", settledOn(prev("c3"))) },
			want: outcome{Emitted: []string{events.TypeRolloutRollbackFailed}, Phase: rollout.RollbackFailed,
				Clusters: phases("c1", "Reverted", "c2", "RevertFailed", "c3", "Reverted")},
		},
		{
			name: "retry all", e: func() cloudevents.Event {
				return event(t, "retry-2", events.TypeRolloutRetryRequested, events.RolloutRetryRequested{RolloutID: rolloutID, Attempt: 2})
			},
			want: outcome{Requested: []string{"c2"}, Phase: rollout.Failed,
				Clusters: phases("c1", "Reverted", "c2", "Reverting", "c3", "Reverted")},
		},
		{
			name: "c2 back: rolled back", e: func() cloudevents.Event { return finished(t, "fin-c2b", "c2", 3, "") },
			before: func() { status.set("c2", settledOn(prev("c2"))) },
			want: outcome{Emitted: []string{events.TypeRolloutRolledBack}, Phase: rollout.RolledBack,
				Clusters: phases("c1", "Reverted", "c2", "Reverted", "c3", "Reverted")},
		},
	})
	ro, err := repo.Get(t.Context(), rolloutID)
	if err != nil {
		t.Fatal(err)
	}
	if ro.Reason != "wave 2 (rest): cluster c2 failed: analysis; rollback failed: cluster c2: revert failed: pipeline failed: forbidden" {
		t.Errorf("reason %q", ro.Reason)
	}
}

// A cluster whose apply was in flight when the rollout failed is waited
// for: if its run ends having applied the digest, it is reverted too.
func TestRollbackWaitsForAnApplyInFlight(t *testing.T) {
	repo := functiontest.NewRepo(t)
	failedRollout(t, repo, func(r *rollout.Rollout) {
		r.Waves = r.Waves[1:2]
		r.Wave = 0
		r.Waves[0].Clusters[1] = rollout.Cluster{Name: "c3", Phase: rollout.ClusterApplying, Step: 1, Run: events.PurposeApply}
	})
	status := &fakeStatus{}
	fn := newFunction(repo, status)
	run(t, fn, repo, []step{
		{
			name: "rollout failed: c2 is reverted", e: func() cloudevents.Event { return rolloutFailed(t) },
			want: outcome{Requested: []string{"c2"}, Phase: rollout.Failed, Clusters: phases("c2", "Reverting", "c3", "Applying")},
		},
		{
			name: "c2 reverted: c3's apply is still in flight", e: func() cloudevents.Event { return clusterReverted(t, "r-c2", "c2") },
			want: outcome{Phase: rollout.Failed, Clusters: phases("c2", "Reverted", "c3", "Applying")},
		},
		{
			name: "c3's apply ended (observe recorded it): c3 is reverted", e: func() cloudevents.Event {
				if _, err := repo.Update(t.Context(), rolloutID, func(r *rollout.Rollout) error {
					c, _, _ := r.Cluster("c3")
					c.Phase, c.Run, c.PreviousImage = rollout.ClusterProgressing, "", prev("c3")
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				return event(t, "applied-c3", events.TypeClusterApplied, events.ClusterResult{RolloutID: rolloutID, Cluster: "c3"})
			},
			want: outcome{Requested: []string{"c3"}, Phase: rollout.Failed, Clusters: phases("c2", "Reverted", "c3", "Reverting")},
		},
	})
}

// A cluster whose apply ends while its wave is being reverted is reverted
// at once: it does not wait for the wave's other reverts (which may take
// Flagger minutes).
func TestRollbackRevertsALateClusterAtOnce(t *testing.T) {
	repo := functiontest.NewRepo(t)
	failedRollout(t, repo, nil)
	if _, err := repo.Update(t.Context(), rolloutID, func(r *rollout.Rollout) error {
		r.Waves[1].Clusters[1] = rollout.Cluster{Name: "c3", Phase: rollout.ClusterApplying, Step: 1, Run: events.PurposeApply}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	applied := func(id, name string) func() cloudevents.Event {
		return func() cloudevents.Event {
			if _, err := repo.Update(t.Context(), rolloutID, func(r *rollout.Rollout) error {
				c, _, _ := r.Cluster(name)
				c.Phase, c.Run, c.PreviousImage = rollout.ClusterProgressing, "", prev(name)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			return event(t, id, events.TypeClusterApplied, events.ClusterResult{RolloutID: rolloutID, Cluster: name})
		}
	}
	fn := newFunction(repo, &fakeStatus{})
	run(t, fn, repo, []step{
		{
			name: "rollout failed: c2 is reverted, c3's apply is in flight", e: func() cloudevents.Event { return rolloutFailed(t) },
			want: outcome{Requested: []string{"c2"}, Phase: rollout.Failed,
				Clusters: phases("c1", "Succeeded", "c2", "Reverting", "c3", "Applying", "c4", "Pending")},
		},
		{
			name: "c3's apply ended while c2 reverts: c3 is reverted at once", e: applied("applied-c3", "c3"),
			want: outcome{Requested: []string{"c3"}, Phase: rollout.Failed,
				Clusters: phases("c1", "Succeeded", "c2", "Reverting", "c3", "Reverting", "c4", "Pending")},
		},
		{
			name: "c2 reverted: c3 still reverts, wave 1 waits", e: func() cloudevents.Event { return clusterReverted(t, "r-c2", "c2") },
			want: outcome{Phase: rollout.Failed,
				Clusters: phases("c1", "Succeeded", "c2", "Reverted", "c3", "Reverting", "c4", "Pending")},
		},
		{
			name: "c3 reverted: wave 1 is reverted", e: func() cloudevents.Event { return clusterReverted(t, "r-c3", "c3") },
			want: outcome{Requested: []string{"c1"}, Phase: rollout.Failed,
				Clusters: phases("c1", "Reverting", "c2", "Reverted", "c3", "Reverted", "c4", "Pending")},
		},
	})
}

func TestRollbackNothingTookTheDigest(t *testing.T) {
	repo := functiontest.NewRepo(t)
	failedRollout(t, repo, func(r *rollout.Rollout) {
		for w := range r.Waves {
			for c := range r.Waves[w].Clusters {
				r.Waves[w].Clusters[c].PreviousImage = ""
			}
		}
	})
	run(t, newFunction(repo, &fakeStatus{}), repo, []step{{
		name: "rollout failed", e: func() cloudevents.Event { return rolloutFailed(t) },
		want: outcome{Emitted: []string{events.TypeRolloutRolledBack}, Phase: rollout.RolledBack,
			Clusters: phases("c1", "Succeeded", "c2", "Failed", "c3", "Progressing", "c4", "Pending")},
	}})
}

func TestRollbackIgnores(t *testing.T) {
	tests := []struct {
		name  string
		phase rollout.Phase
		e     func(t *testing.T) cloudevents.Event
		// writes: the event is recorded (a retry counts its attempt).
		writes bool
	}{
		{"a progressing rollout's failure event", rollout.Progressing, rolloutFailed, false},
		{"an apply run's end", rollout.Failed, func(t *testing.T) cloudevents.Event {
			t.Helper()
			return event(t, "fin", events.TypePipelineRunFinished, events.PipelineRunFinished{RolloutID: rolloutID, Cluster: "c1", Purpose: events.PurposeApply, Step: 1})
		}, false},
		{"a retry of a rollout that did not fail its rollback", rollout.RolledBack, func(t *testing.T) cloudevents.Event {
			t.Helper()
			return event(t, "retry", events.TypeRolloutRetryRequested, events.RolloutRetryRequested{RolloutID: rolloutID, Attempt: 1})
		}, true},
		{"a progressing rollout's cluster applied", rollout.Progressing, func(t *testing.T) cloudevents.Event {
			t.Helper()
			return event(t, "applied", events.TypeClusterApplied, events.ClusterResult{RolloutID: rolloutID, Cluster: "c1"})
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := functiontest.NewRepo(t)
			failedRollout(t, repo, func(r *rollout.Rollout) { r.Phase = tt.phase })
			before, err := repo.Get(t.Context(), rolloutID)
			if err != nil {
				t.Fatal(err)
			}
			evs, err := newFunction(repo, &fakeStatus{}).Handle(t.Context(), tt.e(t))
			if err != nil || len(evs) != 0 {
				t.Errorf("Handle = %v, %v; want nothing", evs, err)
			}
			after, err := repo.Get(t.Context(), rolloutID)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.writes && after.Version != before.Version {
				t.Errorf("the rollout was written (version %d -> %d): nothing changed", before.Version, after.Version)
			}
		})
	}
}

func TestRollbackErrors(t *testing.T) {
	bad := rolloutFailed(t)
	if err := bad.SetData(cloudevents.ApplicationJSON, []byte(`"x"`)); err != nil {
		t.Fatal(err)
	}
	repo := functiontest.NewRepo(t)
	failedRollout(t, repo, nil)
	if _, err := newFunction(repo, &fakeStatus{}).Handle(t.Context(), bad); !fault.IsPermanent(err) {
		t.Errorf("undecodable payload: error %v, want a permanent one", err)
	}
	fn := rollback.New(&config.Config{}, repo, &fakeStatus{}, nil)
	if _, err := fn.Handle(t.Context(), rolloutFailed(t)); !fault.IsPermanent(err) {
		t.Errorf("application no longer configured: error %v, want a permanent one", err)
	}
}

func TestRollbackContract(t *testing.T) {
	fn := rollback.New(&config.Config{}, nil, nil, nil)
	if fn.Name() != "rollback" {
		t.Errorf("Name = %q", fn.Name())
	}
	want := []string{
		events.TypeRolloutFailed, events.TypeClusterReverted, events.TypeClusterApplied,
		events.TypePipelineRunFinished, events.TypeClusterDeadline, events.TypeRolloutRetryRequested,
	}
	if diff := cmp.Diff(want, fn.Consumes()); diff != "" {
		t.Errorf("Consumes (-want +got):\n%s", diff)
	}
}

// Rollback wants, of runs' ends and deadlines, the reverts' only: an apply
// run's end goes to observe alone, which folds a wave's burst of them.
func TestRollbackWants(t *testing.T) {
	fn := newFunction(functiontest.NewRepo(t), &fakeStatus{})
	for _, tc := range []struct {
		name string
		e    cloudevents.Event
		want bool
	}{
		{"an apply run's end", finishedOf(t, events.PurposeApply), false},
		{"a revert run's end", finishedOf(t, events.PurposeRevert), true},
		{"an apply's deadline", event(t, "d1", events.TypeClusterDeadline, events.ClusterDeadline{RolloutID: rolloutID, Cluster: "c1", Purpose: events.PurposeApply}), false},
		{"a revert's deadline", revertDeadline(t, rolloutID, "c1", 1), true},
		{"a cluster applied", event(t, "a1", events.TypeClusterApplied, events.ClusterResult{RolloutID: rolloutID, Cluster: "c1"}), true},
		{"a rollout failed", rolloutFailed(t), true},
		{"a run's end it cannot read", unreadable(t, events.TypePipelineRunFinished), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fn.Wants(tc.e); got != tc.want {
				t.Errorf("Wants = %v, want %v", got, tc.want)
			}
		})
	}
}

func finishedOf(t *testing.T, purpose string) cloudevents.Event {
	t.Helper()
	return event(t, "fin-"+purpose, events.TypePipelineRunFinished, events.PipelineRunFinished{RolloutID: rolloutID, Cluster: "c1", Purpose: purpose, Step: 1})
}

func unreadable(t *testing.T, typ string) cloudevents.Event {
	t.Helper()
	e := cloudevents.NewEvent()
	e.SetID("bad")
	e.SetSource("test")
	e.SetType(typ)
	if err := e.SetData(cloudevents.ApplicationJSON, []byte(`{"purpose":`)); err != nil {
		t.Fatal(err)
	}
	return e
}
