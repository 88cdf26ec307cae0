package observe_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/functions/internal/functiontest"
	"github.com/flotilla-cd/flotilla/functions/observe"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// TestObserveImageSet judges a release set of image members by its lead's
// canary, which lists the members': each member's primary runs its own
// image, so the canaries read as mixed images; a cluster succeeds once
// every member runs its entry of the rollout's version, and a revert is
// done once every member runs its entry of the cluster's own previous
// version (not the fleet's).
func TestObserveImageSet(t *testing.T) {
	member := func(name string) config.Application {
		return config.Application{Name: name, Image: "registry.test/web/" + name, Namespace: "web", MemberOf: "web",
			Workload: config.Workload{Kind: config.KindDeployment, Name: name}}
	}
	set := member("web-api")
	set.Name, set.Image, set.MemberOf = "web", "", ""
	set.Set = &config.SetSpec{Members: []config.SetMember{{Name: "web-api"}, {Name: "web-frontend"}}}
	setCfg := &config.Config{Applications: []config.Application{set, member("web-api"), member("web-frontend")}}
	mv := func(app, tag string) rollout.MemberVersion {
		return rollout.MemberVersion{Application: app, Image: "registry.test/web/" + app, Tag: tag, Digest: "sha256:" + app + tag}
	}
	img := func(app, tag string) string { m := mv(app, tag); return m.Image + "@" + m.Digest }
	v2 := rollout.SetVersion{mv("web-api", "2"), mv("web-frontend", "1")}
	fleet := rollout.SetVersion{mv("web-api", "0"), mv("web-frontend", "1")}
	own := rollout.SetVersion{mv("web-api", "1"), mv("web-frontend", "1")} // c1 ran api 1
	for _, tt := range []struct {
		name       string
		phase      rollout.ClusterPhase
		api, front string // the primaries' (and the workloads') images
		want       string
	}{
		{"every member on the version", rollout.ClusterProgressing, img("web-api", "2"), img("web-frontend", "1"), events.TypeClusterSucceeded},
		{"the api not promoted yet", rollout.ClusterProgressing, img("web-api", "1"), img("web-frontend", "1"), ""},
		{"reverted to what the cluster ran", rollout.ClusterReverting, img("web-api", "1"), img("web-frontend", "1"), events.TypeClusterReverted},
		{"on the fleet's previous version, not the cluster's", rollout.ClusterReverting, img("web-api", "0"), img("web-frontend", "1"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			repo := functiontest.NewRepo(t)
			ro := rollout.Rollout{
				ID: rolloutID, Application: "web", Image: "web", Tag: v2.Tag(), Digest: v2.Digest(), Phase: rollout.Progressing,
				Members: []string{"web-api", "web-frontend"}, Versions: v2, PreviousVersions: fleet, PreviousDigest: fleet.Digest(),
				Waves: []rollout.Wave{{Name: "canary", Clusters: []rollout.Cluster{
					{Name: "c1", Phase: tt.phase, PreviousImage: "web@" + own.Digest(), PreviousVersions: own},
				}}},
			}
			if _, err := repo.Create(t.Context(), ro); err != nil {
				t.Fatal(err)
			}
			st := rollout.Combine([]rollout.WorkloadStatus{
				{Name: "web-api", Phase: "Succeeded", PrimaryImage: tt.api, TargetImage: tt.api},
				{Name: "web-frontend", Phase: "Succeeded", PrimaryImage: tt.front, TargetImage: tt.front},
			})
			fn := observe.New(setCfg, repo, statusOf(set.Workload, st), nil)
			e := canaryEvent(t, events.Canary{Cluster: "c1", Namespace: "web", Name: "web-frontend", Phase: "Succeeded",
				Outcome: events.CanarySucceeded, Message: "promoted", RolloutID: rolloutID})
			evs, err := fn.Handle(t.Context(), e)
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			var want []result
			if tt.want != "" {
				want = []result{{"flagger-1/" + tt.want + "/c1", tt.want, rolloutID,
					events.ClusterResult{RolloutID: rolloutID, Cluster: "c1", Reason: "web-frontend: promoted"}}}
			}
			if d := cmp.Diff(want, results(t, evs)); d != "" {
				t.Errorf("emitted (-want +got):\n%s", d)
			}
		})
	}
}
