package observe_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/functions/internal/functiontest"
	"github.com/flotilla-cd/flotilla/functions/observe"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
)

const (
	rolloutID = "shop-1"
	image     = "registry.test/team/shop"
	ref       = image + "@sha256:new"
	prev      = image + "@sha256:old"
)

// fakeStatus stands in for the clusters' canary status; the features read
// real canaries.
type fakeStatus struct {
	canaryStatus func(ctx context.Context, cluster, namespace string, w config.Workload) (rollout.CanaryStatus, error)
}

func (f fakeStatus) CanaryStatus(ctx context.Context, cl, namespace string, w config.Workload) (rollout.CanaryStatus, error) {
	return f.canaryStatus(ctx, cl, namespace, w)
}

// status answers st for the shop canary in any cluster.
func status(st rollout.CanaryStatus) fakeStatus {
	return statusOf(cfg.Applications[0].Workload, st)
}

// statusOf answers st for the canary of workload w in any cluster.
func statusOf(w config.Workload, st rollout.CanaryStatus) fakeStatus {
	return fakeStatus{canaryStatus: func(_ context.Context, _, ns string, got config.Workload) (rollout.CanaryStatus, error) {
		if ns != "web" || got != w {
			return rollout.CanaryStatus{}, errors.New("wrong canary asked for")
		}
		return st, nil
	}}
}

var cfg = &config.Config{Applications: []config.Application{{
	Name: "shop", Image: image, Namespace: "web",
	Workload: config.Workload{Kind: "Deployment", Name: "shop-api", Container: "api"},
}}}

// newRollout stores a rollout with c1 in its first wave and c2 in its second,
// both in phase p.
func newRollout(t *testing.T, repo *embedded.Repo, p rollout.ClusterPhase) {
	t.Helper()
	ro := rollout.Rollout{
		ID: rolloutID, Application: "shop", Image: image, Tag: "1.2.3", Digest: "sha256:new", Phase: rollout.Progressing,
		Waves: []rollout.Wave{
			{Name: "canary", Clusters: []rollout.Cluster{{Name: "c1", Phase: p, PreviousImage: prev}}},
			{Name: "rest", Clusters: []rollout.Cluster{{Name: "c2", Phase: p, PreviousImage: prev}}},
		},
	}
	if _, err := repo.Create(t.Context(), ro); err != nil {
		t.Fatalf("creating rollout: %v", err)
	}
}

func canaryEvent(t *testing.T, c events.Canary) cloudevents.Event {
	t.Helper()
	e, err := events.New("flagger-1", "/hooks/flagger", events.TypeCanary, c)
	if err != nil {
		t.Fatal(err)
	}
	if c.RolloutID != "" {
		e.SetExtension(events.ExtRolloutID, c.RolloutID)
	}
	return e
}

type result struct {
	ID, Type, RolloutID string
	Data                events.ClusterResult
}

func results(t *testing.T, evs []cloudevents.Event) []result {
	t.Helper()
	var got []result
	for _, e := range evs {
		if err := e.Validate(); err != nil {
			t.Errorf("event %s is invalid: %v", e.ID(), err)
		}
		r, err := events.Decode[events.ClusterResult](e)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, result{e.ID(), e.Type(), events.RolloutID(e), r})
	}
	return got
}

func TestObserveClassify(t *testing.T) {
	type images struct{ primary, target string }
	onNew, onOld, halfway := images{ref, ref}, images{prev, prev}, images{prev, ref}
	tests := []struct {
		name    string
		phase   rollout.ClusterPhase // of both clusters in the rollout
		cluster string
		outcome events.CanaryOutcome
		flagger string // Flagger's phase read from the cluster
		images  images
		want    string // event type, "" for none
	}{
		{"succeeded, primary on the digest", rollout.ClusterProgressing, "c1", events.CanarySucceeded, "Succeeded", onNew, events.TypeClusterSucceeded},
		{"succeeded in the second wave", rollout.ClusterProgressing, "c2", events.CanarySucceeded, "Succeeded", onNew, events.TypeClusterSucceeded},
		{"initialized, primary on the digest", rollout.ClusterApplying, "c1", events.CanaryInitialized, "Initialized", onNew, events.TypeClusterSucceeded},
		{"stale success: primary still old", rollout.ClusterProgressing, "c1", events.CanarySucceeded, "Succeeded", halfway, ""},
		{"stale success of the previous rollout", rollout.ClusterProgressing, "c1", events.CanarySucceeded, "Succeeded", onOld, ""},
		{"progressing", rollout.ClusterProgressing, "c1", events.CanaryProgressing, "Progressing", halfway, ""},
		{"failed, canary on the digest", rollout.ClusterProgressing, "c1", events.CanaryFailed, "Failed", halfway, events.TypeClusterFailed},
		{"stale failure of an older canary", rollout.ClusterProgressing, "c1", events.CanaryFailed, "Failed", onOld, ""},
		{"failure after promotion", rollout.ClusterProgressing, "c1", events.CanaryFailed, "Failed", onNew, ""},
		{"already succeeded", rollout.ClusterSucceeded, "c1", events.CanarySucceeded, "Succeeded", onNew, ""},
		{"pending", rollout.ClusterPending, "c1", events.CanarySucceeded, "Succeeded", onNew, ""},
		{"reverting, settled on the previous image", rollout.ClusterReverting, "c1", events.CanarySucceeded, "Succeeded", onOld, events.TypeClusterReverted},
		{"reverting, whatever Flagger says", rollout.ClusterReverting, "c1", events.CanaryFailed, "Failed", onOld, events.TypeClusterReverted},
		{"reverting, initialized", rollout.ClusterReverting, "c1", events.CanaryProgressing, "Initialized", onOld, events.TypeClusterReverted},
		{"reverting, still analysing", rollout.ClusterReverting, "c1", events.CanaryProgressing, "Progressing", onOld, ""},
		{"reverting, primary not back yet", rollout.ClusterReverting, "c1", events.CanarySucceeded, "Succeeded", images{ref, prev}, ""},
		{"reverting, workload not back yet", rollout.ClusterReverting, "c1", events.CanarySucceeded, "Succeeded", halfway, ""},
		{"reverted already", rollout.ClusterReverted, "c1", events.CanarySucceeded, "Succeeded", onOld, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			repo := functiontest.NewRepo(t)
			newRollout(t, repo, tt.phase)
			st := rollout.CanaryStatus{Phase: tt.flagger, Weight: 42, PrimaryImage: tt.images.primary, TargetImage: tt.images.target}
			fn := observe.New(cfg, repo, status(st), nil)
			e := canaryEvent(t, events.Canary{Cluster: tt.cluster, Namespace: "web", Name: "shop-api", Phase: tt.flagger,
				Outcome: tt.outcome, Message: "flagger says so", RolloutID: rolloutID})

			evs, err := fn.Handle(ctx, e)
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			var want []result
			if tt.want != "" {
				wave := map[string]int{"c1": 0, "c2": 1}[tt.cluster]
				want = []result{{"flagger-1/" + tt.want + "/" + tt.cluster, tt.want, rolloutID,
					events.ClusterResult{RolloutID: rolloutID, Wave: wave, Cluster: tt.cluster, Reason: "flagger says so"}}}
			}
			if diff := cmp.Diff(want, results(t, evs)); diff != "" {
				t.Errorf("emitted (-want +got):\n%s", diff)
			}

			// What Flagger said is recorded, the phase is left to advance
			// and rollback.
			ro, err := repo.Get(ctx, rolloutID)
			if err != nil {
				t.Fatal(err)
			}
			c, _, _ := ro.Cluster(tt.cluster)
			got := []any{c.Phase, c.CanaryPhase, c.CanaryWeight, c.Message}
			if diff := cmp.Diff([]any{tt.phase, tt.flagger, 42, "flagger says so"}, got); diff != "" {
				t.Errorf("cluster state (-want +got):\n%s", diff)
			}
		})
	}
}

// TestObserveDaemonSet follows a canary whose target is a DaemonSet: the
// images are read from the DaemonSet and its primary.
func TestObserveDaemonSet(t *testing.T) {
	repo := functiontest.NewRepo(t)
	newRollout(t, repo, rollout.ClusterProgressing)
	w := config.Workload{Kind: config.KindDaemonSet, Name: "shop-agent"}
	ds := &config.Config{Applications: []config.Application{{Name: "shop", Image: image, Namespace: "web", Workload: w}}}
	st := statusOf(w, rollout.CanaryStatus{Phase: "Succeeded", PrimaryImage: ref, TargetImage: ref})
	e := canaryEvent(t, events.Canary{Cluster: "c1", Namespace: "web", Name: "shop-agent", Phase: "Succeeded",
		Outcome: events.CanarySucceeded, Message: "promoted", RolloutID: rolloutID})
	evs, err := observe.New(ds, repo, st, nil).Handle(t.Context(), e)
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	want := []result{{"flagger-1/" + events.TypeClusterSucceeded + "/c1", events.TypeClusterSucceeded, rolloutID,
		events.ClusterResult{RolloutID: rolloutID, Wave: 0, Cluster: "c1", Reason: "promoted"}}}
	if diff := cmp.Diff(want, results(t, evs)); diff != "" {
		t.Errorf("emitted (-want +got):\n%s", diff)
	}
}

func TestObserveIgnores(t *testing.T) {
	never := fakeStatus{canaryStatus: func(context.Context, string, string, config.Workload) (rollout.CanaryStatus, error) {
		return rollout.CanaryStatus{}, errors.New("status read for an event that should be ignored")
	}}
	tests := []struct {
		name string
		cfg  *config.Config
		c    events.Canary
	}{
		{"no rollout id: a canary flotilla does not drive", cfg, events.Canary{Cluster: "c1", Outcome: events.CanarySucceeded}},
		{"unknown rollout", cfg, events.Canary{Cluster: "c1", Outcome: events.CanarySucceeded, RolloutID: "gone-1"}},
		{"application no longer configured", &config.Config{}, events.Canary{Cluster: "c1", Outcome: events.CanarySucceeded, RolloutID: rolloutID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := functiontest.NewRepo(t)
			newRollout(t, repo, rollout.ClusterProgressing)
			evs, err := observe.New(tt.cfg, repo, never, nil).Handle(t.Context(), canaryEvent(t, tt.c))
			if err != nil || len(evs) != 0 {
				t.Errorf("Handle = %v, %v; want nothing", evs, err)
			}
		})
	}
}

func TestObserveErrors(t *testing.T) {
	errDown := errors.New("apiserver unavailable")
	bad := canaryEvent(t, events.Canary{})
	if err := bad.SetData(cloudevents.ApplicationJSON, []byte(`"x"`)); err != nil {
		t.Fatal(err)
	}
	ok := status(rollout.CanaryStatus{Phase: "Succeeded", PrimaryImage: ref, TargetImage: ref})
	tests := []struct {
		name      string
		status    fakeStatus
		e         cloudevents.Event
		permanent bool
	}{
		{"payload does not decode", ok, bad, true},
		{"status unreadable", fakeStatus{canaryStatus: func(context.Context, string, string, config.Workload) (rollout.CanaryStatus, error) {
			return rollout.CanaryStatus{}, errDown
		}}, canaryEvent(t, events.Canary{Cluster: "c1", Outcome: events.CanarySucceeded, RolloutID: rolloutID}), true},
		{"cluster not in the rollout", ok, canaryEvent(t, events.Canary{Cluster: "c9", Outcome: events.CanarySucceeded, RolloutID: rolloutID}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := functiontest.NewRepo(t)
			newRollout(t, repo, rollout.ClusterProgressing)
			evs, err := observe.New(cfg, repo, tt.status, nil).Handle(t.Context(), tt.e)
			if err == nil {
				t.Fatalf("Handle = %v, want an error", evs)
			}
			if got := fault.IsPermanent(err); got != tt.permanent {
				t.Errorf("error %q: permanent = %v, want %v", err, got, tt.permanent)
			}
		})
	}
}

func TestObserveContract(t *testing.T) {
	fn := observe.New(cfg, nil, nil, nil)
	if fn.Name() != "observe" {
		t.Errorf("Name = %q", fn.Name())
	}
	if diff := cmp.Diff([]string{events.TypeCanary, events.TypePipelineRunFinished, events.TypeClusterDeadline, events.TypeFunctionFailed}, fn.Consumes()); diff != "" {
		t.Errorf("Consumes (-want +got):\n%s", diff)
	}
}

// A wave must stay healthy through its bake: a canary of it failing then
// (Flagger analysed a change in the cluster) fails the cluster again; the
// same failure outside a bake changes nothing.
func TestObserveFailureDuringTheBake(t *testing.T) {
	for _, baking := range []bool{true, false} {
		t.Run(fmt.Sprintf("baking %v", baking), func(t *testing.T) {
			ctx := t.Context()
			repo := functiontest.NewRepo(t)
			newRollout(t, repo, rollout.ClusterSucceeded)
			if baking {
				if _, err := repo.Update(ctx, rolloutID, func(r *rollout.Rollout) error {
					r.Waves[0].BakeTime, r.Waves[0].BakingUntil = time.Minute, time.Now().Add(time.Minute)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			st := rollout.CanaryStatus{Phase: "Failed", PrimaryImage: ref, TargetImage: ref}
			evs, err := observe.New(cfg, repo, status(st), nil).Handle(ctx, canaryEvent(t, events.Canary{Cluster: "c1", Namespace: "web",
				Name: "shop-api", Phase: "Failed", Outcome: events.CanaryFailed, Message: "gate said no", RolloutID: rolloutID}))
			if err != nil {
				t.Fatal(err)
			}
			var want []result
			if baking {
				want = []result{{"flagger-1/" + events.TypeClusterFailed + "/c1", events.TypeClusterFailed, rolloutID,
					events.ClusterResult{RolloutID: rolloutID, Wave: 0, Cluster: "c1", Reason: "failed during the wave's bake: gate said no"}}}
			}
			if diff := cmp.Diff(want, results(t, evs)); diff != "" {
				t.Errorf("emitted (-want +got):\n%s", diff)
			}
		})
	}
}
