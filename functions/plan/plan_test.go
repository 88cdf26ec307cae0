package plan_test

import (
	"context"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/functions/internal/functiontest"
	"github.com/flotilla-cd/flotilla/functions/plan"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

const image = "registry.test/team/app"

func newConfig(apps ...config.Application) *config.Config {
	return &config.Config{
		Fleet: config.Fleet{Waves: []config.Wave{
			{Name: "canary", Clusters: []string{"c1"}},
			{Name: "rest", Clusters: []string{"c2", "c3"}},
		}},
		Applications: apps,
	}
}

func application(name, img string, track config.Track) config.Application {
	return config.Application{Name: name, Image: img, Track: track, Namespace: "default",
		Workload: config.Workload{Kind: "Deployment", Name: name}}
}

func verified(t *testing.T, id, img, tag string) cloudevents.Event {
	t.Helper()
	e, err := events.New(id, events.Source, events.TypeImageVerified, events.ImageVerified{Image: img, Tag: tag, Digest: "sha256:" + tag})
	if err != nil {
		t.Fatalf("building event: %v", err)
	}
	return e
}

// started is what plan emits for a rollout of tag to app, started by the
// event with id parent.
func started(parent, app, tag string) []functiontest.Emitted {
	id := plan.ID(parent, app)
	return []functiontest.Emitted{
		{ID: parent + "/" + events.TypeRolloutStarted + "/" + app, Type: events.TypeRolloutStarted, RolloutID: id, Data: events.RolloutStarted{
			RolloutID: id, Application: app, Image: image, Tag: tag, Digest: "sha256:" + tag,
			Waves: [][]string{{"c1"}, {"c2", "c3"}},
		}},
		{ID: parent + "/" + events.TypeWaveStarted + "/" + app, Type: events.TypeWaveStarted, RolloutID: id, Data: events.WaveStarted{
			RolloutID: id, Wave: 0, Clusters: []string{"c1"},
		}},
	}
}

func skipped(parent, app, tag, reason string) functiontest.Emitted {
	return functiontest.Emitted{ID: parent + "/" + events.TypeRolloutSkipped + "/" + app, Type: events.TypeRolloutSkipped, Data: events.RolloutSkipped{
		Application: app, Image: image, Tag: tag, Reason: reason,
	}}
}

func withDenyTags(a config.Application, patterns ...string) config.Application {
	a.DenyTags = patterns
	return a
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name   string
		apps   []config.Application
		latest map[string]string // app -> DeployedTag before the event
		image  string
		tag    string
		want   []functiontest.Emitted
	}{
		{
			name: "first version of an application",
			apps: []config.Application{application("app", image, config.TrackMinorVersion)},
			tag:  "1.2.3",
			want: started("v1", "app", "1.2.3"),
		},
		{
			name:   "minor upgrade on the MinorVersion track",
			apps:   []config.Application{application("app", image, config.TrackMinorVersion)},
			latest: map[string]string{"app": "1.2.3"},
			tag:    "1.3.0",
			want:   started("v1", "app", "1.3.0"),
		},
		{
			name:   "major upgrade outside the MinorVersion track",
			apps:   []config.Application{application("app", image, config.TrackMinorVersion)},
			latest: map[string]string{"app": "1.2.3"},
			tag:    "2.0.0",
			want: []functiontest.Emitted{skipped("v1", "app", "2.0.0",
				"2.0.0 is a major upgrade of 1.2.3; track MinorVersion allows minor and patch upgrades only")},
		},
		{
			name:   "a tag the application denies",
			apps:   []config.Application{withDenyTags(application("app", image, config.TrackMinorVersion), `1\.3\.0`, ".*-debug")},
			latest: map[string]string{"app": "1.2.3"},
			tag:    "1.3.0",
			want:   []functiontest.Emitted{skipped("v1", "app", "1.3.0", `1.3.0 matches the application's denyTags pattern "1\\.3\\.0"`)},
		},
		{
			name:   "a denied pattern matches the whole tag only",
			apps:   []config.Application{withDenyTags(application("app", image, config.TrackMinorVersion), `1\.3`)},
			latest: map[string]string{"app": "1.2.3"},
			tag:    "1.3.0",
			want:   started("v1", "app", "1.3.0"),
		},
		{
			name:   "older version",
			apps:   []config.Application{application("app", image, config.TrackMajorVersion)},
			latest: map[string]string{"app": "1.2.3"},
			tag:    "1.2.2",
			want:   []functiontest.Emitted{skipped("v1", "app", "1.2.2", "1.2.2 is older than the current 1.2.3")},
		},
		{
			name: "two applications track the image, one per track",
			apps: []config.Application{
				application("api", image, config.TrackPatchLevel),
				application("worker", image, config.TrackMinorVersion),
			},
			latest: map[string]string{"api": "1.2.3", "worker": "1.2.3"},
			tag:    "1.3.0",
			want: append([]functiontest.Emitted{skipped("v1", "api", "1.3.0",
				"1.3.0 is a minor upgrade of 1.2.3; track PatchLevel allows patch upgrades only")},
				started("v1", "worker", "1.3.0")...),
		},
		{
			name: "two applications start two rollouts",
			apps: []config.Application{
				application("api", image, config.TrackMinorVersion),
				application("worker", image, config.TrackNewest),
			},
			tag:  "1.2.3",
			want: append(started("v1", "api", "1.2.3"), started("v1", "worker", "1.2.3")...),
		},
		{
			name:  "no application tracks the image",
			apps:  []config.Application{application("app", image, config.TrackMinorVersion)},
			image: "registry.test/team/other",
			tag:   "1.2.3",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			repo := functiontest.NewRepo(t)
			for app, tag := range tt.latest {
				if err := repo.UpdateApp(ctx, app, func(s *rollout.AppState) error {
					s.DeployedTag, s.DeployedDigest = tag, "sha256:"+tag
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			img := image
			if tt.image != "" {
				img = tt.image
			}
			fn := plan.New(newConfig(tt.apps...), repo, nil)
			evs, err := fn.Handle(ctx, verified(t, "v1", img, tt.tag))
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			got := summarize(t, evs)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("emitted (-want +got):\n%s", diff)
			}

			// Every started rollout is stored with its waves, and the
			// application remembers it.
			for _, e := range got {
				s, ok := e.Data.(events.RolloutStarted)
				if !ok {
					continue
				}
				ro, err := repo.Get(ctx, s.RolloutID)
				if err != nil {
					t.Fatalf("Get(%s): %v", s.RolloutID, err)
				}
				ro = unstarted(ro)
				ro.Created, ro.Updated = ro.Created.UTC(), ro.Updated.UTC()
				want := rollout.Rollout{
					ID: s.RolloutID, Application: s.Application, Image: image, Tag: tt.tag, Digest: "sha256:" + tt.tag,
					Phase: rollout.Progressing, Created: ro.Created, Updated: ro.Updated, Version: 1,
					PreviousTag: tt.latest[s.Application], Source: rollout.SourceWebhook,
					Waves: []rollout.Wave{
						{Name: "canary", Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterPending}}},
						{Name: "rest", Clusters: []rollout.Cluster{{Name: "c2", Phase: rollout.ClusterPending}, {Name: "c3", Phase: rollout.ClusterPending}}},
					},
				}
				if want.PreviousTag != "" {
					want.PreviousDigest = "sha256:" + want.PreviousTag
				}
				if diff := cmp.Diff(want, ro); diff != "" {
					t.Errorf("stored rollout (-want +got):\n%s", diff)
				}
				st, err := repo.App(ctx, s.Application)
				if err != nil {
					t.Fatal(err)
				}
				wantApp := rollout.AppState{Name: s.Application, LatestTag: tt.tag, LatestRollout: s.RolloutID}
				if d := tt.latest[s.Application]; d != "" {
					wantApp.DeployedTag, wantApp.DeployedDigest = d, "sha256:"+d
				}
				// What plan saw of the push: TestPlanRecordsWhatItSaw.
				if diff := cmp.Diff(wantApp, st, cmpopts.IgnoreFields(rollout.AppState{}, "LastSeen", "LastWebhook")); diff != "" {
					t.Errorf("application state (-want +got):\n%s", diff)
				}
			}
			// A skipped version leaves the application as it was.
			for _, e := range got {
				s, ok := e.Data.(events.RolloutSkipped)
				if !ok {
					continue
				}
				st, err := repo.App(ctx, s.Application)
				if err != nil {
					t.Fatal(err)
				}
				if st.DeployedTag != tt.latest[s.Application] || st.LatestRollout != "" {
					t.Errorf("skipping changed the application state to %+v", st)
				}
			}
		})
	}
}

func TestPlanRedelivery(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	fn := plan.New(newConfig(application("app", image, config.TrackMinorVersion)), repo, nil)
	e := verified(t, "v1", image, "1.2.3")

	first, err := fn.Handle(ctx, e)
	if err != nil {
		t.Fatalf("first Handle: %v", err)
	}
	// The version is now the latest, so deciding again would skip it: a
	// redelivery must find the rollout it started instead.
	second, err := fn.Handle(ctx, e)
	if err != nil {
		t.Fatalf("second Handle: %v", err)
	}
	want := started("v1", "app", "1.2.3")
	if diff := cmp.Diff(want, summarize(t, first)); diff != "" {
		t.Errorf("first delivery (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, summarize(t, second)); diff != "" {
		t.Errorf("redelivery (-want +got):\n%s", diff)
	}
	ros, err := repo.ListInFlight(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ros) != 1 {
		t.Errorf("%d rollouts after a redelivery, want 1", len(ros))
	}

	// A redelivery once the rollout has finished (after the journal's
	// dedupe window) starts nothing and says why.
	if _, err := repo.Update(ctx, plan.ID("v1", "app"), func(r *rollout.Rollout) error { r.Phase = rollout.Succeeded; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := repo.UpdateApp(ctx, "app", func(s *rollout.AppState) error {
		s.DeployedTag, s.DeployedDigest = "1.2.3", "sha256:1.2.3"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	late, err := fn.Handle(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	reason := "this push was delivered before: its rollout " + plan.ID("v1", "app") + " has finished (Succeeded)"
	if diff := cmp.Diff([]functiontest.Emitted{skipped("v1", "app", "1.2.3", reason)}, summarize(t, late)); diff != "" {
		t.Errorf("redelivery after the rollout finished (-want +got):\n%s", diff)
	}

	// Another push of the same tag (a new event) is skipped.
	other, err := fn.Handle(ctx, verified(t, "v2", image, "1.2.3"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]functiontest.Emitted{skipped("v2", "app", "1.2.3", "1.2.3 is the current version")}, summarize(t, other)); diff != "" {
		t.Errorf("second push of the same tag (-want +got):\n%s", diff)
	}
}

func TestPlanID(t *testing.T) {
	a, b := plan.ID("e1", "app"), plan.ID("e1", "app")
	if a != b {
		t.Errorf("ID is not deterministic: %s, %s", a, b)
	}
	for _, other := range []string{plan.ID("e2", "app"), plan.ID("e1", "app2"), plan.ID("e1a", "pp")} {
		if other == a {
			t.Errorf("ID collision: %s", a)
		}
	}
	if got := a[:4]; got != "app-" {
		t.Errorf("ID %q does not start with the application name", a)
	}
}

func TestPlanErrors(t *testing.T) {
	bad := verified(t, "v1", image, "1.0.0")
	if err := bad.SetData(cloudevents.ApplicationJSON, []byte(`[]`)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		app  config.Application
		e    cloudevents.Event
	}{
		{"payload does not decode", application("app", image, config.TrackMinorVersion), bad},
		{"unknown track", application("app", image, "Sometimes"), verified(t, "v1", image, "1.0.0")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := functiontest.NewRepo(t)
			evs, err := plan.New(newConfig(tt.app), repo, nil).Handle(t.Context(), tt.e)
			if err == nil || !fault.IsPermanent(err) {
				t.Fatalf("Handle = %v, %v; want a permanent error", evs, err)
			}
			if ros, _ := repo.ListInFlight(t.Context()); len(ros) != 0 {
				t.Errorf("%d rollouts created", len(ros))
			}
		})
	}
}

func summarize(t *testing.T, evs []cloudevents.Event) []functiontest.Emitted {
	t.Helper()
	return functiontest.Summarize(t, decisions(evs), events.TypeRolloutStarted, events.TypeWaveStarted, events.TypeRolloutSkipped)
}

// decisions are evs without the first wave's runs plan requests with a
// start (Rollout.Start's rule, tested in pkg/rollout and launch; that plan
// requests them: TestPlanStartsTheFirstWave).
func decisions(evs []cloudevents.Event) []cloudevents.Event {
	return slices.DeleteFunc(slices.Clone(evs), func(e cloudevents.Event) bool {
		return e.Type() == events.TypePipelineRunRequested || e.Type() == events.TypeClusterDeadline
	})
}

// unstarted is ro as plan created it, before its start moved the first
// wave's clusters on.
func unstarted(ro rollout.Rollout) rollout.Rollout {
	ro.Waves = slices.Clone(ro.Waves)
	if len(ro.Waves) > 0 && ro.Phase == rollout.Progressing && ro.Wave == 0 {
		ro.Waves[0].Clusters = slices.Clone(ro.Waves[0].Clusters)
		for i := range ro.Waves[0].Clusters {
			c := &ro.Waves[0].Clusters[i]
			if c.Phase == rollout.ClusterApplying && c.Step == 1 {
				c.Phase, c.Step, c.Run, c.Deadline = rollout.ClusterPending, 0, "", time.Time{}
			}
		}
		ro.Version--
	}
	return ro
}

// An application with a cluster selector rolls out only to the clusters it
// selects (a wave left with none is skipped), each wave's policy scaled to
// what is left of it.
func TestPlanTargetsAndWavePolicy(t *testing.T) {
	cfg := newConfig(application("app", image, config.TrackMinorVersion))
	cfg.Fleet.Clusters = []config.Cluster{
		{Name: "c1", Labels: map[string]string{"region": "us"}},
		{Name: "c2", Labels: map[string]string{"region": "eu"}},
		{Name: "c3", Labels: map[string]string{"region": "eu"}},
		{Name: "c4", Labels: map[string]string{"region": "eu"}},
	}
	cfg.Fleet.Waves[1].Clusters = []string{"c2", "c3", "c4"}
	cfg.Fleet.WavePolicy = config.WavePolicy{MaxFailures: ptr.To(intstr.FromString("50%"))}
	cfg.Fleet.Waves[1].MaxParallel = ptr.To(intstr.FromInt32(1))
	cfg.Applications[0].ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}}
	repo := functiontest.NewRepo(t)
	evs, err := plan.New(cfg, repo, nil).Handle(t.Context(), verified(t, "v1", image, "1.2.3"))
	if err != nil {
		t.Fatal(err)
	}
	if evs = decisions(evs); len(evs) != 2 || evs[1].Type() != events.TypeWaveStarted {
		t.Fatalf("emitted %v, want rollout.started and wave.started", evs)
	}
	ws, err := events.Decode[events.WaveStarted](evs[1])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(events.WaveStarted{RolloutID: plan.ID("v1", "app"), Wave: 0, Clusters: []string{"c2", "c3", "c4"}}, ws); diff != "" {
		t.Errorf("wave started (-want +got):\n%s", diff)
	}
	ro, err := repo.Get(t.Context(), plan.ID("v1", "app"))
	if err != nil {
		t.Fatal(err)
	}
	ro = unstarted(ro)
	want := []rollout.Wave{{Name: "rest", MaxParallel: 1, MaxFailures: 1, Clusters: []rollout.Cluster{
		{Name: "c2", Phase: rollout.ClusterPending}, {Name: "c3", Phase: rollout.ClusterPending}, {Name: "c4", Phase: rollout.ClusterPending},
	}}}
	if diff := cmp.Diff(want, ro.Waves); diff != "" {
		t.Errorf("waves (-want +got):\n%s", diff)
	}
}

// kinds lists the types of evs and the rollouts they are about.
func kinds(evs []cloudevents.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, strings.TrimPrefix(strings.TrimSuffix(e.Type(), ".v1"), "dev.flotilla.")+" "+events.RolloutID(e))
	}
	return out
}

// A newer version supersedes the rollout in flight (the default), or
// queues behind it (onNewVersion: queue; only the newest waits), or behind
// a rollback whatever the policy; a queued rollout starts when the one in
// flight ends.
func TestPlanSupersedeAndQueue(t *testing.T) {
	a, b, c := plan.ID("v1", "app"), plan.ID("v2", "app"), plan.ID("v3", "app")
	handle := func(t *testing.T, fn *plan.Function, e cloudevents.Event) []string {
		t.Helper()
		evs, err := fn.Handle(t.Context(), e)
		if err != nil {
			t.Fatal(err)
		}
		return kinds(decisions(evs))
	}
	phase := func(t *testing.T, repo interface {
		Get(context.Context, string) (rollout.Rollout, error)
	}, id string) rollout.Phase {
		t.Helper()
		ro, err := repo.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return ro.Phase
	}
	ended := func(t *testing.T, typ, id string) cloudevents.Event {
		t.Helper()
		e, err := events.New("end-"+id, events.Source, typ, events.RolloutResult{RolloutID: id})
		if err != nil {
			t.Fatal(err)
		}
		e.SetExtension(events.ExtRolloutID, id)
		return e
	}

	t.Run("supersede", func(t *testing.T) {
		repo := functiontest.NewRepo(t)
		fn := plan.New(newConfig(application("app", image, config.TrackMinorVersion)), repo, nil)
		handle(t, fn, verified(t, "v1", image, "1.2.3"))
		got := handle(t, fn, verified(t, "v2", image, "1.3.0"))
		if diff := cmp.Diff([]string{"rollout.superseded " + a, "rollout.started " + b, "wave.started " + b}, got); diff != "" {
			t.Errorf("a newer version (-want +got):\n%s", diff)
		}
		if p := phase(t, repo, a); p != rollout.Superseded {
			t.Errorf("the older rollout is %s, want Superseded", p)
		}
	})

	t.Run("queue, the newest waiting", func(t *testing.T) {
		repo := functiontest.NewRepo(t)
		app := application("app", image, config.TrackMinorVersion)
		app.OnNewVersion = config.OnNewVersionQueue
		fn := plan.New(newConfig(app), repo, nil)
		handle(t, fn, verified(t, "v1", image, "1.2.3"))
		if diff := cmp.Diff([]string{"rollout.queued " + b}, handle(t, fn, verified(t, "v2", image, "1.3.0"))); diff != "" {
			t.Errorf("a newer version (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"rollout.superseded " + b, "rollout.queued " + c}, handle(t, fn, verified(t, "v3", image, "1.4.0"))); diff != "" {
			t.Errorf("a newer one still (-want +got):\n%s", diff)
		}
		if got := handle(t, fn, verified(t, "v3", image, "1.4.0")); len(got) != 0 {
			t.Errorf("a redelivery of the queued version = %v, want nothing", got)
		}
		if _, err := repo.Update(t.Context(), a, func(r *rollout.Rollout) error { r.Phase = rollout.Succeeded; return nil }); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"rollout.started " + c, "wave.started " + c}, handle(t, fn, ended(t, events.TypeRolloutSucceeded, a))); diff != "" {
			t.Errorf("when the rollout in flight ends (-want +got):\n%s", diff)
		}
		if p := phase(t, repo, c); p != rollout.Progressing {
			t.Errorf("the queued rollout is %s, want Progressing", p)
		}
		if got := handle(t, fn, ended(t, events.TypeRolloutSucceeded, a)); len(got) != 0 {
			t.Errorf("the end again = %v, want nothing", got)
		}
	})

	t.Run("behind a rollback", func(t *testing.T) {
		repo := functiontest.NewRepo(t)
		fn := plan.New(newConfig(application("app", image, config.TrackMinorVersion)), repo, nil)
		handle(t, fn, verified(t, "v1", image, "1.2.3"))
		if _, err := repo.Update(t.Context(), a, func(r *rollout.Rollout) error { r.Phase = rollout.Failed; return nil }); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"rollout.queued " + b}, handle(t, fn, verified(t, "v2", image, "1.3.0"))); diff != "" {
			t.Errorf("a newer version during a rollback (-want +got):\n%s", diff)
		}
		if _, err := repo.Update(t.Context(), a, func(r *rollout.Rollout) error { r.Phase = rollout.RolledBack; return nil }); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"rollout.started " + b, "wave.started " + b}, handle(t, fn, ended(t, events.TypeRolloutRolledBack, a))); diff != "" {
			t.Errorf("when the rollback ends (-want +got):\n%s", diff)
		}
	})
}

// The baseline is what the fleet last ran: after a version failed and was
// rolled back, a hotfix older than it is accepted; the same tag pushed again
// with a new digest rolls out; a version not newer than the one in flight
// does not take it over.
func TestPlanBaseline(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	fn := plan.New(newConfig(application("app", image, config.TrackMinorVersion)), repo, nil)
	handle := func(id, tag, digest string) []functiontest.Emitted {
		t.Helper()
		e, err := events.New(id, events.Source, events.TypeImageVerified, events.ImageVerified{Image: image, Tag: tag, Digest: digest})
		if err != nil {
			t.Fatal(err)
		}
		evs, err := fn.Handle(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		return summarize(t, evs)
	}
	if err := repo.UpdateApp(ctx, "app", func(s *rollout.AppState) error {
		s.DeployedTag, s.DeployedDigest = "1.0.0", "sha256:a"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := handle("p1", "1.1.0", "sha256:b"); len(got) != 2 {
		t.Fatalf("1.1.0 = %v, want a rollout", got)
	}
	// Not newer than the rollout in flight.
	reason := "1.0.1 is not newer than 1.1.0, which rollout " + plan.ID("p1", "app") + " is rolling out"
	if diff := cmp.Diff([]functiontest.Emitted{skipped("p2", "app", "1.0.1", reason)}, handle("p2", "1.0.1", "sha256:c")); diff != "" {
		t.Errorf("an older version during a rollout (-want +got):\n%s", diff)
	}
	// 1.1.0 fails and is rolled back: the hotfix 1.0.1 is accepted.
	if _, err := repo.Update(ctx, plan.ID("p1", "app"), func(r *rollout.Rollout) error { r.Phase = rollout.RolledBack; return nil }); err != nil {
		t.Fatal(err)
	}
	if got := handle("p3", "1.0.1", "sha256:c"); len(got) != 2 || got[0].Type != events.TypeRolloutStarted {
		t.Errorf("the hotfix after a rollback = %v, want a rollout", got)
	}
	if _, err := repo.Update(ctx, plan.ID("p3", "app"), func(r *rollout.Rollout) error { r.Phase = rollout.Succeeded; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := repo.UpdateApp(ctx, "app", func(s *rollout.AppState) error {
		s.DeployedTag, s.DeployedDigest = "1.0.1", "sha256:c"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The same tag rebuilt: a new digest rolls out, the same one does not.
	if got := handle("p4", "1.0.1", "sha256:d"); len(got) != 2 || got[0].Type != events.TypeRolloutStarted {
		t.Errorf("1.0.1 rebuilt = %v, want a rollout", got)
	}
	if got := handle("p5", "1.0.1", "sha256:d"); len(got) != 1 || got[0].Type != events.TypeRolloutSkipped {
		t.Errorf("1.0.1 with the digest in flight = %v, want it skipped", got)
	}
}

// TestPlanBaselineOfAnEndedRollout: a rollout that ended but whose
// success advance has not recorded yet (it archives a rollout, then
// records it as deployed; on the scale-out fleet another replica plans in
// between) is the baseline all the same; one that failed is not.
func TestPlanBaselineOfAnEndedRollout(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ended rollout.Phase
		want  func(parent string) []functiontest.Emitted
	}{
		{name: "succeeded, not recorded yet: an older version is refused", ended: rollout.Succeeded, want: func(parent string) []functiontest.Emitted {
			return []functiontest.Emitted{skipped(parent, "app", "0.9.0", "0.9.0 is older than the current 1.0.0")}
		}},
		{name: "rolled back: it is no baseline", ended: rollout.RolledBack, want: func(parent string) []functiontest.Emitted {
			return started(parent, "app", "0.9.0")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			repo := functiontest.NewRepo(t)
			fn := plan.New(newConfig(application("app", image, config.TrackMinorVersion)), repo, nil)
			if _, err := fn.Handle(ctx, verified(t, "p1", image, "1.0.0")); err != nil {
				t.Fatal(err)
			}
			// The rollout ends and is archived; the application's state
			// is not told yet.
			if _, err := repo.Update(ctx, plan.ID("p1", "app"), func(r *rollout.Rollout) error { r.Phase = tc.ended; return nil }); err != nil {
				t.Fatal(err)
			}
			evs, err := fn.Handle(ctx, verified(t, "p2", image, "0.9.0"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want("p2"), summarize(t, evs)); diff != "" {
				t.Errorf("0.9.0 pushed (-want +got):\n%s", diff)
			}
		})
	}
}

// A quarantined version aborts the rollouts in flight that carry it and is
// refused from then on.
func TestPlanQuarantine(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	fn := plan.New(newConfig(application("app", image, config.TrackMinorVersion)), repo, nil)
	if _, err := fn.Handle(ctx, verified(t, "v1", image, "1.2.3")); err != nil {
		t.Fatal(err)
	}
	q, err := events.New("q1", "/flotilla/api", events.TypeVersionQuarantineRequested,
		events.QuarantineRequested{Application: "app", Tag: "1.2.3", User: "ann", Reason: "CVE-1"})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := fn.Handle(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"rollout.failed " + plan.ID("v1", "app")}, kinds(evs)); diff != "" {
		t.Errorf("quarantine (-want +got):\n%s", diff)
	}
	ro, _ := repo.Get(ctx, plan.ID("v1", "app"))
	if ro.Phase != rollout.Failed || ro.Reason != "1.2.3 was quarantined by ann: CVE-1" {
		t.Errorf("the rollout is %s: %q", ro.Phase, ro.Reason)
	}
	if _, err := repo.Update(ctx, ro.ID, func(r *rollout.Rollout) error { r.Phase = rollout.RolledBack; return nil }); err != nil {
		t.Fatal(err)
	}
	evs, err = fn.Handle(ctx, verified(t, "v2", image, "1.2.3"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]functiontest.Emitted{skipped("v2", "app", "1.2.3", "1.2.3 is quarantined (by ann: CVE-1)")}, summarize(t, evs)); diff != "" {
		t.Errorf("a push of the quarantined version (-want +got):\n%s", diff)
	}
}

// Rolling back a succeeded rollout is a rollout of its own, failed from the
// start (the rollback function reverts its clusters); when it ends rolled
// back, the version before is the deployed one again.
func TestPlanRollbackOfASucceededRollout(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	fn := plan.New(newConfig(application("app", image, config.TrackMinorVersion)), repo, nil)
	if err := repo.UpdateApp(ctx, "app", func(s *rollout.AppState) error {
		s.DeployedTag, s.DeployedDigest = "1.2.2", "sha256:1.2.2"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := fn.Handle(ctx, verified(t, "v1", image, "1.2.3")); err != nil {
		t.Fatal(err)
	}
	id := plan.ID("v1", "app")
	if _, err := repo.Update(ctx, id, func(r *rollout.Rollout) error {
		r.Phase = rollout.Succeeded
		for w := range r.Waves {
			for c := range r.Waves[w].Clusters {
				r.Waves[w].Clusters[c].Phase, r.Waves[w].Clusters[c].PreviousImage = rollout.ClusterSucceeded, image+"@sha256:1.2.2"
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := repo.UpdateApp(ctx, "app", func(s *rollout.AppState) error {
		s.DeployedTag, s.DeployedDigest = "1.2.3", "sha256:1.2.3"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	req, err := events.New("rb", "/flotilla/api", events.TypeRolloutRollbackRequested, events.Control{RolloutID: id, User: "ann", Reason: "errors"})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := fn.Handle(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"rollout.failed rollback-" + id}, kinds(evs)); diff != "" {
		t.Errorf("rollback requested (-want +got):\n%s", diff)
	}
	if evs, err := fn.Handle(ctx, req); err != nil || len(evs) != 0 {
		t.Errorf("the request again = %v, %v; want nothing", kinds(evs), err)
	}
	rb, err := repo.Get(ctx, "rollback-"+id)
	if err != nil {
		t.Fatal(err)
	}
	if rb.Phase != rollout.Failed || rb.RollbackOf != id || rb.Wave != 1 || rb.Reason != "rollback of "+id+" (1.2.3) to 1.2.2, requested by ann: errors" {
		t.Errorf("the rollback: %s %q (of %q, wave %d)", rb.Phase, rb.Reason, rb.RollbackOf, rb.Wave)
	}
	if _, err := repo.Update(ctx, rb.ID, func(r *rollout.Rollout) error { r.Phase = rollout.RolledBack; return nil }); err != nil {
		t.Fatal(err)
	}
	ended, err := events.New("rbd", events.Source, events.TypeRolloutRolledBack, events.RolloutResult{RolloutID: rb.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fn.Handle(ctx, ended); err != nil {
		t.Fatal(err)
	}
	if st, _ := repo.App(ctx, "app"); st.DeployedTag != "1.2.2" || st.DeployedDigest != "sha256:1.2.2" {
		t.Errorf("deployed after the rollback: %s %s, want 1.2.2", st.DeployedTag, st.DeployedDigest)
	}
}

// Track Newest follows when images were built, not when their pushes
// arrived: an image built before the deployed one is skipped.
func TestPlanNewestByBuildTime(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	fn := plan.New(newConfig(application("app", image, config.TrackNewest)), repo, nil)
	t0 := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	if err := repo.UpdateApp(ctx, "app", func(s *rollout.AppState) error {
		s.DeployedTag, s.DeployedDigest, s.DeployedCreated = "b", "sha256:b", t0
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	push := func(id, tag string, built time.Time) []functiontest.Emitted {
		t.Helper()
		e, err := events.New(id, events.Source, events.TypeImageVerified, events.ImageVerified{Image: image, Tag: tag, Digest: "sha256:" + tag, Created: built})
		if err != nil {
			t.Fatal(err)
		}
		evs, err := fn.Handle(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		return summarize(t, evs)
	}
	got := push("p1", "a", t0.Add(-time.Hour))
	want := "a was built at 2026-11-20T07:00:00Z, before the deployed b (2026-11-20T08:00:00Z); track Newest follows when images were built"
	if diff := cmp.Diff([]functiontest.Emitted{skipped("p1", "app", "a", want)}, got); diff != "" {
		t.Errorf("an older build pushed later (-want +got):\n%s", diff)
	}
	if got := push("p2", "c", t0.Add(time.Hour)); len(got) != 2 {
		t.Errorf("a newer build = %v, want a rollout", got)
	}
}

// An unsigned build of an application that verifies signatures goes only
// to the waves before the first one that requires a signature; when that
// is its first wave, it is skipped, saying why.
func TestPlanUnsigned(t *testing.T) {
	unsigned := func(t *testing.T, id string) cloudevents.Event {
		t.Helper()
		e, err := events.New(id, events.Source, events.TypeImageVerified, events.ImageVerified{
			Image: image, Tag: "1.2.3", Digest: "sha256:1.2.3", Unsigned: map[string]string{"app": "it is not signed"}})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for _, tt := range []struct {
		name       string
		canaryTake bool
		wantWaves  []string
		wantSkip   string
	}{
		{name: "the canary wave takes unsigned builds", canaryTake: true, wantWaves: []string{"canary"}},
		{name: "every wave requires a signature", wantSkip: "no signature is trusted (it is not signed) and wave canary requires one"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := newConfig(application("app", image, config.TrackMinorVersion))
			cfg.Applications[0].Verify = &config.Verify{Signatures: []config.SignatureAuthority{{Name: "k"}}}
			if tt.canaryTake {
				cfg.Fleet.Waves[0].RequireSignature = ptr.To(false)
			}
			repo := functiontest.NewRepo(t)
			evs, err := plan.New(cfg, repo, nil).Handle(t.Context(), unsigned(t, "v1"))
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantSkip != "" {
				if diff := cmp.Diff([]functiontest.Emitted{skipped("v1", "app", "1.2.3", tt.wantSkip)}, summarize(t, evs)); diff != "" {
					t.Errorf("emitted (-want +got):\n%s", diff)
				}
				return
			}
			ro, err := repo.Get(t.Context(), plan.ID("v1", "app"))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, w := range ro.Waves {
				names = append(names, w.Name)
			}
			if diff := cmp.Diff(tt.wantWaves, names); diff != "" || ro.Unsigned != "it is not signed" || !strings.Contains(ro.Reason, "before rest") || ro.StopsBefore != "rest" {
				t.Errorf("waves %v (-want +got %s), unsigned %q, reason %q, stops before %q", names, diff, ro.Unsigned, ro.Reason, ro.StopsBefore)
			}
		})
	}
}

// The same version, signed after its unsigned rollout started, rolls out
// again through every wave; pushed again unsigned it does not.
func TestPlanSignedLater(t *testing.T) {
	verified := func(t *testing.T, id string, signed bool) cloudevents.Event {
		t.Helper()
		v := events.ImageVerified{Image: image, Tag: "1.2.3", Digest: "sha256:1.2.3"}
		if signed {
			v.SignedBy = map[string]string{"app": "key k"}
		} else {
			v.Unsigned = map[string]string{"app": "it is not signed"}
		}
		e, err := events.New(id, events.Source, events.TypeImageVerified, v)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	cfg := newConfig(application("app", image, config.TrackMinorVersion))
	cfg.Applications[0].Verify = &config.Verify{Signatures: []config.SignatureAuthority{{Name: "k"}}}
	cfg.Fleet.Waves[0].RequireSignature = ptr.To(false)
	repo := functiontest.NewRepo(t)
	f := plan.New(cfg, repo, nil)
	if _, err := f.Handle(t.Context(), verified(t, "v1", false)); err != nil {
		t.Fatal(err)
	}
	evs, err := f.Handle(t.Context(), verified(t, "v2", false))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]functiontest.Emitted{skipped("v2", "app", "1.2.3", "1.2.3 is being rolled out (rollout "+plan.ID("v1", "app")+")")}, summarize(t, evs)); diff != "" {
		t.Errorf("pushed again unsigned (-want +got):\n%s", diff)
	}
	if _, err := f.Handle(t.Context(), verified(t, "v3", true)); err != nil {
		t.Fatal(err)
	}
	ro, err := repo.Get(t.Context(), plan.ID("v3", "app"))
	if err != nil {
		t.Fatalf("signed later: no rollout: %v", err)
	}
	if len(ro.Waves) != 2 || ro.SignedBy != "key k" || ro.StopsBefore != "" {
		t.Errorf("signed later: %d waves, signed by %q, stops before %q; want every wave", len(ro.Waves), ro.SignedBy, ro.StopsBefore)
	}
	first, err := repo.Get(t.Context(), plan.ID("v1", "app"))
	if err != nil || first.Phase != rollout.Superseded {
		t.Errorf("the unsigned rollout: %v, %v; want Superseded", first.Phase, err)
	}
}

// A rollout's start requests its first wave's runs in the same transaction
// (no hop through launch), derived from wave.started as launch would, and
// held by what holds a start: the stopped line here.
func TestPlanStartsTheFirstWave(t *testing.T) {
	ctx := t.Context()
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	repo := functiontest.NewRepo(t)
	fn := plan.New(newConfig(application("app", image, config.TrackMinorVersion)), repo, func() time.Time { return at })
	evs, err := fn.Handle(ctx, verified(t, "v1", image, "1.2.3"))
	if err != nil {
		t.Fatal(err)
	}
	id := plan.ID("v1", "app")
	ws := "v1/" + events.TypeWaveStarted + "/app"
	if diff := cmp.Diff([]string{"rollout.started " + id, "wave.started " + id, "pipelinerun.requested " + id, "cluster.deadline " + id}, kinds(evs)); diff != "" {
		t.Fatalf("emitted (-want +got):\n%s", diff)
	}
	if evs[1].ID() != ws || evs[2].ID() != ws+"/"+events.TypePipelineRunRequested+"/c1/apply/1" {
		t.Errorf("ids %s, %s; want the run derived from wave.started", evs[1].ID(), evs[2].ID())
	}
	req, err := events.Decode[events.PipelineRunRequested](evs[2])
	if err != nil {
		t.Fatal(err)
	}
	if req.Cluster != "c1" || req.Purpose != events.PurposeApply || req.Step != 1 || req.Image != image+"@sha256:1.2.3" {
		t.Errorf("run requested %+v; want c1's apply of the rollout's image by digest", req)
	}
	ro, err := repo.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if c := ro.Waves[0].Clusters[0]; c.Phase != rollout.ClusterApplying || c.Step != 1 || ro.Waves[1].Clusters[0].Phase != rollout.ClusterPending {
		t.Errorf("stored clusters %+v; want c1 applying, wave 2 pending", ro.Waves)
	}
	// Redelivered: nothing new is stored, the same events come again.
	again, err := fn.Handle(ctx, verified(t, "v1", image, "1.2.3"))
	if err != nil || len(again) != 2 || again[1].ID() != ws {
		t.Errorf("redelivered: %v, %v; want rollout.started and wave.started again, no new run", kinds(again), err)
	}

	// The stopped line holds the start.
	stopped := functiontest.NewRepo(t)
	if err := stopped.UpdateFleet(ctx, func(f *rollout.FleetState) error {
		*f = rollout.FleetState{Stopped: true, By: "ops", Reason: "incident"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	evs, err = plan.New(newConfig(application("app", image, config.TrackMinorVersion)), stopped, nil).Handle(ctx, verified(t, "v1", image, "1.2.3"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"rollout.started " + id, "wave.started " + id}, kinds(evs)); diff != "" {
		t.Errorf("with the line stopped (-want +got):\n%s", diff)
	}
	if ro, _ := stopped.Get(ctx, id); ro.Waiting != "the fleet is stopped (by ops: incident)" {
		t.Errorf("waiting %q", ro.Waiting)
	}
}
