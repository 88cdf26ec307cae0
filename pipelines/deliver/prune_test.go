package deliver_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pipelines/deliver"
	"github.com/flotilla-cd/flotilla/pkg/config"
)

const (
	repoURL = "https://git.test/deployments.git"
	commit  = "0123456789abcdef0123456789abcdef01234567"
)

// runRecorder records the runs asked of the executor, git source and all.
type runRecorder struct {
	mu   sync.Mutex
	runs []pipelines.RunParams
	// deletes is what each run reports it pruned (none: nothing).
	deletes []string
}

func (r *runRecorder) Run(_ context.Context, _ string, p pipelines.RunParams) (pipelines.Results, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = append(r.runs, p)
	return pipelines.Results{Pruned: r.deletes, PrunedCount: len(r.deletes)}, nil
}

// pruned is what each recorded run's prune param and run name were.
func (r *runRecorder) pruned() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, p := range r.runs {
		out = append(out, p.Rollout+" "+p.Image+" prune="+p.Git.Prune+" app="+p.Application)
	}
	return out
}

func gitApp(prune *bool) config.Application {
	a := app()
	a.Image = ""
	a.Source = &config.Source{Git: &config.GitSource{URL: repoURL, Paths: []string{"clusters/{cluster}"}, Prune: prune}}
	return a
}

// A git application's apply leaves what the commit no longer renders for
// after the cluster's success (prune true), a revert prunes at once, and
// prune false never; a prune request (advance's, for a cluster that
// succeeded) runs the pending prune, in a run of its own, only for a git
// application that prunes, and not after its deadline. Catches: the field
// accepted and ignored, a revert that waits for a success that never
// comes, a prune run named as the apply's (the Tekton executor would find
// that run done and prune nothing), a request retried forever.
func TestGitApplicationsPrune(t *testing.T) {
	for _, tc := range []struct {
		name  string
		prune *bool
		want  []string
	}{{
		name: "default",
		want: []string{
			rolloutID + " " + repoURL + "@" + commit + " prune=true app=shop",
			rolloutID + "-revert " + repoURL + "@" + commit + " prune=now app=shop",
			rolloutID + "-prune " + repoURL + "@" + commit + " prune=pending app=shop",
		},
	}, {
		name:  "prune false",
		prune: ptr.To(false),
		want: []string{
			rolloutID + " " + repoURL + "@" + commit + " prune=false app=shop",
			rolloutID + "-revert " + repoURL + "@" + commit + " prune=false app=shop",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			exec := &runRecorder{}
			a := gitApp(tc.prune)
			d := deliver.New(&config.Config{Applications: []config.Application{a}}, exec, hooks)
			r := deliver.NewRunner(d, nil, 0, nil)
			for _, purpose := range []string{events.PurposeApply, events.PurposeRevert} {
				if _, err := d.Deliver(t.Context(), events.PipelineRunRequested{
					RolloutID: rolloutID, Application: "shop", Cluster: "c1", Purpose: purpose, Image: repoURL + "@" + commit,
				}); err != nil {
					t.Fatal(err)
				}
			}
			if evs, err := r.Handle(t.Context(), pruneRequest(t, time.Now().Add(time.Minute))); err != nil || len(evs) != 0 {
				t.Fatalf("Handle(prune.requested) = %v, %v; want nothing emitted", evs, err)
			}
			// Past its deadline: given up, not retried.
			if evs, err := r.Handle(t.Context(), pruneRequest(t, time.Now().Add(-time.Second))); err != nil || len(evs) != 0 {
				t.Fatalf("Handle(prune.requested past its deadline) = %v, %v; want nothing", evs, err)
			}
			if d := cmp.Diff(tc.want, exec.pruned()); d != "" {
				t.Errorf("runs (-want +got):\n%s", d)
			}
		})
	}
	// An image application's request runs nothing.
	exec := &runRecorder{}
	r := deliver.NewRunner(deliver.New(&config.Config{Applications: []config.Application{app()}}, exec, hooks), nil, 0, nil)
	if _, err := r.Handle(t.Context(), pruneRequest(t, time.Now().Add(time.Minute))); err != nil || len(exec.pruned()) != 0 {
		t.Errorf("an image application's prune request: %v, runs %v; want none", err, exec.pruned())
	}
}

// What a run deleted is told: a prune request's run answers with
// cluster.pruned (purpose prune), a revert's with pipelinerun.finished and
// cluster.pruned (purpose revert), each naming the objects and the count.
// Catches: a prune that deletes silently (no event, so no metric and no
// trace of what went), and a cluster.pruned whose id is not derived from
// its request (a replay would tell it twice).
func TestPrunedIsTold(t *testing.T) {
	exec := &runRecorder{deletes: []string{"ConfigMap/shop/extra", "Service/shop/old"}}
	r := deliver.NewRunner(deliver.New(&config.Config{Applications: []config.Application{gitApp(nil)}}, exec, hooks), nil, 0, nil)
	req := pruneRequest(t, time.Now().Add(time.Minute))
	evs, err := r.Handle(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	revert, err := events.New("ok/revert", events.Source, events.TypePipelineRunRequested, events.PipelineRunRequested{
		RolloutID: rolloutID, Application: "shop", Wave: 1, Cluster: "c1", Purpose: events.PurposeRevert,
		Image: repoURL + "@" + commit, Deadline: time.Now().Add(time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	revert.SetExtension(events.ExtRolloutID, rolloutID)
	more, err := r.Handle(t.Context(), revert)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range append(evs, more...) {
		line := e.Type() + " " + e.ID() + " " + e.Subject()
		if e.Type() == events.TypeClusterPruned {
			p, err := events.Decode[events.ClusterPruned](e)
			if err != nil {
				t.Fatal(err)
			}
			line += fmt.Sprintf(" %s %s wave=%d %v %d", p.Purpose, p.Revision, p.Wave, p.Objects, p.Count)
		}
		got = append(got, line)
	}
	want := []string{
		events.TypeClusterPruned + " ok/prune/" + events.TypeClusterPruned + " c1 prune " + repoURL + "@" + commit + " wave=0 [ConfigMap/shop/extra Service/shop/old] 2",
		events.TypePipelineRunFinished + " ok/revert/" + events.TypePipelineRunFinished + " c1",
		events.TypeClusterPruned + " ok/revert/" + events.TypeClusterPruned + " c1 revert " + repoURL + "@" + commit + " wave=1 [ConfigMap/shop/extra Service/shop/old] 2",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// pruneRequest is advance's request to prune shop's cluster c1 for the
// rollout's commit, due by deadline.
func pruneRequest(t *testing.T, deadline time.Time) cloudevents.Event {
	t.Helper()
	e, err := events.New("ok/prune", events.Source, events.TypePruneRequested, events.PruneRequested{
		RolloutID: rolloutID, Application: "shop", Cluster: "c1", Revision: repoURL + "@" + commit, Deadline: deadline,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.SetExtension(events.ExtRolloutID, rolloutID)
	return e
}
