package rollout_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// imageSetConfig is imageSet's configuration, each member's workload
// named after it, the set's lead the api.
func imageSetConfig() (*config.Config, config.Application) {
	set, api, frontend := imageSet()
	api.Workload.Name, frontend.Workload.Name, set.Workload.Name = "shop-api", "shop-frontend", "shop-api"
	return &config.Config{Applications: []config.Application{set, api, frontend}}, set
}

// setRollout is a rollout of set shop from previous (the fleet's) to
// version, its cluster c1 in phase p, having run clusterPrev before.
func setRollout(version, previous, clusterPrev rollout.SetVersion, p rollout.ClusterPhase) *rollout.Rollout {
	r := waves([]rollout.Cluster{{Name: "c1", Phase: p, PreviousVersions: clusterPrev}})
	r.Image, r.Digest, r.Tag, r.Members = "shop", version.Digest(), version.Tag(), []string{"shop-api", "shop-frontend"}
	r.Versions, r.PreviousVersions, r.PreviousDigest = version, previous, previous.Digest()
	if len(clusterPrev) > 0 {
		r.Waves[0].Clusters[0].PreviousImage = "shop@" + clusterPrev.Digest()
	}
	return r
}

// ref is the image member version m runs.
func ref(m rollout.MemberVersion) string { return m.Image + "@" + m.Digest }

// TestSetStatus reads a release set of image members' canaries as the
// version they run: the lead's canary lists the members' (each running
// its own image, so their images read mixed); the primary (and the
// target) are the rollout's version where every member with an entry runs
// it, the cluster's previous version where every member of that one runs
// it (first, while reverting), else as read.
func TestSetStatus(t *testing.T) {
	cfg, set := imageSetConfig()
	v2 := rollout.SetVersion{api("1.1.0"), frontend("1.0.0")}
	v1 := rollout.SetVersion{api("1.0.0"), frontend("1.0.0")}
	both := func(api, apiTarget, fe, feTarget string) rollout.CanaryStatus {
		return rollout.Combine([]rollout.WorkloadStatus{
			{Name: "shop-api", Phase: "Succeeded", PrimaryImage: api, TargetImage: apiTarget},
			{Name: "shop-frontend", Phase: "Succeeded", PrimaryImage: fe, TargetImage: feTarget},
		})
	}
	type images struct{ Primary, Target string }
	for _, tt := range []struct {
		name string
		r    *rollout.Rollout
		app  config.Application
		st   rollout.CanaryStatus
		want images
	}{
		{
			name: "every member on the version",
			r:    setRollout(v2, v1, v1, rollout.ClusterProgressing), app: set,
			st:   both(ref(api("1.1.0")), ref(api("1.1.0")), ref(frontend("1.0.0")), ref(frontend("1.0.0"))),
			want: images{"shop@" + v2.Digest(), "shop@" + v2.Digest()},
		},
		{
			name: "the api analysed: its primary on the cluster's previous version",
			r:    setRollout(v2, v1, v1, rollout.ClusterProgressing), app: set,
			st:   both(ref(api("1.0.0")), ref(api("1.1.0")), ref(frontend("1.0.0")), ref(frontend("1.0.0"))),
			want: images{"shop@" + v1.Digest(), "shop@" + v2.Digest()},
		},
		{
			name: "the cluster's previous version is its own, not the fleet's",
			r:    setRollout(v2, rollout.SetVersion{api("0.9.0"), frontend("1.0.0")}, v1, rollout.ClusterReverting), app: set,
			st:   both(ref(api("1.0.0")), ref(api("1.0.0")), ref(frontend("1.0.0")), ref(frontend("1.0.0"))),
			want: images{"shop@" + v1.Digest(), "shop@" + v1.Digest()},
		},
		{
			name: "a version that changes nothing, read while reverting: the previous one",
			r:    setRollout(v1, v1, v1, rollout.ClusterReverting), app: set,
			st:   both(ref(api("1.0.0")), ref(api("1.0.0")), ref(frontend("1.0.0")), ref(frontend("1.0.0"))),
			want: images{"shop@" + v1.Digest(), "shop@" + v1.Digest()},
		},
		{
			name: "the lead without an entry is not compared",
			r:    setRollout(rollout.SetVersion{frontend("2.0.0")}, nil, nil, rollout.ClusterProgressing), app: set,
			st:   both("registry.test/shop/api:0", "registry.test/shop/api:0", ref(frontend("2.0.0")), ref(frontend("2.0.0"))),
			want: images{"shop@" + rollout.SetVersion{frontend("2.0.0")}.Digest(), "shop@" + rollout.SetVersion{frontend("2.0.0")}.Digest()},
		},
		{
			name: "the lead's canary alone (no other member with an entry)",
			r:    setRollout(rollout.SetVersion{api("1.1.0")}, nil, nil, rollout.ClusterProgressing), app: set,
			st:   rollout.CanaryStatus{Phase: "Succeeded", PrimaryImage: ref(api("1.1.0")), TargetImage: ref(api("1.1.0"))},
			want: images{"shop@" + rollout.SetVersion{api("1.1.0")}.Digest(), "shop@" + rollout.SetVersion{api("1.1.0")}.Digest()},
		},
		{
			name: "a member on neither version: as read",
			r:    setRollout(v2, v1, v1, rollout.ClusterProgressing), app: set,
			st: both(ref(api("1.1.0")), ref(api("1.1.0")), "registry.test/shop/frontend:hand", "registry.test/shop/frontend:hand"),
			want: images{
				"mixed: shop-api=" + ref(api("1.1.0")) + ", shop-frontend=registry.test/shop/frontend:hand",
				"mixed: shop-api=" + ref(api("1.1.0")) + ", shop-frontend=registry.test/shop/frontend:hand",
			},
		},
		{
			name: "an application: as read",
			r:    waves([]rollout.Cluster{cl("c1", rollout.ClusterProgressing, "")}), app: config.Application{Name: "app", Image: "registry.test/team/app"},
			st:   rollout.CanaryStatus{PrimaryImage: "registry.test/team/app@sha256:abc", TargetImage: "registry.test/team/app@sha256:abc"},
			want: images{"registry.test/team/app@sha256:abc", "registry.test/team/app@sha256:abc"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := tt.r.SetStatus(cfg, tt.app, "c1", tt.st)
			if d := cmp.Diff(tt.want, images{st.PrimaryImage, st.TargetImage}); d != "" {
				t.Errorf("images (-want +got):\n%s", d)
			}
			if st.Phase != tt.st.Phase || len(st.Workloads) != len(tt.st.Workloads) {
				t.Errorf("phase %s, %d workloads; want the read's %s, %d", st.Phase, len(st.Workloads), tt.st.Phase, len(tt.st.Workloads))
			}
		})
	}
}

// TestSetClusterPreviousVersion: a release set of image members' cluster
// records what its members ran before from its apply run (each member's
// primary, read by the run: its tag taken from the version it is part
// of, a tag-only image kept as one), its revert restoring that, not the
// fleet's previous version; a cluster whose run failed (it reports
// nothing) goes back to the fleet's previous version.
func TestSetClusterPreviousVersion(t *testing.T) {
	v2 := rollout.SetVersion{api("1.1.0"), frontend("1.0.0")}
	fleet := rollout.SetVersion{api("1.0.0"), frontend("1.0.0")}
	r := waves([]rollout.Cluster{{Name: "c1", Phase: rollout.ClusterApplying, Step: 1, Run: events.PurposeApply}}, []rollout.Cluster{{Name: "c2", Phase: rollout.ClusterApplying, Step: 1, Run: events.PurposeApply}})
	r.Image, r.Digest, r.Tag, r.Members = "shop", v2.Digest(), v2.Tag(), []string{"shop-api", "shop-frontend"}
	r.Versions, r.PreviousVersions, r.PreviousDigest, r.Phase = v2, fleet, fleet.Digest(), rollout.Progressing
	// c1 ran an api the fleet never recorded (a hotfix by hand) and a
	// frontend by its tag.
	if _, err := r.Applied(cause(t), events.PipelineRunFinished{
		RolloutID: r.ID, Cluster: "c1", Purpose: events.PurposeApply, Step: 1, Changed: true, PreviousImage: apiImage + "@sha256:hotfix",
		PreviousMembers: map[string]string{"shop-api": apiImage + "@sha256:hotfix", "shop-frontend": frontendImage + ":1.0.0"},
	}, false, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Applied(cause(t), events.PipelineRunFinished{
		RolloutID: r.ID, Cluster: "c2", Purpose: events.PurposeApply, Step: 1, Error: "shop-api: canary shop-api failed",
	}, false, t0); err != nil {
		t.Fatal(err)
	}
	c1Prev := rollout.SetVersion{
		{Application: "shop-api", Image: apiImage, Digest: "sha256:hotfix"},
		{Application: "shop-frontend", Image: frontendImage, Tag: "1.0.0"},
	}
	type recorded struct {
		PreviousImage string
		Previous      rollout.SetVersion
		Revert        []events.MemberImage
	}
	got := map[string]recorded{}
	for _, name := range []string{"c1", "c2"} {
		c, _, err := r.Cluster(name)
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.RequestRun(cause(t), c, events.PurposeRevert, c.PreviousImage, "", t0)
		if err != nil {
			t.Fatal(err)
		}
		var req events.PipelineRunRequested
		if err := out[0].DataAs(&req); err != nil {
			t.Fatal(err)
		}
		got[name] = recorded{c.PreviousImage, c.PreviousVersions, req.Members}
	}
	want := map[string]recorded{
		"c1": {"shop@" + c1Prev.Digest(), c1Prev, []events.MemberImage{
			{Application: "shop-api", Image: apiImage, Digest: "sha256:hotfix"},
			{Application: "shop-frontend", Image: frontendImage, Tag: "1.0.0"},
		}},
		"c2": {"shop@" + fleet.Digest(), fleet, []events.MemberImage{
			{Application: "shop-api", Image: apiImage, Tag: "1.0.0", Digest: "sha256:api1.0.0"},
			{Application: "shop-frontend", Image: frontendImage, Tag: "1.0.0", Digest: "sha256:fe1.0.0"},
		}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("each cluster's previous version and its revert's members (-want +got):\n%s", d)
	}

	// The frontend's primary at the digest of the fleet's previous
	// version takes that version's tag.
	r2 := waves([]rollout.Cluster{{Name: "c1", Phase: rollout.ClusterApplying, Step: 1, Run: events.PurposeApply}})
	r2.Image, r2.Digest, r2.Members, r2.Versions, r2.PreviousVersions, r2.Phase = "shop", v2.Digest(), []string{"shop-api", "shop-frontend"}, v2, fleet, rollout.Progressing
	if _, err := r2.Applied(cause(t), events.PipelineRunFinished{
		RolloutID: r2.ID, Cluster: "c1", Purpose: events.PurposeApply, Step: 1, Changed: true,
		PreviousMembers: map[string]string{"shop-frontend": ref(frontend("1.0.0")), "shop-api": ref(api("1.0.0"))},
	}, false, t0); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(fleet, r2.Waves[0].Clusters[0].PreviousVersions); d != "" {
		t.Errorf("previous version read at the fleet's digests (-want +got):\n%s", d)
	}
}
