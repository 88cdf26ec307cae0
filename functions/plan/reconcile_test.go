package plan_test

import (
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/functions/internal/functiontest"
	"github.com/flotilla-cd/flotilla/functions/plan"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// A catch-up's request starts a rollout of the validated digest of kind
// catch-up, to its clusters only, with the runs of those clusters; asked
// again (a redelivery, a check repeated after a restart), nothing more;
// not while a rollout of the application is in flight, nor once another
// digest is validated.
func TestPlanReconcile(t *testing.T) {
	cfg := newConfig(application("app", image, config.TrackMinorVersion))
	request := func(t *testing.T, id, digest string, clusters ...string) cloudevents.Event {
		t.Helper()
		e, err := events.New(id, "/flotilla/reconcile", events.TypeReconcileRequested, events.ReconcileRequested{
			Application: "app", Kind: rollout.KindCatchUp, Image: image, Tag: "1.0.0", Digest: digest, Clusters: clusters})
		if err != nil {
			t.Fatal(err)
		}
		e.SetSubject(image + "@" + digest)
		return e
	}
	t.Run("a catch-up to its clusters", func(t *testing.T) {
		repo := functiontest.NewRepo(t)
		if err := repo.UpdateApp(t.Context(), "app", func(st *rollout.AppState) error {
			st.DeployedTag, st.DeployedDigest, st.DeployedClusters = "1.0.0", "sha256:d100", []string{"c1", "c2"}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		f := plan.New(cfg, repo, nil)
		req := request(t, "reconcile/1", "sha256:d100", "c3")
		evs, err := f.Handle(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		id := plan.ID("reconcile/1", "app")
		if diff := cmp.Diff([]string{"rollout.started " + id, "wave.started " + id, "pipelinerun.requested " + id, "cluster.deadline " + id}, kinds(evs)); diff != "" {
			t.Errorf("emitted (-want +got):\n%s", diff)
		}
		ro, err := repo.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if ro.Kind != rollout.KindCatchUp || ro.Digest != "sha256:d100" || ro.Tag != "1.0.0" || len(ro.Waves) != 1 || ro.Waves[0].Name != "rest" ||
			len(ro.Waves[0].Clusters) != 1 || ro.Waves[0].Clusters[0].Name != "c3" {
			t.Errorf("rollout %+v, want kind catch-up of 1.0.0 to c3 of wave rest", ro)
		}
		run, err := events.Decode[events.PipelineRunRequested](evs[2])
		if err != nil {
			t.Fatal(err)
		}
		if run.Restart != id || run.Image != image+"@sha256:d100" {
			t.Errorf("the run applies %s with restart %q, want %s@sha256:d100 with restart %q (a new revision of the same image)", run.Image, run.Restart, image, id)
		}
		st, err := repo.App(t.Context(), "app")
		if err != nil {
			t.Fatal(err)
		}
		if st.LatestTag != "" || st.LatestRollout != "" {
			t.Errorf("a catch-up recorded itself as the latest version: %+v", st)
		}
		// Redelivered: events the first emitted (the journal drops them),
		// no second rollout, no second run.
		again, err := f.Handle(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		first := map[string]bool{}
		for _, e := range evs {
			first[e.ID()] = true
		}
		for _, e := range again {
			if !first[e.ID()] {
				t.Errorf("the redelivery emitted %s %s, which the first did not", e.Type(), e.ID())
			}
		}
		// Another catch-up while this one is in flight: nothing.
		other, err := f.Handle(t.Context(), request(t, "reconcile/2", "sha256:d100", "c2"))
		if err != nil {
			t.Fatal(err)
		}
		if len(other) != 0 {
			t.Errorf("a catch-up started beside one in flight: %v", kinds(other))
		}
	})
	t.Run("a git application's catch-up applies its validated commit", func(t *testing.T) {
		commit := strings.Repeat("a", 40)
		app := config.Application{Name: "web", Namespace: "default", Workload: config.Workload{Kind: "Deployment", Name: "web"},
			Source: &config.Source{Git: &config.GitSource{URL: "https://flotilla:s3cret@git.test/deploy.git", Branch: "main", Paths: []string{"clusters/{cluster}"}}}}
		repo := functiontest.NewRepo(t)
		if err := repo.UpdateApp(t.Context(), "web", func(st *rollout.AppState) error {
			st.DeployedTag, st.DeployedDigest, st.DeployedClusters = "main@aaaaaaaaaaaa", commit, []string{"c1", "c2"}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		e, err := events.New("reconcile/g", "/flotilla/reconcile", events.TypeReconcileRequested, events.ReconcileRequested{
			Application: "web", Kind: rollout.KindCatchUp, Image: "https://git.test/deploy.git", Tag: "main@aaaaaaaaaaaa", Digest: commit, Clusters: []string{"c3"}})
		if err != nil {
			t.Fatal(err)
		}
		e.SetSubject("https://git.test/deploy.git#" + commit)
		evs, err := plan.New(newConfig(app), repo, nil).Handle(t.Context(), e)
		if err != nil {
			t.Fatal(err)
		}
		id := plan.ID("reconcile/g", "web")
		if diff := cmp.Diff([]string{"rollout.started " + id, "wave.started " + id, "pipelinerun.requested " + id, "cluster.deadline " + id}, kinds(evs)); diff != "" {
			t.Fatalf("emitted (-want +got):\n%s", diff)
		}
		run, err := events.Decode[events.PipelineRunRequested](evs[2])
		if err != nil {
			t.Fatal(err)
		}
		type applied struct{ Cluster, Image string }
		if diff := cmp.Diff(applied{"c3", "https://git.test/deploy.git@" + commit}, applied{run.Cluster, run.Image}); diff != "" {
			t.Errorf("the run (-want +got):\n%s", diff)
		}
	})
	t.Run("not once another digest is validated", func(t *testing.T) {
		repo := functiontest.NewRepo(t)
		if err := repo.UpdateApp(t.Context(), "app", func(st *rollout.AppState) error {
			st.DeployedTag, st.DeployedDigest = "1.1.0", "sha256:d110"
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		evs, err := plan.New(cfg, repo, nil).Handle(t.Context(), request(t, "reconcile/1", "sha256:d100", "c3"))
		if err != nil || len(evs) != 0 {
			t.Errorf("Handle = %v, %v; want nothing", kinds(evs), err)
		}
	})
}
