package poll_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/functions/plan"
	"github.com/flotilla-cd/flotilla/functions/verify"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/poll"
	"github.com/flotilla-cd/flotilla/pkg/registry"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// imageSet is release set shop of two image members (the api first), as
// the configuration in force holds it, over one wave of c1.
func imageSet(cfg *config.Config, api, frontend string) {
	member := func(name, img string) config.Application {
		return config.Application{Name: name, Image: img, Track: config.TrackMinorVersion, Namespace: "shop", MemberOf: "shop",
			Workload: config.Workload{Kind: config.KindDeployment, Name: name}}
	}
	a, f := member("shop-api", api), member("shop-frontend", frontend)
	set := config.Application{Name: "shop", Namespace: "shop", Workload: a.Workload, OnNewVersion: config.OnNewVersionSupersede,
		Set: &config.SetSpec{Members: []config.SetMember{{Name: "shop-api"}, {Name: "shop-frontend"}}}}
	cfg.Applications = []config.Application{a, f, set}
	cfg.Fleet.Clusters = []config.Cluster{{Name: "c1"}}
	cfg.Fleet.Waves = []config.Wave{{Name: "all", Clusters: []string{"c1"}}}
}

// A release set of image members is polled as one: a member's tag that no
// webhook brought is fed in as that member's push (its own version
// policy, against its entry in the set's deployed version), and verify
// and plan make it the set's rollout, the other member at its deployed
// version; once started, the member's tag is not fed in again; the other
// member's tag found next supersedes it, taking the api along.
func TestPollImageSet(t *testing.T) {
	host := startRegistry(t, nil)
	api, frontend := host+"/shop/api", host+"/shop/frontend"
	a100, f100 := push(t, api, "1.0.0"), push(t, frontend, "1.0.0")
	a110 := push(t, api, "1.1.0")
	push(t, api, "2.0.0") // another major: the api's policy (track minor) does not take it
	f := newFixture(t)
	imageSet(f.cfg, api, frontend)
	deployed := rollout.SetVersion{
		{Application: "shop-api", Image: api, Tag: "1.0.0", Digest: a100},
		{Application: "shop-frontend", Image: frontend, Tag: "1.0.0", Digest: f100},
	}
	if err := f.repo.UpdateApp(t.Context(), "shop", func(st *rollout.AppState) error {
		st.DeployedTag, st.DeployedDigest, st.DeployedVersions = deployed.Tag(), deployed.Digest(), deployed
		st.LatestTag, st.LatestVersions = deployed.Tag(), deployed
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	remote := registry.NewRemote(anonymous)
	p := f.poller(t, remote, poll.Options{})
	res, err := p.Poll(t.Context(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	opts := cmpopts.IgnoreFields(poll.Result{}, "At", "EventID")
	want := poll.Result{Application: "shop", Image: api + ", " + frontend, Tags: 4, Newest: "shop-api:1.1.0", Digest: a110, Started: true,
		Reason: "shop-frontend: none of the 1 tags is newer than 1.0.0 that the application takes",
		Members: []poll.Result{
			{Application: "shop-api", Image: api, Tags: 3, Newest: "1.1.0", Digest: a110, Started: true},
			{Application: "shop-frontend", Image: frontend, Tags: 1, Reason: "none of the 1 tags is newer than 1.0.0 that the application takes"},
		}}
	if diff := cmp.Diff(want, res, opts); diff != "" {
		t.Errorf("the set's poll (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{api + ":1.1.0@" + a110 + " poll"}, f.pushes(t)); diff != "" {
		t.Errorf("journaled pushes (-want +got):\n%s", diff)
	}

	// verify and plan take the member's push as the set's.
	first := planPush(t, f, remote, 0)
	ro, err := f.repo.Get(t.Context(), first)
	if err != nil {
		t.Fatalf("no rollout of the set for the polled push: %v", err)
	}
	tuple := deployed.With([]string{"shop-api", "shop-frontend"}, rollout.MemberVersion{Application: "shop-api", Image: api, Tag: "1.1.0", Digest: a110})
	if diff := cmp.Diff([]any{"shop", tuple, deployed, rollout.SourcePoll}, []any{ro.Application, ro.Versions, ro.PreviousVersions, ro.Source}); diff != "" {
		t.Errorf("the set's rollout of the polled api (-want +got):\n%s", diff)
	}

	// The api's tag is the newest a rollout was started for now.
	if res, err = p.Poll(t.Context(), "shop"); err != nil || res.Started || res.Members[0].Reason != "none of the 3 tags is newer than 1.1.0 that the application takes" {
		t.Errorf("Poll after the set's rollout started = %+v, %v; want nothing fed in, the api's 1.1.0 the newest started", res, err)
	}

	// The frontend's tag no webhook brought: the set's next rollout,
	// superseding the first and taking the api along.
	f101 := push(t, frontend, "1.0.1")
	if res, err = p.Poll(t.Context(), "shop"); err != nil || !res.Started || res.Newest != "shop-frontend:1.0.1" {
		t.Fatalf("Poll after the frontend's push = %+v, %v; want shop-frontend:1.0.1 fed in", res, err)
	}
	second := planPush(t, f, remote, 1)
	ro, err = f.repo.Get(t.Context(), second)
	if err != nil {
		t.Fatal(err)
	}
	tuple = tuple.With([]string{"shop-api", "shop-frontend"}, rollout.MemberVersion{Application: "shop-frontend", Image: frontend, Tag: "1.0.1", Digest: f101})
	if diff := cmp.Diff(tuple, ro.Versions); diff != "" {
		t.Errorf("the frontend's rollout takes the api along (-want +got):\n%s", diff)
	}
	if old, _ := f.repo.Get(t.Context(), first); old.Phase != rollout.Superseded {
		t.Errorf("the api's rollout is %s, want superseded", old.Phase)
	}
	if _, ok := p.Last()["shop-api"]; ok {
		t.Error("a member was polled on its own: its set polls it")
	}
}

// planPush runs verify then plan over the journal's push n, as the
// engine does, and returns the id of the rollout plan started.
func planPush(t *testing.T, f *fixture, remote *registry.Remote, n int) string {
	t.Helper()
	recs, err := f.store.Read(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var pushes []cloudevents.Event
	for _, r := range recs {
		if r.Event.Type() == events.TypeImagePushed {
			pushes = append(pushes, r.Event)
		}
	}
	if len(pushes) <= n {
		t.Fatalf("%d pushes journaled, want push %d", len(pushes), n)
	}
	tracked := func(img string) bool {
		return strings.HasSuffix(img, "/shop/api") || strings.HasSuffix(img, "/shop/frontend")
	}
	out, err := verify.New(remote, tracked).WithApplications(f.repo, f.cfg).Handle(t.Context(), pushes[n])
	if err != nil {
		t.Fatal(err)
	}
	fn := plan.New(f.cfg, f.repo, nil)
	for _, e := range out {
		if e.Type() != events.TypeImageVerified {
			continue
		}
		evs, err := fn.Handle(t.Context(), e)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Type() == events.TypeRolloutStarted {
				s, err := events.Decode[events.RolloutStarted](ev)
				if err != nil {
					t.Fatal(err)
				}
				return s.RolloutID
			}
		}
		t.Fatalf("plan of the polled push started no rollout: %v", evs)
	}
	t.Fatalf("verify of the polled push: %v, want image.verified", out)
	return ""
}

// Run polls a release set of image members at the set's own interval
// (releaseSets[].poll, folded into the set's application), here with the
// fleet's poll off; its members are not polled on their own.
func TestRunPollsAnImageSet(t *testing.T) {
	host := startRegistry(t, nil)
	api, frontend := host+"/shop/api", host+"/shop/frontend"
	a100 := push(t, api, "1.0.0")
	f := newFixture(t)
	imageSet(f.cfg, api, frontend)
	f.cfg.Fleet.Poll = config.Poll{Disabled: true}
	f.cfg.Applications[2].Poll = &config.Poll{Interval: &config.Duration{Duration: time.Second}}
	p := f.poller(t, registry.NewRemote(anonymous), poll.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(f.pushes(t)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the set was not polled within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if diff := cmp.Diff([]string{api + ":1.0.0@" + a100 + " poll"}, f.pushes(t)); diff != "" {
		t.Errorf("pushes (-want +got):\n%s", diff)
	}
	last := p.Last()
	if _, ok := last["shop"]; !ok || len(last) != 1 {
		t.Errorf("polled %v, want the set only", slices.Collect(maps.Keys(last)))
	}
}

// A member's deployed tag pushed again with a new digest (rebuilt, its
// webhook lost) is fed in as its push, once: the set's rollout of it is
// then the latest for the member's tag, read as the member's.
func TestPollImageSetMovedTag(t *testing.T) {
	host := startRegistry(t, nil)
	api, frontend := host+"/shop/api", host+"/shop/frontend"
	a100, rebuilt := push(t, api, "1.0.0"), push(t, frontend, "1.0.0")
	f := newFixture(t)
	imageSet(f.cfg, api, frontend)
	deployed := rollout.SetVersion{
		{Application: "shop-api", Image: api, Tag: "1.0.0", Digest: a100},
		{Application: "shop-frontend", Image: frontend, Tag: "1.0.0", Digest: "sha256:before"},
	}
	if err := f.repo.UpdateApp(t.Context(), "shop", func(st *rollout.AppState) error {
		st.DeployedTag, st.DeployedDigest, st.DeployedVersions = deployed.Tag(), deployed.Digest(), deployed
		st.LatestTag, st.LatestVersions = deployed.Tag(), deployed
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	remote := registry.NewRemote(anonymous)
	p := f.poller(t, remote, poll.Options{})
	res, err := p.Poll(t.Context(), "shop")
	if err != nil || !res.Started || res.Newest != "shop-frontend:1.0.0" || res.Digest != rebuilt {
		t.Fatalf("Poll = %+v, %v; want the frontend's 1.0.0 at %s fed in", res, err, rebuilt)
	}
	id := planPush(t, f, remote, 0)
	ro, err := f.repo.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if mv, _ := ro.Versions.Of("shop-frontend"); mv.Digest != rebuilt {
		t.Errorf("the set's rollout has the frontend at %s, want the rebuilt %s", mv.Digest, rebuilt)
	}
	res, err = p.Poll(t.Context(), "shop")
	want := "1.0.0's new digest " + rebuilt + " was rolled out before (rollout " + id + ", Progressing)"
	if err != nil || res.Started || res.Members[1].Reason != want {
		t.Errorf("Poll again = %+v, %v; want the frontend's reason %q", res, err, want)
	}
}
