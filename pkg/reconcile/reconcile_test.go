package reconcile_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/reconcile"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

const (
	image  = "reg.test/team/app"
	digest = "sha256:d100"
	ref    = image + "@" + digest
	old    = image + ":0.9.0"
)

// clusters is what each cluster runs, as a Reader; a cluster missing is
// unreadable.
type clusters struct {
	mu   sync.Mutex
	runs map[string]rollout.Observed
}

func (c *clusters) Observe(_ context.Context, cluster, _ string, _ config.Workload) (rollout.Observed, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.runs[cluster]
	if !ok {
		return o, errors.New("connection refused")
	}
	return o, nil
}

// journal is the embedded store's journal, counting what was new.
type journal struct{ s *store.Store }

func (j journal) Append(ctx context.Context, evs ...cloudevents.Event) (int, error) {
	recs, err := j.s.Append(ctx, evs...)
	return len(recs), err
}

func (j journal) types(t *testing.T) []string {
	t.Helper()
	recs, err := j.s.Read(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		e := r.Event
		s := strings.TrimPrefix(strings.TrimSuffix(e.Type(), ".v1"), "dev.flotilla.")
		if p, err := events.Decode[events.ReconcileRequested](e); err == nil && e.Type() == events.TypeReconcileRequested {
			s += " " + p.Kind + " " + strings.Join(p.Clusters, ",")
		}
		if p, err := events.Decode[events.DriftDetected](e); err == nil && e.Type() == events.TypeDriftDetected {
			s += " " + p.Cluster + " " + p.Image + " " + p.Policy
		}
		out = append(out, s)
	}
	return out
}

// newRepo opens a store in a temporary directory and the Repo over it.
func newRepo(t *testing.T) (*store.Store, *embedded.Repo) {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, embedded.NewRepo(s, nil)
}

// fleet is the tests' fleet: c1 in wave a, c2 and c3 in wave b.
func fleet() config.Fleet {
	return config.Fleet{
		Clusters: []config.Cluster{{Name: "c1"}, {Name: "c2"}, {Name: "c3"}},
		Waves:    []config.Wave{{Name: "a", Clusters: []string{"c1"}}, {Name: "b", Clusters: []string{"c2", "c3"}}},
	}
}

// gitApp is application "app" from branch main of the repository url,
// its drift reverted.
func gitApp(url string) config.Application {
	return config.Application{Name: "app", Namespace: "ns", Workload: config.Workload{Name: "app"}, DriftPolicy: config.DriftPolicyRevert,
		Source: &config.Source{Git: &config.GitSource{URL: url, Branch: "main"}}}
}

func setup(t *testing.T, policy string) (*reconcile.Reconciler, *clusters, *embedded.Repo, journal, *prometheus.Registry) {
	t.Helper()
	s, repo := newRepo(t)
	cfg := &config.Config{
		Fleet:        fleet(),
		Applications: []config.Application{{Name: "app", Image: image, Namespace: "ns", Workload: config.Workload{Name: "app"}, DriftPolicy: policy}},
	}
	cs := &clusters{runs: map[string]rollout.Observed{}}
	for _, c := range []string{"c1", "c2", "c3"} {
		cs.runs[c] = rollout.Observed{Cluster: c, Workload: true, Canary: true, Primary: ref}
	}
	reg := prometheus.NewRegistry()
	r, err := reconcile.New(cfg, cs, repo, journal{s}, reconcile.Options{Metrics: reg, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.UpdateApp(t.Context(), "app", func(st *rollout.AppState) error {
		st.DeployedTag, st.DeployedDigest, st.DeployedClusters = "1.0.0", digest, []string{"c1", "c2"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return r, cs, repo, journal{s}, reg
}

var t0 = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

// A cluster new to the waves and a drifted one: the drift is journaled
// once and counted, the catch-up asked once however often it is found
// (a restart's check too), and the state says what is not current.
func TestCheckReportsAndCatchesUp(t *testing.T) {
	r, cs, repo, j, reg := setup(t, config.DriftPolicyReport)
	cs.runs["c3"] = rollout.Observed{Cluster: "c3", Workload: true}
	cs.runs["c2"] = rollout.Observed{Cluster: "c2", Workload: true, Canary: true, Primary: old}
	for range 3 {
		if _, err := r.Check(t.Context(), "app"); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"drift.detected c2 " + old + " report", "reconcile.requested catch-up c3"}
	if diff := cmp.Diff(want, j.types(t)); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	if got := value(t, reg, "flotilla_drift_clusters"); got != 1 {
		t.Errorf("flotilla_drift_clusters = %v, want 1", got)
	}
	st, err := repo.App(t.Context(), "app")
	if err != nil {
		t.Fatal(err)
	}
	wantDrift := &rollout.DriftStatus{Digest: digest, Tag: "1.0.0", Since: t0, Clusters: []rollout.ClusterCheck{
		{Cluster: "c2", State: rollout.CheckDrifted, Image: old, Reason: "the primary runs " + old + ", not the validated 1.0.0 (" + digest + ")"},
		{Cluster: "c3", State: rollout.CheckCatchUp, Reason: "no canary or primary: the cluster is new to the application, or came back empty"},
	}}
	if diff := cmp.Diff(wantDrift, st.Drift); diff != "" {
		t.Errorf("the application's drift (-want +got):\n%s", diff)
	}
	// A second Reconciler on the same journal and state (a restart) asks
	// nothing new.
	r2, err := reconcile.New(r.Config(), cs, repo, j, reconcile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Check(t.Context(), "app"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, j.types(t)); diff != "" {
		t.Errorf("journal after a restart's check (-want +got):\n%s", diff)
	}
}

// With driftPolicy revert a drifted cluster is reverted by a request of
// its own; nothing is asked while a rollout of the application is in
// flight, and an application another replica holds is left alone.
func TestCheckRevertsAndWaits(t *testing.T) {
	r, cs, repo, j, _ := setup(t, config.DriftPolicyRevert)
	cs.runs["c1"] = rollout.Observed{Cluster: "c1", Workload: true, Canary: true, Primary: old}
	if _, err := repo.Create(t.Context(), rollout.Rollout{ID: "app-1", Application: "app", Tag: "1.1.0", Phase: rollout.Progressing,
		Waves: []rollout.Wave{{Name: "a", Clusters: []rollout.Cluster{{Name: "c1"}}}}}); err != nil {
		t.Fatal(err)
	}
	rec, err := r.Check(t.Context(), "app")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rec.Skip, "in flight") || len(j.types(t)) != 0 {
		t.Errorf("checked with a rollout in flight: %+v, journal %v", rec, j.types(t))
	}
	if _, _, err := repo.UpdateEmit(t.Context(), "app-1", func(ro *rollout.Rollout) ([]cloudevents.Event, error) {
		ro.Phase = rollout.Succeeded
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Check(t.Context(), "app"); err != nil {
		t.Fatal(err)
	}
	want := []string{"drift.detected c1 " + old + " revert", "reconcile.requested drift-revert c1"}
	if diff := cmp.Diff(want, j.types(t)); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	// Found again as it was: nothing new. Changed by hand again to the
	// same image after its revert (a new generation of the primary): a
	// new drift and a new revert.
	if _, err := r.Check(t.Context(), "app"); err != nil {
		t.Fatal(err)
	}
	cs.mu.Lock()
	cs.runs["c1"] = rollout.Observed{Cluster: "c1", Workload: true, Canary: true, Primary: old, Generation: 7}
	cs.mu.Unlock()
	if _, err := r.Check(t.Context(), "app"); err != nil {
		t.Fatal(err)
	}
	want = append(want, want...)
	if diff := cmp.Diff(want, j.types(t)); diff != "" {
		t.Errorf("journal after a second change by hand (-want +got):\n%s", diff)
	}
}

func TestCheckSkipsWhatAnotherReplicaHolds(t *testing.T) {
	_, cs, repo, j, _ := setup(t, config.DriftPolicyRevert)
	cs.runs["c1"] = rollout.Observed{Cluster: "c1", Workload: true}
	cfg := &config.Config{
		Fleet:        config.Fleet{Clusters: []config.Cluster{{Name: "c1"}}, Waves: []config.Wave{{Name: "a", Clusters: []string{"c1"}}}},
		Applications: []config.Application{{Name: "app", Image: image, Namespace: "ns", Workload: config.Workload{Name: "app"}}},
	}
	r, err := reconcile.New(cfg, cs, repo, j, reconcile.Options{Owns: func(config.Application) bool { return false }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Check(t.Context(), "app"); err != nil {
		t.Fatal(err)
	}
	if got := j.types(t); len(got) != 0 {
		t.Errorf("a replica that does not hold the application journaled %v", got)
	}
}

// A watch's change of a primary checks its application within the settle
// time, not at the next interval.
func TestChangedChecksSoon(t *testing.T) {
	_, cs, repo, j, _ := setup(t, config.DriftPolicyReport)
	cfg := &config.Config{
		Fleet: config.Fleet{Clusters: []config.Cluster{{Name: "c1"}}, Waves: []config.Wave{{Name: "a", Clusters: []string{"c1"}}},
			Reconcile: config.Reconcile{Interval: &config.Duration{Duration: time.Hour}}},
		Applications: []config.Application{{Name: "app", Image: image, Namespace: "ns", Workload: config.Workload{Name: "app"}}},
	}
	r, err := reconcile.New(cfg, cs, repo, j, reconcile.Options{Settle: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	time.Sleep(100 * time.Millisecond) // the first check, at start: current
	cs.mu.Lock()
	cs.runs["c1"] = rollout.Observed{Cluster: "c1", Workload: true, Canary: true, Primary: old}
	cs.mu.Unlock()
	r.Changed("c1", "other-ns", "app") // not the application's namespace
	r.Changed("c1", "ns", "app")
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(j.types(t), "drift.detected c1 "+old+" report") {
		if time.Now().After(deadline) {
			t.Fatalf("no drift journaled 5 s after the primary changed: %v", j.types(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A git application's canary gone from a cluster (the watch cache's
// event) has its validated commit caught up there at once, not at the
// next interval.
func TestChangedCatchesUpAGitApplicationSoon(t *testing.T) {
	_, cs, repo, j, _ := setup(t, config.DriftPolicyReport) // "app" has a validated version
	cfg := &config.Config{
		Fleet: config.Fleet{Clusters: []config.Cluster{{Name: "c1"}}, Waves: []config.Wave{{Name: "a", Clusters: []string{"c1"}}},
			Reconcile: config.Reconcile{Interval: &config.Duration{Duration: time.Hour}}},
		Applications: []config.Application{{Name: "app", Namespace: "ns", Workload: config.Workload{Name: "app"},
			Source: &config.Source{Git: &config.GitSource{URL: "https://git.test/deploy.git", Branch: "main"}}}},
	}
	r, err := reconcile.New(cfg, cs, repo, j, reconcile.Options{Settle: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	time.Sleep(100 * time.Millisecond) // the first check, at start: current
	if got := j.types(t); len(got) != 0 {
		t.Fatalf("the first check journaled %v, want nothing", got)
	}
	cs.mu.Lock()
	cs.runs["c1"] = rollout.Observed{Cluster: "c1", Workload: true}
	cs.mu.Unlock()
	r.Changed("c1", "ns", "app")
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(j.types(t), "reconcile.requested catch-up c1") {
		if time.Now().After(deadline) {
			t.Fatalf("no catch-up journaled 5 s after the canary went: %v", j.types(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// value is the value of the single series of gauge name.
func value(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no single series of %s", name)
	return 0
}

// BenchmarkCheck is one check of an application of four clusters that all
// run the validated digest (the common case), reading the clusters from a
// cache-like reader and the embedded state: what each application costs
// per fleet.reconcile.interval.
func BenchmarkCheck(b *testing.B) {
	s, err := store.Open(filepath.Join(b.TempDir(), "db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	repo := embedded.NewRepo(s, nil)
	cfg := &config.Config{
		Fleet: config.Fleet{
			Clusters: []config.Cluster{{Name: "c1"}, {Name: "c2"}, {Name: "c3"}, {Name: "c4"}},
			Waves:    []config.Wave{{Name: "a", Clusters: []string{"c1"}}, {Name: "b", Clusters: []string{"c2", "c3", "c4"}}},
		},
		Applications: []config.Application{{Name: "app", Image: image, Namespace: "ns", Workload: config.Workload{Name: "app"}}},
	}
	cs := &clusters{runs: map[string]rollout.Observed{}}
	for _, c := range []string{"c1", "c2", "c3", "c4"} {
		cs.runs[c] = rollout.Observed{Cluster: c, Workload: true, Canary: true, Primary: ref}
	}
	if err := repo.UpdateApp(b.Context(), "app", func(st *rollout.AppState) error {
		st.DeployedTag, st.DeployedDigest = "1.0.0", digest
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	r, err := reconcile.New(cfg, cs, repo, journal{s}, reconcile.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Check(b.Context(), "app"); err != nil {
			b.Fatal(err)
		}
	}
}

// A git application: its validated commit is caught up to a cluster new
// to it (nothing there: the commit's render creates the workload) or
// emptied, once however often it is found (a restart's check too); a
// cluster whose primary runs is not compared without a Renderer (no
// drift), and the request names the repository and commit, keyed with
// its pushes.
func TestCheckCatchesUpAGitApplication(t *testing.T) {
	s, repo := newRepo(t)
	const (
		commit = "0123456789abcdef0123456789abcdef01234567"
		url    = "https://bot:secret@git.test/platform/deployments.git"
		shown  = "https://git.test/platform/deployments.git"
	)
	cfg := &config.Config{
		Fleet:        fleet(),
		Applications: []config.Application{gitApp(url)},
	}
	cs := &clusters{runs: map[string]rollout.Observed{
		"c1": {Cluster: "c1", Workload: true, Canary: true, Primary: "registry.example.com/podinfo:6.0.0"},
		"c2": {Cluster: "c2", Workload: true, Canary: true, Primary: "registry.example.com/podinfo:5.0.0"},
		"c3": {Cluster: "c3"},
	}}
	if err := repo.UpdateApp(t.Context(), "app", func(st *rollout.AppState) error {
		st.DeployedTag, st.DeployedDigest, st.DeployedClusters = "main@0123456789ab", commit, []string{"c1", "c2"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	j := journal{s}
	for i := range 3 {
		r, err := reconcile.New(cfg, cs, repo, j, reconcile.Options{Now: func() time.Time { return t0 }})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := r.Check(t.Context(), "app")
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if diff := cmp.Diff([]string{"c3"}, rec.CatchUp); diff != "" {
				t.Errorf("caught up (-want +got):\n%s", diff)
			}
		}
	}
	if diff := cmp.Diff([]string{"reconcile.requested catch-up c3"}, j.types(t)); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	recs, err := s.Read(t.Context(), 0, 10)
	if err != nil || len(recs) != 1 {
		t.Fatalf("journal: %d records, %v", len(recs), err)
	}
	e := recs[0].Event
	p, err := events.Decode[events.ReconcileRequested](e)
	if err != nil {
		t.Fatal(err)
	}
	type request struct{ Subject, Key, Image, Tag, Digest string }
	want := request{Subject: shown + "#" + commit, Key: dispatch.GitKey(shown), Image: shown, Tag: "main@0123456789ab", Digest: commit}
	if diff := cmp.Diff(want, request{e.Subject(), dispatch.Key(e), p.Image, p.Tag, p.Digest}); diff != "" {
		t.Errorf("the request (-want +got):\n%s", diff)
	}
}

// renderer renders each cluster's image of a commit, counting the renders.
type renderer struct {
	mu     sync.Mutex
	images map[string]string // by cluster
	calls  []string          // commit/cluster
}

func (r *renderer) WorkloadImage(_ context.Context, _ config.Application, cluster, commit string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, commit[:4]+"/"+cluster)
	img, ok := r.images[cluster]
	switch {
	case cluster == "c3" && commit[0] == 'f':
		return "", fault.Permanent(errors.New("renders no Deployment ns/app"))
	case !ok:
		return "", errors.New("renders no Deployment ns/app")
	}
	return img, nil
}

// A git application's primary changed by hand: its image is held against
// what the validated commit renders for the cluster (rendered once per
// commit and cluster, however often checked), found drifted, journaled
// once and reverted with the commit; a cluster the commit does not render
// for is not compared, and another commit validated is rendered anew.
func TestCheckFindsAGitApplicationsDrift(t *testing.T) {
	s, repo := newRepo(t)
	const (
		commit = "0123456789abcdef0123456789abcdef01234567"
		next   = "fedcba9876543210fedcba9876543210fedcba98"
		rev    = "https://git.test/deploy.git@" + commit
		img    = "reg.test/podinfo:6.0.0"
		hand   = "reg.test/podinfo:6.0.1"
	)
	cfg := &config.Config{
		Fleet:        fleet(),
		Applications: []config.Application{gitApp("https://git.test/deploy.git")},
	}
	cs := &clusters{runs: map[string]rollout.Observed{
		"c1": {Cluster: "c1", Workload: true, Canary: true, Primary: rev, PrimaryImage: img},
		"c2": {Cluster: "c2", Workload: true, Canary: true, Primary: rev, PrimaryImage: hand, Generation: 3},
		"c3": {Cluster: "c3", Workload: true, Canary: true, Primary: rev, PrimaryImage: hand},
	}}
	rd := &renderer{images: map[string]string{"c1": img, "c2": img}}
	if err := repo.UpdateApp(t.Context(), "app", func(st *rollout.AppState) error {
		st.DeployedTag, st.DeployedDigest, st.DeployedClusters = "main@0123456789ab", commit, []string{"c1", "c2", "c3"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	j := journal{s}
	reg := prometheus.NewRegistry()
	r, err := reconcile.New(cfg, cs, repo, j, reconcile.Options{Metrics: reg, Render: rd, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	var rec rollout.Reconciliation
	for range 3 {
		if rec, err = r.Check(t.Context(), "app"); err != nil {
			t.Fatal(err)
		}
	}
	type found struct {
		Drifted, Revert []string
		Checks          []rollout.ClusterCheck
	}
	want := found{Drifted: []string{"c2"}, Revert: []string{"c2"}, Checks: []rollout.ClusterCheck{
		{Cluster: "c1", State: rollout.CheckCurrent, Image: rev},
		{Cluster: "c2", State: rollout.CheckDrifted, Image: hand, Generation: 3,
			Reason: "the primary runs " + hand + ", not " + img + ", which the validated main@0123456789ab (" + commit + ") renders"},
		{Cluster: "c3", State: rollout.CheckCurrent, Image: rev, Reason: rollout.GitNotCompared + ": renders no Deployment ns/app"},
	}}
	if diff := cmp.Diff(want, found{rec.Drifted, rec.Revert, rec.Clusters}); diff != "" {
		t.Errorf("the check (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"drift.detected c2 " + hand + " revert", "reconcile.requested drift-revert c2"}, j.types(t)); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	if got := value(t, reg, "flotilla_drift_clusters"); got != 1 {
		t.Errorf("flotilla_drift_clusters = %v, want 1", got)
	}
	// c3's render failed: rendered again at each check, the others once.
	if diff := cmp.Diff([]string{"0123/c1", "0123/c2", "0123/c3", "0123/c3", "0123/c3"}, rd.calls); diff != "" {
		t.Errorf("renders (-want +got):\n%s", diff)
	}
	st, err := repo.App(t.Context(), "app")
	if err != nil {
		t.Fatal(err)
	}
	if st.Drift == nil || len(st.Drift.Clusters) != 1 || st.Drift.Clusters[0].State != rollout.CheckDrifted {
		t.Errorf("the application's state says %+v, want c2 drifted", st.Drift)
	}

	// Another commit validated: rendered anew; a permanent error (the
	// commit renders no workload for c3) is kept, not rendered again.
	if err := repo.UpdateApp(t.Context(), "app", func(st *rollout.AppState) error {
		st.DeployedDigest = next
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rd.calls = nil
	for range 2 {
		if _, err := r.Check(t.Context(), "app"); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"fedc/c1", "fedc/c2", "fedc/c3"}, rd.calls); diff != "" {
		t.Errorf("renders of the next commit (-want +got):\n%s", diff)
	}
}
