package fleetmetrics_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/fleetmetrics"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// must returns a function that fails t on an event's error.
func must(t *testing.T) func(cloudevents.Event, error) cloudevents.Event {
	t.Helper()
	return func(e cloudevents.Event, err error) cloudevents.Event {
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
}

// The observer tails a real journal from its end, reads rollouts in flight
// from the real state at scrape time, and feeds the metrics.
func TestObserver(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	repo := embedded.NewRepo(st, func() time.Time { return t0 })
	ctx := t.Context()
	ev := must(t)
	for _, ro := range []rollout.Rollout{
		{ID: "a", Application: "podinfo", Phase: rollout.Progressing, Waves: []rollout.Wave{{Clusters: []rollout.Cluster{
			{Name: "c1", Phase: rollout.ClusterSucceeded, Deadline: t0.Add(-time.Hour)},
			{Name: "c2", Phase: rollout.ClusterProgressing, Deadline: t0.Add(30 * time.Second)},
		}}}},
		{ID: "b", Application: "podinfo", Phase: rollout.Progressing},
		{ID: "c", Application: "other", Phase: rollout.Queued},
	} {
		if _, err := repo.Create(ctx, ro); err != nil {
			t.Fatal(err)
		}
	}
	// Journaled before the observer starts: not counted (it starts at the
	// journal's end).
	old := ev(events.New("old", events.Source, events.TypeClusterSucceeded, events.ClusterResult{RolloutID: "a", Cluster: "c1"}))
	if _, err := st.Append(ctx, old); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewPedanticRegistry()
	o, err := fleetmetrics.New(st, repo, reg, fleetmetrics.WithClock(func() time.Time { return t0.Add(90 * time.Second) }))
	if err != nil {
		t.Fatal(err)
	}
	run, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- o.Run(run) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP flotilla_rollouts Rollouts in flight by phase (Progressing, Queued, Failed: rolling back, RollbackFailed), read from the state at scrape time.
# TYPE flotilla_rollouts gauge
flotilla_rollouts{phase="Failed"} 0
flotilla_rollouts{phase="Progressing"} 2
flotilla_rollouts{phase="Queued"} 1
flotilla_rollouts{phase="RollbackFailed"} 0
# HELP flotilla_rollout_idle_seconds Time since the in-flight rollout that changed least recently last changed, by phase (0 when none is in it), read from the state at scrape time.
# TYPE flotilla_rollout_idle_seconds gauge
flotilla_rollout_idle_seconds{phase="Failed"} 0
flotilla_rollout_idle_seconds{phase="Progressing"} 90
flotilla_rollout_idle_seconds{phase="Queued"} 90
flotilla_rollout_idle_seconds{phase="RollbackFailed"} 0
# HELP flotilla_cluster_overdue_seconds How far past its deadline the most overdue cluster step under way is (an apply, an analysis, a revert; 0 when none is): its deadline timer should have decided it.
# TYPE flotilla_cluster_overdue_seconds gauge
flotilla_cluster_overdue_seconds 60
# HELP flotilla_journal_writable 1 while the journal takes appends, 0 once it stopped (a write failed; /healthz fails and a restart recovers it).
# TYPE flotilla_journal_writable gauge
flotilla_journal_writable 1
`), "flotilla_rollouts", "flotilla_rollout_idle_seconds", "flotilla_cluster_overdue_seconds", "flotilla_journal_writable"); err != nil {
		t.Error(err)
	}

	ok := ev(events.New("new", events.Source, events.TypeClusterSucceeded, events.ClusterResult{RolloutID: "a", Cluster: "c1"}))
	failed := ev(events.Derive(ok, events.TypeRolloutFailed, "a", events.RolloutResult{RolloutID: "a"}))
	failed.SetExtension(events.ExtRolloutID, "a")
	if _, err := st.Append(ctx, ok, failed); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		n, err := testutil.GatherAndCount(reg, "flotilla_rollbacks_total")
		return n == 1, err
	})
	if err != nil {
		t.Fatalf("waiting for the rollback to be counted: %v", err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP flotilla_cluster_results_total Cluster results of rollouts: succeeded, failed, reverted, revert_failed.
# TYPE flotilla_cluster_results_total counter
flotilla_cluster_results_total{result="succeeded"} 1
# HELP flotilla_rollbacks_total Rollbacks started (rollouts failed), by application and trigger: automatic (a cluster failed) or user (an abort, a rollback requested, a version quarantined).
# TYPE flotilla_rollbacks_total counter
flotilla_rollbacks_total{application="podinfo",trigger="automatic"} 1
`), "flotilla_cluster_results_total", "flotilla_rollbacks_total"); err != nil {
		t.Error(err)
	}
}

// In scale-out mode every replica's observer follows the whole bus and
// only the active one (the holder of partition 0) reports the fleet's
// metrics: what the others saw is not counted twice, and their scrapes
// carry no rollout gauges, only their own journal's health.
func TestObserverReportsOnlyWhileActive(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	repo := embedded.NewRepo(st, time.Now)
	ctx := t.Context()
	if _, err := repo.Create(ctx, rollout.Rollout{ID: "a", Application: "podinfo", Phase: rollout.Progressing}); err != nil {
		t.Fatal(err)
	}
	var active atomic.Bool
	reg := prometheus.NewPedanticRegistry()
	o, err := fleetmetrics.New(st, repo, reg, fleetmetrics.WithActive(active.Load))
	if err != nil {
		t.Fatal(err)
	}
	run, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- o.Run(run) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	ev := must(t)
	succeed := func(id, cluster string) {
		t.Helper()
		e := ev(events.New(id, events.Source, events.TypeClusterSucceeded, events.ClusterResult{RolloutID: "a", Cluster: cluster}))
		recs, err := st.Append(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		// Wait until the observer has read it.
		err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return o.Seen() >= recs[0].Seq, nil
		})
		if err != nil {
			t.Fatalf("the observer did not read %s: %v", id, err)
		}
	}
	count := func() int {
		t.Helper()
		n, err := testutil.GatherAndCount(reg, "flotilla_cluster_results_total", "flotilla_rollouts", "flotilla_journal_writable")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	succeed("while-inactive", "c1")
	if n := count(); n != 1 { // flotilla_journal_writable alone
		t.Errorf("an inactive observer reports %d series, want only its journal's health", n)
	}
	active.Store(true)
	succeed("while-active", "c2")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP flotilla_cluster_results_total Cluster results of rollouts: succeeded, failed, reverted, revert_failed.
# TYPE flotilla_cluster_results_total counter
flotilla_cluster_results_total{result="succeeded"} 1
`), "flotilla_cluster_results_total"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "flotilla_rollouts"); err != nil || n == 0 {
		t.Errorf("the active observer reports %d flotilla_rollouts series (%v), want the phases", n, err)
	}
}
