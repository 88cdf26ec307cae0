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
