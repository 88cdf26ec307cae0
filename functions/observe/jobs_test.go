package observe_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/functions/internal/functiontest"
	"github.com/flotilla-cd/flotilla/functions/observe"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// setStatus is a status reader that reads a release set's Jobs too.
type setStatus struct {
	fakeStatus
	jobs  []rollout.JobStatus
	asked []string // the Jobs' names asked for, namespace/name
}

func (s *setStatus) Jobs(_ context.Context, _, namespace string, names []string) ([]rollout.JobStatus, error) {
	for _, n := range names {
		s.asked = append(s.asked, namespace+"/"+n)
	}
	return s.jobs, nil
}

// setCfg is release set "shop" (its lead shop-api) of a migration Job
// member, whose workload names its Job, and the api.
var setCfg = &config.Config{Applications: []config.Application{
	{Name: "shop-migrate", Namespace: "web", Workload: config.Workload{Kind: config.KindJob, Name: "migrate"}, MemberOf: "shop"},
	{Name: "shop-api", Namespace: "web", Workload: config.Workload{Kind: "Deployment", Name: "shop-api"}, MemberOf: "shop"},
	{Name: "shop", Image: image, Namespace: "web", Workload: config.Workload{Kind: "Deployment", Name: "shop-api", Container: "api"},
		Set: &config.SetSpec{Members: []config.SetMember{{Name: "shop-migrate", Job: true}, {Name: "shop-api"}}}},
}}

// A release set's apply run that ends, or a deadline, records each Job
// member's Job state on the cluster: failed with its reason when the run
// failed on it, running at a deadline, pending when it runs another
// revision; complete once done at the rollout's.
func TestObserveRecordsJobs(t *testing.T) {
	job := func(rev string, complete, failed bool, reason string) []rollout.JobStatus {
		return []rollout.JobStatus{{Name: "migrate", Found: true, Revision: rev, Complete: complete, Failed: failed, Reason: reason}}
	}
	tests := []struct {
		name     string
		deadline bool
		run      events.PipelineRunFinished
		jobs     []rollout.JobStatus
		want     map[string]string
	}{
		{name: "complete", run: events.PipelineRunFinished{Step: 1, PreviousImage: prev, Changed: true},
			jobs: job(ref, true, false, ""), want: map[string]string{"migrate": "complete"}},
		{name: "failed", run: events.PipelineRunFinished{Step: 1, Error: "pipeline failed: shop-migrate: Job migrate failed: BackoffLimitExceeded"},
			jobs: job(ref, false, true, "Job has reached the specified backoff limit"), want: map[string]string{"migrate": "failed: Job has reached the specified backoff limit"}},
		{name: "another revision's", run: events.PipelineRunFinished{Step: 1, Error: "pipeline failed: render"},
			jobs: job(prev, true, false, ""), want: map[string]string{"migrate": "pending"}},
		{name: "not created", run: events.PipelineRunFinished{Step: 1, Error: "pipeline failed: render"},
			jobs: []rollout.JobStatus{{Name: "migrate"}}, want: map[string]string{"migrate": "pending"}},
		{name: "running at the deadline", deadline: true, jobs: job(ref, false, false, ""), want: map[string]string{"migrate": "running"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := functiontest.NewRepo(t)
			applying(t, repo, rollout.Progressing, tt.deadline)
			st := &setStatus{fakeStatus: status(rollout.CanaryStatus{Phase: "Progressing", PrimaryImage: prev, TargetImage: ref}), jobs: tt.jobs}
			fn := observe.New(setCfg, repo, st, func() time.Time { return now })
			e := finishedEvent(t, tt.run)
			if tt.deadline {
				e = engineEvent(t, "dl", events.TypeClusterDeadline, events.ClusterDeadline{RolloutID: rolloutID, Cluster: "c1", Purpose: events.PurposeApply, Step: 1})
			}
			if _, err := fn.Handle(t.Context(), e); err != nil {
				t.Fatal(err)
			}
			ro, err := repo.Get(t.Context(), rolloutID)
			if err != nil {
				t.Fatal(err)
			}
			c, _, _ := ro.Cluster("c1")
			if diff := cmp.Diff(tt.want, c.Jobs); diff != "" {
				t.Errorf("c1's Jobs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"web/migrate"}, st.asked); diff != "" {
				t.Errorf("Jobs read (-want +got):\n%s", diff)
			}
		})
	}
}

// Flagger's event of a set's cluster in its apply records its Jobs: the
// rollout's last cluster decided by it ends the rollout before the run's
// end comes, which then changes nothing. A revert's event records none
// (the cluster keeps what the version did).
func TestObserveCanaryRecordsJobs(t *testing.T) {
	for _, tt := range []struct {
		name  string
		phase rollout.ClusterPhase
		want  map[string]string
	}{
		{"applying", rollout.ClusterProgressing, map[string]string{"migrate": "complete"}},
		{"reverting", rollout.ClusterReverting, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			repo := functiontest.NewRepo(t)
			applying(t, repo, rollout.Progressing, false)
			if _, err := repo.Update(t.Context(), rolloutID, func(r *rollout.Rollout) error {
				r.Waves[0].Clusters[0].Phase = tt.phase
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			st := &setStatus{fakeStatus: status(rollout.CanaryStatus{Phase: "Succeeded", PrimaryImage: ref, TargetImage: ref}),
				jobs: []rollout.JobStatus{{Name: "migrate", Found: true, Revision: ref, Complete: true}}}
			fn := observe.New(setCfg, repo, st, func() time.Time { return now })
			e := canaryEvent(t, events.Canary{RolloutID: rolloutID, Cluster: "c1", Outcome: events.CanarySucceeded, Message: "Promotion completed!"})
			if _, err := fn.Handle(t.Context(), e); err != nil {
				t.Fatal(err)
			}
			ro, err := repo.Get(t.Context(), rolloutID)
			if err != nil {
				t.Fatal(err)
			}
			c, _, _ := ro.Cluster("c1")
			if diff := cmp.Diff(tt.want, c.Jobs); diff != "" {
				t.Errorf("c1's Jobs (-want +got):\n%s", diff)
			}
		})
	}
}

// An application (not a set) has no Jobs read or recorded.
func TestObserveNoJobsOfAnApplication(t *testing.T) {
	repo := functiontest.NewRepo(t)
	applying(t, repo, rollout.Progressing, true)
	st := &setStatus{fakeStatus: status(rollout.CanaryStatus{Phase: "Progressing"}), jobs: []rollout.JobStatus{{Name: "x"}}}
	if _, err := observe.New(cfg, repo, st, func() time.Time { return now }).Handle(t.Context(), finishedEvent(t, events.PipelineRunFinished{Step: 1, Changed: true})); err != nil {
		t.Fatal(err)
	}
	ro, err := repo.Get(t.Context(), rolloutID)
	if err != nil {
		t.Fatal(err)
	}
	if c, _, _ := ro.Cluster("c1"); c.Jobs != nil || st.asked != nil {
		t.Errorf("an application's cluster records Jobs %v, read %v", c.Jobs, st.asked)
	}
}
