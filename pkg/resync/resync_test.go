package resync_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/cluster"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/resync"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

const (
	image = "registry.test/team/shop"
	ref   = image + "@sha256:new"
	prev  = image + "@sha256:old"
)

// t0 is when the rollouts of these tests were last updated.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

var cfg = &config.Config{Applications: []config.Application{{
	Name: "shop", Image: image, Namespace: "web",
	Workload: config.Workload{Kind: "Deployment", Name: "shop-api", Container: "api"},
}}}

// fakeStatus stands in for the clusters' canary status; the features read
// real canaries. It answers for the canary of workload (cfg's when zero).
type fakeStatus struct {
	workload config.Workload

	mu    sync.Mutex
	st    map[string]cluster.CanaryStatus
	reads []string
}

func (f *fakeStatus) CanaryStatus(_ context.Context, cl, namespace string, w config.Workload) (cluster.CanaryStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, cl)
	want := f.workload
	if want == (config.Workload{}) {
		want = cfg.Applications[0].Workload
	}
	st, ok := f.st[cl]
	if !ok || namespace != "web" || w != want {
		return cluster.CanaryStatus{}, errors.New("canary not found")
	}
	return st, nil
}

// journal adapts the real store to the Resyncer's Journal.
type journal struct{ s *store.Store }

func (j journal) Append(ctx context.Context, evs ...cloudevents.Event) (int, error) {
	recs, err := j.s.Append(ctx, evs...)
	return len(recs), err
}

type fixture struct {
	store  *store.Store
	repo   *embedded.Repo
	status *fakeStatus
	now    time.Time // the Resyncer's clock
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatalf("opening store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing store: %v", err)
		}
	})
	return &fixture{
		store:  s,
		repo:   embedded.NewRepo(s, func() time.Time { return t0 }),
		status: &fakeStatus{st: map[string]cluster.CanaryStatus{}},
		now:    t0.Add(time.Hour),
	}
}

func (f *fixture) resyncer(o resync.Options) *resync.Resyncer {
	o.Now = func() time.Time { return f.now }
	return resync.New(cfg, f.repo, f.status, journal{f.store}, o)
}

// addRollout stores a rollout in phase p whose one cluster c1 is in phase cp
// and was applied at applied.
func (f *fixture) addRollout(t *testing.T, id string, p rollout.Phase, cp rollout.ClusterPhase, applied time.Time) {
	t.Helper()
	ro := rollout.Rollout{
		ID: id, Application: "shop", Image: image, Tag: "1.3.0", Digest: "sha256:new", Phase: p,
		Waves: []rollout.Wave{{Name: "all", Clusters: []rollout.Cluster{{Name: "c1", Phase: cp, PreviousImage: prev, Applied: applied}}}},
	}
	if _, err := f.repo.Create(t.Context(), ro); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) journaled(t *testing.T) []cloudevents.Event {
	t.Helper()
	recs, err := f.store.Read(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var evs []cloudevents.Event
	for _, r := range recs {
		evs = append(evs, r.Event)
	}
	return evs
}

func TestPass(t *testing.T) {
	applied := t0.Add(-10 * time.Minute)
	st := func(phase string, transition time.Time, primary, target string) *cluster.CanaryStatus {
		return &cluster.CanaryStatus{Phase: phase, Checksum: "abc", Transition: transition, PrimaryImage: primary, TargetImage: target}
	}
	tests := []struct {
		name    string
		phase   rollout.Phase
		cluster rollout.ClusterPhase
		status  *cluster.CanaryStatus // nil: unreadable
		want    events.CanaryOutcome  // "" for no event
	}{
		{"succeeded after the apply", rollout.Progressing, rollout.ClusterProgressing,
			st("Succeeded", applied.Add(time.Minute), ref, ref), events.CanarySucceeded},
		{"initialized after the apply", rollout.Progressing, rollout.ClusterProgressing,
			st("Initialized", applied.Add(time.Minute), ref, ref), events.CanaryInitialized},
		{"failed after the apply", rollout.Progressing, rollout.ClusterProgressing,
			st("Failed", applied.Add(time.Minute), prev, ref), events.CanaryFailed},
		{"failed rollout, cluster still analysing when it failed", rollout.Failed, rollout.ClusterProgressing,
			st("Failed", applied.Add(time.Minute), prev, ref), events.CanaryFailed},
		{"reverting, settled after the revert", rollout.Failed, rollout.ClusterReverting,
			st("Succeeded", applied.Add(time.Minute), prev, prev), events.CanarySucceeded},
		{"transition at the apply", rollout.Progressing, rollout.ClusterProgressing,
			st("Succeeded", applied, ref, ref), events.CanarySucceeded},
		{"transition before the apply", rollout.Progressing, rollout.ClusterProgressing,
			st("Succeeded", applied.Add(-time.Second), prev, prev), ""},
		{"still analysing", rollout.Progressing, rollout.ClusterProgressing,
			st("Progressing", applied.Add(time.Minute), prev, ref), ""},
		{"promoting", rollout.Progressing, rollout.ClusterProgressing,
			st("Promoting", applied.Add(time.Minute), prev, ref), ""},
		{"unreadable", rollout.Progressing, rollout.ClusterProgressing, nil, ""},
		{"cluster still applying", rollout.Progressing, rollout.ClusterApplying,
			st("Succeeded", applied.Add(time.Minute), ref, ref), ""},
		{"cluster done", rollout.Progressing, rollout.ClusterSucceeded,
			st("Succeeded", applied.Add(time.Minute), ref, ref), ""},
		{"rollout succeeded", rollout.Succeeded, rollout.ClusterProgressing,
			st("Succeeded", applied.Add(time.Minute), ref, ref), ""},
		{"rollout rolled back", rollout.RolledBack, rollout.ClusterReverting,
			st("Succeeded", applied.Add(time.Minute), prev, prev), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			if tt.status != nil {
				f.status.st["c1"] = *tt.status
			}
			f.addRollout(t, "shop-1", tt.phase, tt.cluster, applied)
			if err := f.resyncer(resync.Options{}).Pass(t.Context(), false); err != nil {
				t.Fatalf("Pass: %v", err)
			}
			got := f.journaled(t)
			if tt.want == "" {
				if len(got) != 0 {
					t.Errorf("journaled %d events, want none", len(got))
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("journaled %d events, want 1", len(got))
			}
			e := got[0]
			want, err := resync.Event("shop-1", "c1", cfg.Applications[0], *tt.status)
			if err != nil {
				t.Fatal(err)
			}
			if e.ID() != want.ID() || e.Type() != events.TypeCanary || e.Source() != "/flotilla/resync" || events.RolloutID(e) != "shop-1" {
				t.Errorf("event %s %s %s rollout %q; want %s %s /flotilla/resync rollout shop-1",
					e.ID(), e.Type(), e.Source(), events.RolloutID(e), want.ID(), events.TypeCanary)
			}
			c, err := events.Decode[events.Canary](e)
			if err != nil {
				t.Fatal(err)
			}
			wantC := events.Canary{
				Cluster: "c1", Namespace: "web", Name: "shop-api", Phase: tt.status.Phase, Outcome: tt.want,
				Message: "status read by flotilla: phase " + tt.status.Phase + ", primary " + tt.status.PrimaryImage +
					", canary " + tt.status.TargetImage,
				Checksum: "abc", RolloutID: "shop-1", Receiver: "resync",
			}
			if diff := cmp.Diff(wantC, c); diff != "" {
				t.Errorf("canary payload (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPassWholeSeconds: Flagger keeps its transition time in whole seconds,
// so a canary applied at .300 that settled at .900 reports .000; it settled
// after the apply all the same.
// TestPassDaemonSet reads the canary of a DaemonSet workload as one.
func TestPassDaemonSet(t *testing.T) {
	f := newFixture(t)
	w := config.Workload{Kind: config.KindDaemonSet, Name: "shop-agent"}
	f.status.workload = w
	applied := t0.Add(-10 * time.Minute)
	f.status.st["c1"] = cluster.CanaryStatus{Phase: "Succeeded", Transition: applied.Add(time.Minute), PrimaryImage: ref, TargetImage: ref}
	f.addRollout(t, "shop-1", rollout.Progressing, rollout.ClusterProgressing, applied)
	ds := &config.Config{Applications: []config.Application{{Name: "shop", Image: image, Namespace: "web", Workload: w}}}
	r := resync.New(ds, f.repo, f.status, journal{f.store}, resync.Options{Now: func() time.Time { return f.now }})
	if err := r.Pass(t.Context(), false); err != nil {
		t.Fatalf("Pass: %v", err)
	}
	got := f.journaled(t)
	if len(got) != 1 {
		t.Fatalf("journaled %d events, want 1", len(got))
	}
	c, err := events.Decode[events.Canary](got[0])
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "shop-agent" || c.Outcome != events.CanarySucceeded {
		t.Errorf("canary event for %s, outcome %s; want shop-agent, succeeded", c.Name, c.Outcome)
	}
}

func TestPassWholeSeconds(t *testing.T) {
	applied := t0.Add(-time.Minute).Add(300 * time.Millisecond)
	tests := []struct {
		name       string
		transition time.Time
		want       int
	}{
		{"same second", applied.Truncate(time.Second), 1},
		{"second before", applied.Truncate(time.Second).Add(-time.Second), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.addRollout(t, "shop-1", rollout.Progressing, rollout.ClusterProgressing, applied)
			f.status.st["c1"] = cluster.CanaryStatus{Phase: "Succeeded", Transition: tt.transition, PrimaryImage: ref, TargetImage: ref}
			if err := f.resyncer(resync.Options{}).Pass(t.Context(), false); err != nil {
				t.Fatal(err)
			}
			if got := len(f.journaled(t)); got != tt.want {
				t.Errorf("journaled %d events, want %d", got, tt.want)
			}
		})
	}
}

func TestPassSameStateSameEvent(t *testing.T) {
	f := newFixture(t)
	applied := t0.Add(-time.Minute)
	f.addRollout(t, "shop-1", rollout.Progressing, rollout.ClusterProgressing, applied)
	f.status.st["c1"] = cluster.CanaryStatus{Phase: "Succeeded", Checksum: "abc", Transition: t0, PrimaryImage: ref, TargetImage: ref}
	r := f.resyncer(resync.Options{})
	for range 2 {
		if err := r.Pass(t.Context(), false); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.journaled(t); len(got) != 1 {
		t.Errorf("two passes over the same state journaled %d events, want 1", len(got))
	}

	// A new spec (checksum) or phase is news.
	f.status.st["c1"] = cluster.CanaryStatus{Phase: "Succeeded", Checksum: "def", Transition: t0, PrimaryImage: ref, TargetImage: ref}
	if err := r.Pass(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	got := f.journaled(t)
	if len(got) != 2 || got[0].ID() == got[1].ID() {
		t.Errorf("a new checksum journaled %d events", len(got))
	}
}

func TestEventID(t *testing.T) {
	app := cfg.Applications[0]
	base := cluster.CanaryStatus{Phase: "Succeeded", Checksum: "abc", Transition: t0, PrimaryImage: ref, TargetImage: ref}
	id := func(rolloutID, cl string, st cluster.CanaryStatus) string {
		t.Helper()
		e, err := resync.Event(rolloutID, cl, app, st)
		if err != nil {
			t.Fatal(err)
		}
		return e.ID()
	}
	first := id("shop-1", "c1", base)
	later := base
	later.Transition, later.Weight = t0.Add(time.Hour), 50
	if got := id("shop-1", "c1", later); got != first {
		t.Errorf("the same state read later has id %s, want %s", got, first)
	}
	failed := base
	failed.Phase = "Failed"
	for name, other := range map[string]string{
		"other rollout":  id("shop-2", "c1", base),
		"other cluster":  id("shop-1", "c2", base),
		"other phase":    id("shop-1", "c1", failed),
		"other primary":  id("shop-1", "c1", cluster.CanaryStatus{Phase: "Succeeded", Checksum: "abc", PrimaryImage: prev, TargetImage: ref}),
		"other checksum": id("shop-1", "c1", cluster.CanaryStatus{Phase: "Succeeded", Checksum: "x", PrimaryImage: ref, TargetImage: ref}),
	} {
		if other == first {
			t.Errorf("%s: same id %s", name, first)
		}
	}
}

func TestPassOverdue(t *testing.T) {
	tests := []struct {
		name        string
		since       time.Duration // from the rollout's last update to now
		onlyOverdue bool
		want        int
	}{
		{"recently updated", 10 * time.Second, true, 0},
		{"just overdue", 20 * time.Second, true, 1},
		{"long overdue", time.Hour, true, 1},
		{"every cluster, overdue or not", 10 * time.Second, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.addRollout(t, "shop-1", rollout.Progressing, rollout.ClusterProgressing, t0.Add(-time.Minute))
			f.status.st["c1"] = cluster.CanaryStatus{Phase: "Succeeded", Transition: t0, PrimaryImage: ref, TargetImage: ref}
			f.now = t0.Add(tt.since)
			if err := f.resyncer(resync.Options{Overdue: 20 * time.Second}).Pass(t.Context(), tt.onlyOverdue); err != nil {
				t.Fatal(err)
			}
			if got := len(f.journaled(t)); got != tt.want {
				t.Errorf("journaled %d events, want %d", got, tt.want)
			}
			if tt.want == 0 && len(f.status.reads) != 0 {
				t.Errorf("read %v for a rollout that is not overdue", f.status.reads)
			}
		})
	}
}

// TestPassSkipsUnreadable checks that one cluster that cannot be read does
// not keep the others from being resynced.
func TestPassSkipsUnreadable(t *testing.T) {
	f := newFixture(t)
	applied := t0.Add(-time.Minute)
	ro := rollout.Rollout{
		ID: "shop-1", Application: "shop", Image: image, Digest: "sha256:new", Phase: rollout.Progressing,
		Waves: []rollout.Wave{{Name: "all", Clusters: []rollout.Cluster{
			{Name: "gone", Phase: rollout.ClusterProgressing, Applied: applied},
			{Name: "c1", Phase: rollout.ClusterProgressing, Applied: applied},
		}}},
	}
	if _, err := f.repo.Create(t.Context(), ro); err != nil {
		t.Fatal(err)
	}
	other := ro
	other.ID, other.Application = "gone-1", "unconfigured"
	if _, err := f.repo.Create(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	f.status.st["c1"] = cluster.CanaryStatus{Phase: "Succeeded", Transition: t0, PrimaryImage: ref, TargetImage: ref}
	if err := f.resyncer(resync.Options{}).Pass(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	got := f.journaled(t)
	if len(got) != 1 || events.RolloutID(got[0]) != "shop-1" {
		t.Fatalf("journaled %v, want one event for shop-1", got)
	}
	if c, _ := events.Decode[events.Canary](got[0]); c.Cluster != "c1" {
		t.Errorf("event for cluster %q, want c1", c.Cluster)
	}
}

// TestRun checks that the first pass reads every waiting cluster, overdue or
// not (catching up after a restart), and that Run stops with its context.
func TestRun(t *testing.T) {
	f := newFixture(t)
	f.addRollout(t, "shop-1", rollout.Progressing, rollout.ClusterProgressing, t0.Add(-time.Minute))
	f.status.st["c1"] = cluster.CanaryStatus{Phase: "Succeeded", Transition: t0, PrimaryImage: ref, TargetImage: ref}
	f.now = t0 // just updated: not overdue
	changed := f.store.Changed()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.resyncer(resync.Options{Interval: time.Hour}).Run(ctx) }()

	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("the first pass journaled nothing")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if got := len(f.journaled(t)); got != 1 {
		t.Errorf("journaled %d events, want 1", got)
	}
}
