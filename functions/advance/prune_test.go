package advance_test

import (
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/functions/advance"
	"github.com/flotilla-cd/flotilla/functions/internal/functiontest"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// prunes are the prune requests among evs, by id.
func prunes(t *testing.T, evs []cloudevents.Event) map[string]events.PruneRequested {
	t.Helper()
	out := map[string]events.PruneRequested{}
	for _, e := range evs {
		if e.Type() != events.TypePruneRequested {
			continue
		}
		p, err := events.Decode[events.PruneRequested](e)
		if err != nil {
			t.Fatal(err)
		}
		if e.Subject() != p.Cluster || events.RolloutID(e) != rolloutID {
			t.Errorf("prune request %s: subject %q, rollout %q; want the cluster's, the rollout's", e.ID(), e.Subject(), events.RolloutID(e))
		}
		out[e.ID()] = p
	}
	return out
}

// A git application's cluster success asks the executors (in their own
// dispatch lane) to prune that cluster, in advance's transaction: the
// runner must not consume cluster.succeeded itself (the consumers of a
// type share one lane, #33 item 2). Catches: no request (nothing ever
// pruned), a request for a failed cluster or for a success recorded after
// the rollout failed (its rollback restores the previous commit's objects;
// pruning them would delete what it recreates), one for prune: false or an
// image application.
func TestAdvanceAsksToPruneAGitApplication(t *testing.T) {
	const (
		repoURL = "https://git.test/deployments.git"
		commit  = "0123456789abcdef0123456789abcdef01234567"
	)
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	gitApp := func(prune *bool) config.Application {
		return config.Application{Name: "shop", Namespace: "shop", Workload: config.Workload{Name: "shop"},
			Source: &config.Source{Git: &config.GitSource{URL: repoURL, Paths: []string{"clusters/{cluster}"}, Prune: prune}}}
	}
	deadline := now.Add(gitApp(nil).Delivery.StepDeadline())
	want := func(cluster string, wave int) map[string]events.PruneRequested {
		return map[string]events.PruneRequested{"in/" + events.TypePruneRequested + "/" + rolloutID + "/" + cluster: {
			RolloutID: rolloutID, Application: "shop", Wave: wave, Cluster: cluster, Revision: repoURL + "@" + commit, Deadline: deadline,
		}}
	}
	const (
		pending     = rollout.ClusterPending
		progressing = rollout.ClusterProgressing
		succeeded   = rollout.ClusterSucceeded
		failed      = rollout.ClusterFailed
	)
	for _, tc := range []struct {
		name    string
		app     config.Application
		before  state
		typ     string
		cluster string
		want    map[string]events.PruneRequested
	}{{
		name: "the first wave's cluster succeeded", app: gitApp(nil),
		before: state{Phase: rollout.Progressing, Clusters: map[string]rollout.ClusterPhase{"c1": progressing, "c2": pending, "c3": pending}},
		typ:    events.TypeClusterSucceeded, cluster: "c1", want: want("c1", 0),
	}, {
		name: "prune: true, the last cluster (the rollout ends)", app: gitApp(ptr.To(true)),
		before: state{Phase: rollout.Progressing, Wave: 1, Clusters: map[string]rollout.ClusterPhase{"c1": succeeded, "c2": succeeded, "c3": progressing}},
		typ:    events.TypeClusterSucceeded, cluster: "c3", want: want("c3", 1),
	}, {
		name: "a cluster failed", app: gitApp(nil),
		before: state{Phase: rollout.Progressing, Wave: 1, Budget: 1, Clusters: map[string]rollout.ClusterPhase{"c1": succeeded, "c2": progressing, "c3": progressing}},
		typ:    events.TypeClusterFailed, cluster: "c2", want: map[string]events.PruneRequested{},
	}, {
		name: "a success after the rollout failed", app: gitApp(nil),
		before: state{Phase: rollout.Failed, Wave: 1, Clusters: map[string]rollout.ClusterPhase{"c1": succeeded, "c2": failed, "c3": progressing}},
		typ:    events.TypeClusterSucceeded, cluster: "c3", want: map[string]events.PruneRequested{},
	}, {
		name: "prune: false", app: gitApp(ptr.To(false)),
		before: state{Phase: rollout.Progressing, Clusters: map[string]rollout.ClusterPhase{"c1": progressing, "c2": pending, "c3": pending}},
		typ:    events.TypeClusterSucceeded, cluster: "c1", want: map[string]events.PruneRequested{},
	}, {
		name: "an image application", app: config.Application{Name: "shop", Image: "registry.test/team/shop", Workload: config.Workload{Name: "shop"}},
		before: state{Phase: rollout.Progressing, Clusters: map[string]rollout.ClusterPhase{"c1": progressing, "c2": pending, "c3": pending}},
		typ:    events.TypeClusterSucceeded, cluster: "c1", want: map[string]events.PruneRequested{},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			repo := functiontest.NewRepo(t)
			newRollout(t, repo, tc.before)
			if _, err := repo.Update(t.Context(), rolloutID, func(r *rollout.Rollout) error {
				if tc.app.Git() != nil {
					r.Image, r.Digest = repoURL, commit
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			fn := advance.New(&config.Config{Applications: []config.Application{tc.app}}, repo, func() time.Time { return now })
			evs, err := fn.Handle(t.Context(), clusterResult(t, tc.typ, tc.cluster, "analysis failed"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, prunes(t, evs)); diff != "" {
				t.Errorf("prune requests (-want +got):\n%s", diff)
			}
		})
	}
}
