package rollout_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// reconcileFleet: wave a is c1, wave b is c2 and c3.
func reconcileFleet() *config.Config {
	return &config.Config{Fleet: config.Fleet{
		Clusters: []config.Cluster{{Name: "c1"}, {Name: "c2"}, {Name: "c3"}},
		Waves:    []config.Wave{{Name: "a", Clusters: []string{"c1"}}, {Name: "b", Clusters: []string{"c2", "c3"}}},
	}}
}

func TestReconcile(t *testing.T) {
	const (
		digest = "sha256:d100"
		ref    = "reg.test/app@" + digest
		old    = "reg.test/app@sha256:d090"
	)
	report := config.Application{Name: "app", Image: "reg.test/app", Namespace: "ns", Workload: config.Workload{Name: "app"}, DriftPolicy: config.DriftPolicyReport}
	revert := report
	revert.DriftPolicy = config.DriftPolicyRevert
	git := report
	git.Source = &config.Source{Git: &config.GitSource{URL: "https://git.test/x"}}
	gitRevert := git
	gitRevert.DriftPolicy = config.DriftPolicyRevert
	st := rollout.AppState{DeployedTag: "1.0.0", DeployedDigest: digest, DeployedClusters: []string{"c1", "c2"}}
	// A git application's validated version is a commit; its clusters
	// run what the last commit that changed them rendered.
	gitSt := rollout.AppState{DeployedTag: "main@0123456789ab", DeployedDigest: "0123456789abcdef", DeployedClusters: []string{"c1"}}
	gitCurrent := func(imageCluster ...string) []rollout.ClusterCheck {
		var out []rollout.ClusterCheck
		for i := 0; i+1 < len(imageCluster); i += 2 {
			out = append(out, rollout.ClusterCheck{Cluster: imageCluster[i+1], State: rollout.CheckCurrent, Image: imageCluster[i], Reason: rollout.GitNotCompared})
		}
		return out
	}
	// Compared with what the validated commit renders for each cluster.
	const (
		gitRev = "https://git.test/x@0123456789abcdef"
		img    = "reg.test/app:6.0.0"
		hand   = "reg.test/app:6.0.1"
	)
	gitDrift := gitSt
	gitDrift.DeployedClusters = []string{"c1", "c2", "c3"}
	gitObs := func(clusterImage ...string) []rollout.Observed {
		var out []rollout.Observed
		for i := 0; i+1 < len(clusterImage); i += 2 {
			out = append(out, rollout.Observed{Cluster: clusterImage[i], Workload: true, Canary: true, Primary: gitRev, PrimaryImage: clusterImage[i+1], Rendered: img})
		}
		return out
	}
	gitRuns := func(cs ...string) []rollout.ClusterCheck {
		var out []rollout.ClusterCheck
		for _, c := range cs {
			out = append(out, rollout.ClusterCheck{Cluster: c, State: rollout.CheckCurrent, Image: gitRev})
		}
		return out
	}
	current := func(c string) rollout.Observed {
		return rollout.Observed{Cluster: c, Workload: true, Canary: true, Primary: ref}
	}
	all := []rollout.Observed{current("c1"), current("c2"), current("c3")}
	with := func(o rollout.Observed) []rollout.Observed {
		out := []rollout.Observed{}
		for _, a := range all {
			if a.Cluster == o.Cluster {
				a = o
			}
			out = append(out, a)
		}
		return out
	}
	ok := func(cs ...string) []rollout.ClusterCheck {
		var out []rollout.ClusterCheck
		for _, c := range cs {
			out = append(out, rollout.ClusterCheck{Cluster: c, State: rollout.CheckCurrent, Image: ref})
		}
		return out
	}
	tests := []struct {
		name     string
		app      config.Application
		st       rollout.AppState
		inFlight []rollout.Rollout
		obs      []rollout.Observed
		partial  *rollout.Rollout
		want     rollout.Reconciliation
	}{
		{name: "every cluster runs the digest", app: report, st: st, obs: all,
			want: rollout.Reconciliation{Clusters: ok("c1", "c2", "c3")}},
		{name: "nothing validated yet", app: report, st: rollout.AppState{}, obs: all,
			want: rollout.Reconciliation{Skip: "no version has been validated yet"}},
		{name: "a rollout in flight reaches the clusters itself", app: report, st: st, obs: with(rollout.Observed{Cluster: "c3"}),
			inFlight: []rollout.Rollout{{ID: "app-1", Application: "app", Tag: "1.1.0", Phase: rollout.Progressing}},
			want:     rollout.Reconciliation{Skip: "rollout app-1 (1.1.0, Progressing) is in flight: it reaches its clusters itself"}},
		{name: "a rollout rolling back holds it too", app: report, st: st, obs: all,
			inFlight: []rollout.Rollout{{ID: "app-1", Application: "app", Tag: "1.1.0", Phase: rollout.Failed}},
			want:     rollout.Reconciliation{Skip: "rollout app-1 (1.1.0, Failed) is in flight: it reaches its clusters itself"}},
		{name: "another application's rollout does not", app: report, st: st, obs: all,
			inFlight: []rollout.Rollout{{ID: "other-1", Application: "other", Tag: "1.1.0", Phase: rollout.Progressing}},
			want:     rollout.Reconciliation{Clusters: ok("c1", "c2", "c3")}},
		{name: "a git application with no commit validated yet", app: git, st: rollout.AppState{}, obs: all,
			want: rollout.Reconciliation{Skip: "no version has been validated yet"}},
		{name: "a git application's clusters that run a primary are current, not compared", app: gitRevert, st: gitSt,
			obs:  []rollout.Observed{current("c1"), {Cluster: "c2", Workload: true, Canary: true, Primary: old}, current("c3")},
			want: rollout.Reconciliation{Clusters: gitCurrent(ref, "c1", old, "c2", ref, "c3")}},
		{name: "a git application's cluster new to it, with nothing, is caught up: the commit's render creates the workload", app: git, st: gitSt,
			obs: with(rollout.Observed{Cluster: "c3"}),
			want: rollout.Reconciliation{CatchUp: []string{"c3"}, Clusters: append(gitCurrent(ref, "c1", ref, "c2"), rollout.ClusterCheck{Cluster: "c3", State: rollout.CheckCatchUp,
				Reason: "no canary or primary: the cluster is new to the application, or came back empty"})}},
		{name: "a git application's cluster whose canary went is caught up", app: gitRevert, st: gitSt,
			obs: with(rollout.Observed{Cluster: "c1", Workload: true}),
			want: rollout.Reconciliation{CatchUp: []string{"c1"}, Clusters: append([]rollout.ClusterCheck{{Cluster: "c1", State: rollout.CheckCatchUp,
				Reason: "no canary or primary: the cluster is new to the application, or came back empty"}}, gitCurrent(ref, "c2", ref, "c3")...)}},
		{name: "a git application's unreadable cluster is neither", app: git, st: gitSt,
			obs:  with(rollout.Observed{Cluster: "c2", Err: "connection refused"}),
			want: rollout.Reconciliation{Clusters: []rollout.ClusterCheck{gitCurrent(ref, "c1")[0], {Cluster: "c2", State: rollout.CheckUnreadable, Reason: "connection refused"}, gitCurrent(ref, "c3")[0]}}},
		{name: "a git application's cluster whose primary runs the image the commit renders is current", app: gitRevert, st: gitDrift,
			obs:  gitObs("c1", img, "c2", img, "c3", img),
			want: rollout.Reconciliation{Clusters: gitRuns("c1", "c2", "c3")}},
		{name: "a git application's primary changed by hand is drift, reported", app: git, st: gitDrift,
			obs: gitObs("c1", img, "c2", hand, "c3", img),
			want: rollout.Reconciliation{Drifted: []string{"c2"}, Clusters: []rollout.ClusterCheck{gitRuns("c1")[0], {Cluster: "c2", State: rollout.CheckDrifted, Image: hand,
				Reason: "the primary runs " + hand + ", not " + img + ", which the validated main@0123456789ab (0123456789abcdef) renders"}, gitRuns("c3")[0]}}},
		{name: "a git application's drift reverted by policy", app: gitRevert, st: gitDrift,
			obs: gitObs("c1", img, "c2", hand, "c3", img),
			want: rollout.Reconciliation{Drifted: []string{"c2"}, Revert: []string{"c2"}, Clusters: []rollout.ClusterCheck{gitRuns("c1")[0], {Cluster: "c2", State: rollout.CheckDrifted, Image: hand,
				Reason: "the primary runs " + hand + ", not " + img + ", which the validated main@0123456789ab (0123456789abcdef) renders"}, gitRuns("c3")[0]}}},
		{name: "a git application's cluster that entered the waves running another image is caught up", app: gitRevert, st: gitSt,
			obs: gitObs("c1", img, "c2", img, "c3", hand),
			want: rollout.Reconciliation{CatchUp: []string{"c3"}, Clusters: append(gitRuns("c1", "c2"), rollout.ClusterCheck{Cluster: "c3", State: rollout.CheckCatchUp, Image: gitRev,
				Reason: "entered the waves after main@0123456789ab was rolled out: runs " + hand + ", the commit renders " + img})}},
		{name: "a git application's cluster the commit could not be rendered for is not compared", app: gitRevert, st: gitDrift,
			obs: func() []rollout.Observed {
				o := gitObs("c1", img, "c2", hand, "c3", img)
				o[1].Rendered, o[1].RenderErr = "", "commit 0123456789abcdef renders no Deployment ns/app"
				return o
			}(),
			want: rollout.Reconciliation{Clusters: []rollout.ClusterCheck{gitRuns("c1")[0], {Cluster: "c2", State: rollout.CheckCurrent, Image: gitRev,
				Reason: rollout.GitNotCompared + ": commit 0123456789abcdef renders no Deployment ns/app"}, gitRuns("c3")[0]}}},
		{name: "a git application's rollout in flight reaches the clusters itself", app: git, st: gitSt, obs: with(rollout.Observed{Cluster: "c3"}),
			inFlight: []rollout.Rollout{{ID: "app-1", Application: "app", Tag: "main@c0ffee", Phase: rollout.Progressing}},
			want:     rollout.Reconciliation{Skip: "rollout app-1 (main@c0ffee, Progressing) is in flight: it reaches its clusters itself"}},
		{name: "a cluster with no canary is caught up", app: report, st: st,
			obs: with(rollout.Observed{Cluster: "c3", Workload: true}),
			want: rollout.Reconciliation{CatchUp: []string{"c3"}, Clusters: append(ok("c1", "c2"), rollout.ClusterCheck{Cluster: "c3", State: rollout.CheckCatchUp,
				Reason: "no canary or primary: the cluster is new to the application, or came back empty"})}},
		{name: "a cluster whose primary is gone is caught up", app: report, st: st,
			obs: with(rollout.Observed{Cluster: "c2", Workload: true, Canary: true}),
			want: rollout.Reconciliation{CatchUp: []string{"c2"}, Clusters: []rollout.ClusterCheck{ok("c1")[0], {Cluster: "c2", State: rollout.CheckCatchUp,
				Reason: "no canary or primary: the cluster is new to the application, or came back empty"}, ok("c3")[0]}}},
		{name: "an empty cluster with no workload is only reported", app: report, st: st,
			obs: with(rollout.Observed{Cluster: "c3"}),
			want: rollout.Reconciliation{Clusters: append(ok("c1", "c2"), rollout.ClusterCheck{Cluster: "c3", State: rollout.CheckNoWorkload,
				Reason: "no workload ns/app to set the image of"})}},
		{name: "a cluster that entered the waves since is caught up, not drift", app: revert, st: st,
			obs: with(rollout.Observed{Cluster: "c3", Workload: true, Canary: true, Primary: old}),
			want: rollout.Reconciliation{CatchUp: []string{"c3"}, Clusters: append(ok("c1", "c2"), rollout.ClusterCheck{Cluster: "c3", State: rollout.CheckCatchUp,
				Image: old, Reason: "entered the waves after 1.0.0 was rolled out"})}},
		{name: "a primary changed by hand is drift, reported", app: report, st: st,
			obs: with(rollout.Observed{Cluster: "c2", Workload: true, Canary: true, Primary: old}),
			want: rollout.Reconciliation{Drifted: []string{"c2"}, Clusters: []rollout.ClusterCheck{ok("c1")[0], {Cluster: "c2", State: rollout.CheckDrifted,
				Image: old, Reason: "the primary runs " + old + ", not the validated 1.0.0 (" + digest + ")"}, ok("c3")[0]}}},
		{name: "drift reverted by policy", app: revert, st: st,
			obs: with(rollout.Observed{Cluster: "c2", Workload: true, Canary: true, Primary: old}),
			want: rollout.Reconciliation{Drifted: []string{"c2"}, Revert: []string{"c2"}, Clusters: []rollout.ClusterCheck{ok("c1")[0], {Cluster: "c2", State: rollout.CheckDrifted,
				Image: old, Reason: "the primary runs " + old + ", not the validated 1.0.0 (" + digest + ")"}, ok("c3")[0]}}},
		{name: "clusters deployed to unknown (a state from before): every one counts, so drift", app: report,
			st:  rollout.AppState{DeployedTag: "1.0.0", DeployedDigest: digest},
			obs: with(rollout.Observed{Cluster: "c3", Workload: true, Canary: true, Primary: old}),
			want: rollout.Reconciliation{Drifted: []string{"c3"}, Clusters: append(ok("c1", "c2"), rollout.ClusterCheck{Cluster: "c3", State: rollout.CheckDrifted,
				Image: old, Reason: "the primary runs " + old + ", not the validated 1.0.0 (" + digest + ")"})}},
		{name: "a cluster running an unsigned build that stopped before the signed waves is current", app: revert, st: st,
			obs: with(rollout.Observed{Cluster: "c1", Workload: true, Canary: true, Primary: "reg.test/app@sha256:unsigned"}),
			partial: &rollout.Rollout{ID: "app-2", Tag: "1.1.0", Digest: "sha256:unsigned", Phase: rollout.Succeeded, StopsBefore: "b",
				Waves: []rollout.Wave{{Name: "a", Clusters: []rollout.Cluster{{Name: "c1"}}}}},
			want: rollout.Reconciliation{Clusters: append([]rollout.ClusterCheck{{Cluster: "c1", State: rollout.CheckCurrent, Image: "reg.test/app@sha256:unsigned",
				Reason: "runs 1.1.0, which rollout app-2 took unsigned as far as the waves before b"}}, ok("c2", "c3")...)}},
		{name: "that build elsewhere is drift", app: revert, st: st,
			obs: with(rollout.Observed{Cluster: "c2", Workload: true, Canary: true, Primary: "reg.test/app@sha256:unsigned"}),
			partial: &rollout.Rollout{ID: "app-2", Tag: "1.1.0", Digest: "sha256:unsigned", Phase: rollout.Succeeded, StopsBefore: "b",
				Waves: []rollout.Wave{{Name: "a", Clusters: []rollout.Cluster{{Name: "c1"}}}}},
			want: rollout.Reconciliation{Drifted: []string{"c2"}, Revert: []string{"c2"}, Clusters: []rollout.ClusterCheck{ok("c1")[0], {Cluster: "c2", State: rollout.CheckDrifted,
				Image: "reg.test/app@sha256:unsigned", Reason: "the primary runs reg.test/app@sha256:unsigned, not the validated 1.0.0 (" + digest + ")"}, ok("c3")[0]}}},
		{name: "an unreadable cluster is neither", app: revert, st: st,
			obs:  with(rollout.Observed{Cluster: "c1", Err: "connection refused"}),
			want: rollout.Reconciliation{Clusters: append([]rollout.ClusterCheck{{Cluster: "c1", State: rollout.CheckUnreadable, Reason: "connection refused"}}, ok("c2", "c3")...)}},
		{name: "a cluster outside the waves is not judged", app: report, st: st,
			obs:  append(all, rollout.Observed{Cluster: "c9", Workload: true}),
			want: rollout.Reconciliation{Clusters: ok("c1", "c2", "c3")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rollout.Reconcile(reconcileFleet(), tt.app, tt.st, tt.inFlight, tt.obs, tt.partial)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Reconcile (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanReconcile(t *testing.T) {
	app := config.Application{Name: "app", Image: "reg.test/app"}
	st := rollout.AppState{DeployedTag: "1.0.0", DeployedDigest: "sha256:d100", DeployedClusters: []string{"c1", "c2"}}
	req := events.ReconcileRequested{Application: "app", Kind: rollout.KindCatchUp, Image: "reg.test/app", Tag: "1.0.0", Digest: "sha256:d100",
		Clusters: []string{"c3"}, Reason: "catch-up of 1.0.0 to [c3]"}
	gitApp := config.Application{Name: "app", Source: &config.Source{Git: &config.GitSource{URL: "https://git.test/deployments"}}}
	gitSt := rollout.AppState{DeployedTag: "main@0123456789ab", DeployedDigest: "0123456789abcdef", DeployedClusters: []string{"c1", "c2"}}
	set := gitApp
	set.Set = &config.SetSpec{Members: []config.SetMember{{Name: "migrate", Job: true}, {Name: "api"}}}
	gitReq := events.ReconcileRequested{Application: "app", Kind: rollout.KindCatchUp, Image: "https://git.test/deployments", Tag: "main@0123456789ab",
		Digest: "0123456789abcdef", Clusters: []string{"c3"}, Reason: "catch-up of main@0123456789ab to [c3]"}
	tests := []struct {
		name     string
		app      *config.Application
		st       rollout.AppState
		inFlight []rollout.Rollout
		req      events.ReconcileRequested
		want     rollout.Rollout
		skip     string
	}{
		{name: "a catch-up to the clusters asked, in their wave", st: st, req: req,
			want: rollout.Rollout{ID: "id", Application: "app", Image: "reg.test/app", Tag: "1.0.0", Digest: "sha256:d100", Phase: rollout.Progressing,
				PreviousTag: "1.0.0", PreviousDigest: "sha256:d100", Kind: rollout.KindCatchUp, Reason: "catch-up of 1.0.0 to [c3]",
				Waves: []rollout.Wave{{Name: "b", Clusters: []rollout.Cluster{{Name: "c3", Phase: rollout.ClusterPending}}}}}},
		{name: "a git application's catch-up carries the validated commit", app: &gitApp, st: gitSt, req: gitReq,
			want: rollout.Rollout{ID: "id", Application: "app", Image: "https://git.test/deployments", Tag: "main@0123456789ab", Digest: "0123456789abcdef",
				Phase: rollout.Progressing, PreviousTag: "main@0123456789ab", PreviousDigest: "0123456789abcdef", Kind: rollout.KindCatchUp, Reason: "catch-up of main@0123456789ab to [c3]",
				Waves: []rollout.Wave{{Name: "b", Clusters: []rollout.Cluster{{Name: "c3", Phase: rollout.ClusterPending}}}}}},
		{name: "a release set's catch-up lists its members", app: &set, st: gitSt, req: gitReq,
			want: rollout.Rollout{ID: "id", Application: "app", Image: "https://git.test/deployments", Tag: "main@0123456789ab", Digest: "0123456789abcdef",
				Phase: rollout.Progressing, PreviousTag: "main@0123456789ab", PreviousDigest: "0123456789abcdef", Kind: rollout.KindCatchUp, Reason: "catch-up of main@0123456789ab to [c3]",
				Members: []string{"migrate", "api"}, Waves: []rollout.Wave{{Name: "b", Clusters: []rollout.Cluster{{Name: "c3", Phase: rollout.ClusterPending}}}}}},
		{name: "not a commit the fleet moved on from", app: &gitApp, st: rollout.AppState{DeployedTag: "main@fedcba987654", DeployedDigest: "fedcba9876543210"}, req: gitReq,
			skip: "0123456789abcdef is no longer the validated digest (fedcba9876543210 is)"},
		{name: "not while a rollout is in flight", st: st, req: req,
			inFlight: []rollout.Rollout{{ID: "app-1", Application: "app", Tag: "1.1.0", Phase: rollout.Queued}},
			skip:     "rollout app-1 (1.1.0, Queued) is in flight: it reaches its clusters itself"},
		{name: "not once another digest is validated", st: rollout.AppState{DeployedTag: "1.1.0", DeployedDigest: "sha256:d110"}, req: req,
			skip: "sha256:d100 is no longer the validated digest (sha256:d110 is)"},
		{name: "not to clusters no longer in the waves", st: st, req: func() events.ReconcileRequested { r := req; r.Clusters = []string{"c9"}; return r }(),
			skip: "none of c9 is in the application's waves"},
		{name: "not of an unknown kind", st: st, req: func() events.ReconcileRequested { r := req; r.Kind = "sideways"; return r }(),
			skip: `unknown kind "sideways"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := app
			if tt.app != nil {
				a = *tt.app
			}
			got, skip := rollout.PlanReconcile(reconcileFleet(), a, tt.st, tt.inFlight, tt.req, "id")
			if skip != tt.skip {
				t.Errorf("skip = %q, want %q", skip, tt.skip)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PlanReconcile (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeployedTo(t *testing.T) {
	wave := func(cs ...string) []rollout.Wave {
		var w rollout.Wave
		for _, c := range cs {
			w.Clusters = append(w.Clusters, rollout.Cluster{Name: c})
		}
		return []rollout.Wave{w}
	}
	st := rollout.AppState{DeployedDigest: "sha256:old", DeployedClusters: []string{"c1", "c2"}}
	tests := []struct {
		name string
		st   rollout.AppState
		ro   rollout.Rollout
		want []string
	}{
		{name: "a version's rollout: its clusters", st: st, ro: rollout.Rollout{Digest: "sha256:new", Waves: wave("c2", "c1")}, want: []string{"c1", "c2"}},
		{name: "a catch-up adds its clusters", st: st, ro: rollout.Rollout{Kind: rollout.KindCatchUp, Digest: "sha256:old", Waves: wave("c3")},
			want: []string{"c1", "c2", "c3"}},
		{name: "a catch-up of a state from before keeps every cluster counted", st: rollout.AppState{DeployedDigest: "sha256:old"},
			ro: rollout.Rollout{Kind: rollout.KindCatchUp, Digest: "sha256:old", Waves: wave("c3")}},
		{name: "a git push's rollout limited to the clusters it changed adds them: the others run what its commit renders", st: st,
			ro: rollout.Rollout{Digest: "fedcba98", Limited: true, Waves: wave("c3")}, want: []string{"c1", "c2", "c3"}},
		{name: "the first git push's limited rollout: its clusters", st: rollout.AppState{},
			ro: rollout.Rollout{Digest: "fedcba98", Limited: true, Waves: wave("c3")}, want: []string{"c3"}},
		{name: "a limited rollout over a state from before keeps every cluster counted", st: rollout.AppState{DeployedDigest: "0123abcd"},
			ro: rollout.Rollout{Digest: "fedcba98", Limited: true, Waves: wave("c3")}},
		{name: "a revert adds nothing new twice", st: st, ro: rollout.Rollout{Kind: rollout.KindDriftRevert, Digest: "sha256:old", Waves: wave("c2")},
			want: []string{"c1", "c2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, rollout.DeployedTo(tt.st, tt.ro)); diff != "" {
				t.Errorf("DeployedTo (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReconcileIDs(t *testing.T) {
	a := rollout.ReconcileID("app", rollout.KindCatchUp, "sha256:d", []string{"c2", "c1"}, nil)
	if b := rollout.ReconcileID("app", rollout.KindCatchUp, "sha256:d", []string{"c1", "c2"}, nil); a != b {
		t.Errorf("the same clusters in another order make another id: %s, %s", a, b)
	}
	for _, other := range []string{
		rollout.ReconcileID("app", rollout.KindCatchUp, "sha256:e", []string{"c1", "c2"}, nil),
		rollout.ReconcileID("app", rollout.KindDriftRevert, "sha256:d", []string{"c1", "c2"}, nil),
		rollout.ReconcileID("app", rollout.KindCatchUp, "sha256:d", []string{"c1"}, nil),
		rollout.ReconcileID("app", rollout.KindCatchUp, "sha256:d", []string{"c1", "c2"}, map[string]string{"c1": "x"}),
	} {
		if other == a {
			t.Errorf("another digest, kind, set of clusters or image found makes the same id %s", a)
		}
	}
}

func TestDriftReached(t *testing.T) {
	since := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	drift := &rollout.DriftStatus{Digest: "sha256:a", Tag: "1.0.0", Since: since, Clusters: []rollout.ClusterCheck{
		{Cluster: "c2", State: rollout.CheckDrifted, Image: "podinfo:0.1.0"},
		{Cluster: "c3", State: rollout.CheckDrifted, Image: "podinfo:0.2.0"},
	}}
	ro := func(phase rollout.Phase, digest string, clusters ...rollout.Cluster) rollout.Rollout {
		return rollout.Rollout{Phase: phase, Digest: digest, Waves: []rollout.Wave{{Clusters: clusters}}}
	}
	ok := func(n string) rollout.Cluster { return rollout.Cluster{Name: n, Phase: rollout.ClusterSucceeded} }
	tests := []struct {
		name  string
		drift *rollout.DriftStatus
		ro    rollout.Rollout
		want  *rollout.DriftStatus
	}{
		{"no drift", nil, ro(rollout.Succeeded, "sha256:a", ok("c2")), nil},
		{"a revert of c2 that succeeded ends its drift, c3's stays", drift, ro(rollout.Succeeded, "sha256:a", ok("c2")),
			&rollout.DriftStatus{Digest: "sha256:a", Tag: "1.0.0", Since: since, Clusters: drift.Clusters[1:]}},
		{"every drifted cluster reverted: no drift", drift, ro(rollout.Succeeded, "sha256:a", ok("c2"), ok("c3")), nil},
		{"a cluster that failed in the rollout keeps its drift", drift,
			ro(rollout.Succeeded, "sha256:a", ok("c2"), rollout.Cluster{Name: "c3", Phase: rollout.ClusterFailed}),
			&rollout.DriftStatus{Digest: "sha256:a", Tag: "1.0.0", Since: since, Clusters: drift.Clusters[1:]}},
		{"a rollout still in flight changes nothing", drift, ro(rollout.Progressing, "sha256:a", ok("c2"), ok("c3")), drift},
		{"a drift held against another digest waits for the next check", drift, ro(rollout.Succeeded, "sha256:b", ok("c2"), ok("c3")), drift},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.drift.Reached(tt.ro)); diff != "" {
				t.Errorf("Reached (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUndeployed(t *testing.T) {
	inFlight := []rollout.Rollout{{ID: "r2"}}
	for _, tc := range []struct {
		name string
		st   rollout.AppState
		want string
	}{
		{name: "no rollout yet", st: rollout.AppState{}, want: ""},
		{name: "the latest is the deployed one", st: rollout.AppState{LatestRollout: "r1", DeployedRollout: "r1"}, want: ""},
		{name: "the latest is in flight", st: rollout.AppState{LatestRollout: "r2", DeployedRollout: "r1"}, want: ""},
		{name: "the latest ended, not recorded", st: rollout.AppState{LatestRollout: "r3", DeployedRollout: "r1"}, want: "r3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.st.Undeployed(inFlight); got != tc.want {
				t.Errorf("Undeployed = %q, want %q", got, tc.want)
			}
		})
	}
}

// A release set's cluster is judged by its first member not current
// there, in that order: unreadable, empty, drifted, not compared.
func TestSetObserved(t *testing.T) {
	cur := func(m string) rollout.Observed {
		return rollout.Observed{Member: m, Canary: true, Primary: "r", PrimaryImage: "i", Rendered: "i"}
	}
	with := func(o rollout.Observed, f func(*rollout.Observed)) rollout.Observed { f(&o); return o }
	unread := with(cur("c"), func(o *rollout.Observed) { o.Err = "refused" })
	empty := with(cur("d"), func(o *rollout.Observed) { o.Primary = "" })
	drift := with(cur("e"), func(o *rollout.Observed) { o.PrimaryImage = "hand" })
	unknown := with(cur("f"), func(o *rollout.Observed) { o.Rendered = "" })
	tests := []struct {
		name    string
		members []rollout.Observed
		want    string
	}{
		{"all current: the first member", []rollout.Observed{cur("a"), cur("b")}, "a"},
		{"not compared", []rollout.Observed{cur("a"), unknown}, "f"},
		{"drift before not compared", []rollout.Observed{unknown, drift}, "e"},
		{"empty before drift", []rollout.Observed{drift, empty}, "d"},
		{"unreadable before all", []rollout.Observed{empty, drift, unread}, "c"},
		{"none", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rollout.SetObserved(tt.members).Member; got != tt.want {
				t.Errorf("judged by %q, want %q", got, tt.want)
			}
		})
	}
}
