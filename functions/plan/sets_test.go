package plan_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/functions/internal/functiontest"
	"github.com/flotilla-cd/flotilla/functions/plan"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

const (
	apiImage      = "registry.test/shop/api"
	frontendImage = "registry.test/shop/frontend"
)

// imageSetConfig is a release set of two image members (the api applied
// first), as the configuration in force holds it.
func imageSetConfig() *config.Config {
	api := application("shop-api", apiImage, config.TrackMinorVersion)
	frontend := application("shop-frontend", frontendImage, config.TrackMinorVersion)
	api.MemberOf, frontend.MemberOf = "shop", "shop"
	set := config.Application{Name: "shop", Namespace: "default", OnNewVersion: config.OnNewVersionSupersede,
		Workload: api.Workload, Set: &config.SetSpec{Members: []config.SetMember{{Name: "shop-api"}, {Name: "shop-frontend"}}}}
	return newConfig(api, frontend, set)
}

func memberVersion(app, img, tag string) rollout.MemberVersion {
	return rollout.MemberVersion{Application: app, Image: img, Tag: tag, Digest: "sha256:" + tag}
}

// A member's push moves its release set: one rollout of the set, none of
// the member, the others at their deployed versions; a newer push of the
// other member supersedes it and takes its version along; a rollback's
// end makes the previous tuple the deployed one again.
func TestPlanImageSet(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	fn := plan.New(imageSetConfig(), repo, nil)
	deployed := rollout.SetVersion{memberVersion("shop-api", apiImage, "1.0.0"), memberVersion("shop-frontend", frontendImage, "1.0.0")}
	if err := repo.UpdateApp(ctx, "shop", func(s *rollout.AppState) error {
		s.DeployedTag, s.DeployedDigest, s.DeployedVersions = deployed.Tag(), deployed.Digest(), deployed
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	evs, err := fn.Handle(ctx, verified(t, "p1", apiImage, "1.1.0"))
	if err != nil {
		t.Fatal(err)
	}
	first := plan.ID("p1", "shop")
	if diff := cmp.Diff([]string{"rollout.started " + first, "wave.started " + first}, kinds(decisions(evs))); diff != "" {
		t.Errorf("the api's push (-want +got):\n%s", diff)
	}
	ro, err := repo.Get(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	want := rollout.SetVersion{memberVersion("shop-api", apiImage, "1.1.0"), memberVersion("shop-frontend", frontendImage, "1.0.0")}
	if diff := cmp.Diff([]any{"shop", want.Tag(), want.Digest(), want, deployed}, []any{ro.Application, ro.Tag, ro.Digest, ro.Versions, ro.PreviousVersions}); diff != "" {
		t.Errorf("the set's rollout (-want +got):\n%s", diff)
	}
	if _, err := repo.Get(ctx, plan.ID("p1", "shop-api")); err == nil {
		t.Error("the member has a rollout of its own")
	}
	if st, _ := repo.App(ctx, "shop"); st.LatestTag != want.Tag() || st.LatestRollout != first {
		t.Errorf("the set's latest: %q %q, want %q %q", st.LatestTag, st.LatestRollout, want.Tag(), first)
	}

	evs, err = fn.Handle(ctx, verified(t, "p2", apiImage, "1.0.5"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"rollout.skipped "}, kinds(evs)); diff != "" {
		t.Errorf("an older api (-want +got):\n%s", diff)
	}

	evs, err = fn.Handle(ctx, verified(t, "p3", frontendImage, "1.2.0"))
	if err != nil {
		t.Fatal(err)
	}
	second := plan.ID("p3", "shop")
	if diff := cmp.Diff([]string{"rollout.superseded " + first, "rollout.started " + second, "wave.started " + second}, kinds(decisions(evs))); diff != "" {
		t.Errorf("the frontend's push (-want +got):\n%s", diff)
	}
	ro, err = repo.Get(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	want = rollout.SetVersion{memberVersion("shop-api", apiImage, "1.1.0"), memberVersion("shop-frontend", frontendImage, "1.2.0")}
	if diff := cmp.Diff(want, ro.Versions); diff != "" {
		t.Errorf("the superseding rollout takes the api along (-want +got):\n%s", diff)
	}
	// Each member's newest version a rollout was started for by its push
	// (what the poll of the member compares its tags with).
	if st, _ := repo.App(ctx, "shop"); !cmp.Equal(want, st.LatestVersions) {
		t.Errorf("the set's latest versions %v, want %v", st.LatestVersions, want)
	}

	// It succeeds, then the user rolls it back: the deployed tuple is the
	// one before it again.
	if _, err := repo.Update(ctx, second, func(r *rollout.Rollout) error { r.Phase = rollout.Succeeded; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := repo.UpdateApp(ctx, "shop", func(s *rollout.AppState) error { s.Deploy(ro); return nil }); err != nil {
		t.Fatal(err)
	}
	req, err := events.New("rb", "/flotilla/api", events.TypeRolloutRollbackRequested, events.Control{RolloutID: second, User: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fn.Handle(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Update(ctx, "rollback-"+second, func(r *rollout.Rollout) error { r.Phase = rollout.RolledBack; return nil }); err != nil {
		t.Fatal(err)
	}
	ended, err := events.New("rbd", events.Source, events.TypeRolloutRolledBack, events.RolloutResult{RolloutID: "rollback-" + second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fn.Handle(ctx, ended); err != nil {
		t.Fatal(err)
	}
	st, err := repo.App(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{deployed.Tag(), deployed.Digest(), deployed}, []any{st.DeployedTag, st.DeployedDigest, st.DeployedVersions}); diff != "" {
		t.Errorf("deployed after the rollback (-want +got):\n%s", diff)
	}
}

// A catch-up of a release set of image members (the reconciler found a
// cluster new to its waves) is a rollout of the set carrying its deployed
// tuple, whose run applies every member at its entry there.
func TestPlanImageSetCatchUp(t *testing.T) {
	repo := functiontest.NewRepo(t)
	deployed := rollout.SetVersion{memberVersion("shop-api", apiImage, "1.1.0"), memberVersion("shop-frontend", frontendImage, "1.0.0")}
	if err := repo.UpdateApp(t.Context(), "shop", func(s *rollout.AppState) error {
		s.DeployedTag, s.DeployedDigest, s.DeployedVersions, s.DeployedClusters = deployed.Tag(), deployed.Digest(), deployed, []string{"c1", "c2"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e, err := events.New("reconcile/s", "/flotilla/reconcile", events.TypeReconcileRequested, events.ReconcileRequested{
		Application: "shop", Kind: rollout.KindCatchUp, Image: "shop", Tag: deployed.Tag(), Digest: deployed.Digest(), Clusters: []string{"c3"}})
	if err != nil {
		t.Fatal(err)
	}
	e.SetSubject(apiImage + "@" + deployed.Digest())
	evs, err := plan.New(imageSetConfig(), repo, nil).Handle(t.Context(), e)
	if err != nil {
		t.Fatal(err)
	}
	id := plan.ID("reconcile/s", "shop")
	ro, err := repo.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("no catch-up rollout: %v (emitted %v)", err, kinds(evs))
	}
	if diff := cmp.Diff([]any{rollout.KindCatchUp, deployed, deployed}, []any{ro.Kind, ro.Versions, ro.PreviousVersions}); diff != "" {
		t.Errorf("the catch-up rollout (-want +got):\n%s", diff)
	}
	var members []string
	for _, ev := range evs {
		if ev.Type() != events.TypePipelineRunRequested {
			continue
		}
		run, err := events.Decode[events.PipelineRunRequested](ev)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range run.Members {
			members = append(members, run.Cluster+" "+m.Application+" "+m.Tag+" "+m.Digest)
		}
	}
	want := []string{"c3 shop-api 1.1.0 sha256:1.1.0", "c3 shop-frontend 1.0.0 sha256:1.0.0"}
	if diff := cmp.Diff(want, members); diff != "" {
		t.Errorf("the catch-up's run carries (-want +got):\n%s", diff)
	}
}

// A release set of git and image members through the function: the git
// push (git.verified naming the set) starts the set's rollout of the
// tuple, the git members at the commit; the frontend's image push is the
// set's too, the commit kept; no member has a rollout of its own.
// Catches: the frontend's push dropped (plan looked for a set of image
// members only), a git push rolled out as a git application's commit (no
// tuple).
func TestPlanMixedSet(t *testing.T) {
	ctx := t.Context()
	git := &config.Source{Git: &config.GitSource{URL: "https://git.test/deploy.git", Branch: "main", Paths: []string{"api"}}}
	api := config.Application{Name: "shop-api", Namespace: "default", Source: git, Workload: config.Workload{Kind: "Deployment", Name: "shop-api"}, MemberOf: "shop"}
	fe := application("shop-frontend", frontendImage, config.TrackMinorVersion)
	fe.MemberOf = "shop"
	set := config.Application{Name: "shop", Namespace: "default", Source: git, OnNewVersion: config.OnNewVersionSupersede, Workload: api.Workload,
		Set: &config.SetSpec{Members: []config.SetMember{{Name: "shop-api"}, {Name: "shop-frontend", Image: frontendImage}}}}
	repo := functiontest.NewRepo(t)
	fn := plan.New(newConfig(api, fe, set), repo, nil)
	const commit = "0123456789abcdef0123456789abcdef01234567"
	e, err := events.New("g1", events.Source, events.TypeGitVerified, events.GitVerified{RepoURL: "https://git.test/deploy.git", Ref: "refs/heads/main",
		Branch: "main", Commit: commit, Abbrev: commit[:12], Applications: []string{"shop"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fn.Handle(ctx, e); err != nil {
		t.Fatal(err)
	}
	ro, err := repo.Get(ctx, plan.ID("g1", "shop"))
	if err != nil {
		t.Fatal(err)
	}
	entry := rollout.MemberVersion{Application: "shop-api", Image: "https://git.test/deploy.git", Tag: "main@" + commit[:12], Digest: commit}
	if diff := cmp.Diff(rollout.SetVersion{entry}, ro.Versions); diff != "" {
		t.Errorf("the git push's tuple (-want +got):\n%s", diff)
	}
	// Deployed, then the frontend's push moves the frontend alone.
	if err := repo.UpdateApp(ctx, "shop", func(s *rollout.AppState) error {
		s.Deploy(ro)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := fn.Handle(ctx, verified(t, "p1", frontendImage, "2.0.0")); err != nil {
		t.Fatal(err)
	}
	ro, err = repo.Get(ctx, plan.ID("p1", "shop"))
	if err != nil {
		t.Fatal(err)
	}
	want := rollout.SetVersion{entry, memberVersion("shop-frontend", frontendImage, "2.0.0")}
	if diff := cmp.Diff(want, ro.Versions); diff != "" {
		t.Errorf("the frontend's push's tuple (-want +got):\n%s", diff)
	}
	if _, err := repo.Get(ctx, plan.ID("p1", "shop-frontend")); err == nil {
		t.Error("the frontend has a rollout of its own")
	}
}
