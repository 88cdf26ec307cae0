package rollout_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

const shopRepo = "https://git.test/platform/shop.git"

// mixedSet is a release set of a git migration Job and api (one
// repository) and an image frontend, in that order; the api leads.
func mixedSet() (set, migrate, api, frontend config.Application) {
	git := func(path string) *config.Source {
		return &config.Source{Git: &config.GitSource{URL: shopRepo, Branch: "main", Paths: []string{path}}}
	}
	migrate = config.Application{Name: "shop-migrate", Source: git("shop/migrate"), Workload: config.Workload{Kind: config.KindJob, Name: "shop-migrate"}, MemberOf: "shop"}
	api = config.Application{Name: "shop-api", Source: git("shop/api"), Workload: config.Workload{Name: "shop-api"}, MemberOf: "shop"}
	frontend = config.Application{Name: "shop-frontend", Image: frontendImage, Track: config.TrackMinorVersion, Workload: config.Workload{Name: "shop-frontend"}, MemberOf: "shop"}
	set = config.Application{Name: "shop", Source: git("shop/migrate"), OnNewVersion: config.OnNewVersionSupersede, Workload: api.Workload,
		Set: &config.SetSpec{Members: []config.SetMember{{Name: "shop-migrate", Job: true}, {Name: "shop-api"}, {Name: "shop-frontend", Image: frontendImage}}}}
	return set, migrate, api, frontend
}

// commit is the git members' entries at commit c of main.
func commit(c string) []rollout.MemberVersion {
	e := func(m string) rollout.MemberVersion {
		return rollout.MemberVersion{Application: m, Image: "https://git.test/platform/shop.git", Tag: "main@" + c[:7], Digest: c}
	}
	return []rollout.MemberVersion{e("shop-migrate"), e("shop-api")}
}

func mixed(c, fe string) rollout.SetVersion {
	v := rollout.SetVersion(commit(c))
	if fe != "" {
		v = append(v, frontend(fe))
	}
	return v
}

func push(c string) events.ImageVerified {
	return events.ImageVerified{Image: shopRepo, Tag: "main@" + c[:7], Digest: c}
}

const (
	c1 = "1111111aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	c2 = "2222222bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func TestSetMixed(t *testing.T) {
	set, _, _, _ := mixedSet()
	img, _, _ := imageSet()
	git := set
	git.Set = &config.SetSpec{Members: []config.SetMember{{Name: "shop-migrate", Job: true}, {Name: "shop-api"}}}
	got := map[string]bool{"mixed": rollout.TupleSet(set), "image": rollout.TupleSet(img), "git": rollout.TupleSet(git), "app": rollout.TupleSet(config.Application{Name: "web"})}
	if diff := cmp.Diff(map[string]bool{"mixed": true, "image": true, "git": false, "app": false}, got); diff != "" {
		t.Errorf("TupleSet (-want +got):\n%s", diff)
	}
	v := mixed(c1, "1.0.0")
	if c, ok := v.Commit(set); !ok || c.Digest != c1 || c.Application != "shop-migrate" {
		t.Errorf("Commit = %+v, %v", c, ok)
	}
	if _, ok := (rollout.SetVersion{frontend("1.0.0")}).Commit(set); ok {
		t.Error("Commit found one in a version without git entries")
	}
	next := v.WithCommit(set, rollout.MemberVersion{Image: shopRepo, Tag: "main@2222222", Digest: c2})
	if diff := cmp.Diff(mixed(c2, "1.0.0"), next); diff != "" {
		t.Errorf("WithCommit moves every git member, the frontend kept (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(mixed(c1, "1.0.0"), v); diff != "" {
		t.Errorf("WithCommit changed its receiver (-want +got):\n%s", diff)
	}
	if got, want := next.Tag(), "shop-migrate:main@2222222,shop-api:main@2222222,shop-frontend:1.0.0"; got != want {
		t.Errorf("Tag = %q, want %q", got, want)
	}
	// A git member's Ref is the revision the run writes on its pod
	// template (tasks.Revision: repository@commit).
	if got := next[1].Ref(); got != shopRepo+"@"+c2 {
		t.Errorf("the api's Ref = %q", got)
	}
}

// A git push and an image push each make the set's next version from the
// baseline. Catches: the frontend dropped by a git push, a git member
// left behind, a deployed or in-flight commit rolled out again, and a
// frontend's push rolling out before the set has any commit.
func TestDecideMixedSetPush(t *testing.T) {
	set, _, _, feApp := mixedSet()
	deployed := rollout.AppState{DeployedVersions: mixed(c1, "1.0.0")}
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	flight := rollout.Rollout{ID: "shop-f", Phase: rollout.Progressing, Created: t0, Versions: mixed(c1, "1.1.0")}
	tests := []struct {
		name     string
		st       rollout.AppState
		inFlight []rollout.Rollout
		frontend string // an image push of the frontend, else the commit c2's push
		commit   string
		want     rollout.SetVersion
		reason   string
	}{
		{name: "a commit moves every git member", st: deployed, commit: c2, want: mixed(c2, "1.0.0")},
		{name: "the first commit", commit: c1, want: mixed(c1, "")},
		{name: "a commit deployed", st: deployed, commit: c1, reason: "commit " + c1 + " (main@1111111) is deployed already"},
		{name: "a commit takes the frontend in flight along", st: deployed, inFlight: []rollout.Rollout{flight}, commit: c2, want: mixed(c2, "1.1.0")},
		{name: "a commit in flight", st: deployed, inFlight: []rollout.Rollout{{ID: "shop-g", Phase: rollout.Progressing, Versions: mixed(c2, "1.0.0")}}, commit: c2,
			reason: "commit " + c2 + " (main@2222222) is being rolled out (rollout shop-g)"},
		{name: "a frontend's push keeps the commit", st: deployed, frontend: "1.1.0", want: mixed(c1, "1.1.0")},
		{name: "a frontend's push takes the commit in flight along", st: deployed,
			inFlight: []rollout.Rollout{{ID: "shop-g", Phase: rollout.Progressing, Versions: mixed(c2, "1.0.0")}}, frontend: "1.1.0", want: mixed(c2, "1.1.0")},
		{name: "a frontend's push before any commit", frontend: "1.1.0", reason: "release set shop has no commit of its git members yet: push to its branch first"},
		{name: "a frontend's older push", st: deployed, frontend: "0.9.0", reason: "shop-frontend: 0.9.0 is older than the current 1.0.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got rollout.SetVersion
			var reason string
			if tt.frontend != "" {
				f := frontend(tt.frontend)
				v, d, err := rollout.DecideSetPush(set, feApp, tt.st, tt.inFlight, events.ImageVerified{Image: f.Image, Tag: f.Tag, Digest: f.Digest})
				if err != nil {
					t.Fatal(err)
				}
				got = v
				if !d.Accept {
					reason = d.Reason
				}
			} else {
				v, d := rollout.DecideSetCommit(set, tt.st, tt.inFlight, push(tt.commit))
				got = v
				if !d.Accept {
					reason = d.Reason
				}
			}
			if diff := cmp.Diff([]any{tt.want, tt.reason}, []any{got, reason}); diff != "" {
				t.Errorf("version, reason (-want +got):\n%s", diff)
			}
		})
	}
}

// Plan of a git push of a mixed set: the set's rollout of the tuple, its
// previous version the deployed one, limited to the changed clusters.
func TestPlanMixedSet(t *testing.T) {
	set, migrate, apiApp, feApp := mixedSet()
	cfg := &config.Config{Fleet: config.Fleet{Waves: []config.Wave{{Name: "w1", Clusters: []string{"c1"}}, {Name: "w2", Clusters: []string{"c2", "c3"}}}},
		Applications: []config.Application{migrate, apiApp, feApp, set}}
	st := rollout.AppState{DeployedVersions: mixed(c1, "1.0.0")}
	st.DeployedTag, st.DeployedDigest = st.DeployedVersions.Tag(), st.DeployedVersions.Digest()
	ro, skip, err := rollout.Plan(cfg, set, st, nil, push(c2), "shop-1", []string{"c1", "c3"})
	if err != nil || skip != "" {
		t.Fatalf("Plan = %q, %v", skip, err)
	}
	want := mixed(c2, "1.0.0")
	var clusters []string
	for _, w := range ro.Waves {
		for _, c := range w.Clusters {
			clusters = append(clusters, c.Name)
		}
	}
	got := []any{ro.Image, ro.Tag, ro.Digest, ro.Versions, ro.PreviousVersions, ro.PreviousDigest, ro.Members, clusters}
	if diff := cmp.Diff([]any{"shop", want.Tag(), want.Digest(), want, st.DeployedVersions, st.DeployedDigest,
		[]string{"shop-migrate", "shop-api", "shop-frontend"}, []string{"c1", "c3"}}, got); diff != "" {
		t.Errorf("the set's rollout of a commit (-want +got):\n%s", diff)
	}
	f := frontend("1.1.0")
	ro, skip, err = rollout.Plan(cfg, set, st, nil, events.ImageVerified{Image: f.Image, Tag: f.Tag, Digest: f.Digest}, "shop-2", nil)
	if err != nil || skip != "" {
		t.Fatalf("Plan of the frontend's push = %q, %v", skip, err)
	}
	if diff := cmp.Diff(mixed(c1, "1.1.0"), ro.Versions); diff != "" {
		t.Errorf("the set's rollout of the frontend's push (-want +got):\n%s", diff)
	}
}

// TestSetStatusMixed: a set of git and image members' canaries read as
// the version they make up: a git member's primary runs its revision
// (repository@commit, its entry's Ref), the frontend its image, the Job
// member not compared (it has no canary). Catches: a Job's entry making
// every cluster read "mixed", a git member compared by its image.
func TestSetStatusMixed(t *testing.T) {
	set, migrate, apiApp, feApp := mixedSet()
	cfg := &config.Config{Applications: []config.Application{migrate, apiApp, feApp, set}}
	v1, v2 := mixed(c1, "1.0.0"), mixed(c2, "1.0.0")
	r := setRollout(v2, v1, v1, rollout.ClusterProgressing)
	r.Members = set.Set.Names()
	read := func(api, fe string) rollout.CanaryStatus {
		return rollout.Combine([]rollout.WorkloadStatus{
			{Name: "shop-api", Phase: "Succeeded", PrimaryImage: api, TargetImage: api},
			{Name: "shop-frontend", Phase: "Succeeded", PrimaryImage: fe, TargetImage: fe},
		})
	}
	for _, tt := range []struct {
		name string
		st   rollout.CanaryStatus
		want string
	}{
		{"the new commit", read(shopRepo+"@"+c2, ref(frontend("1.0.0"))), "shop@" + v2.Digest()},
		{"the cluster's previous commit", read(shopRepo+"@"+c1, ref(frontend("1.0.0"))), "shop@" + v1.Digest()},
		{"the frontend on another image", read(shopRepo+"@"+c2, ref(frontend("0.9.0"))),
			"mixed: shop-api=" + shopRepo + "@" + c2 + ", shop-frontend=" + ref(frontend("0.9.0"))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.SetStatus(cfg, set, "c1", tt.st).PrimaryImage; got != tt.want {
				t.Errorf("primary = %q, want %q", got, tt.want)
			}
		})
	}
}

// A set of git and image members led by its image member (the frontend
// first, its canary listing the api's; docs/design/release-sets.md, "An
// image lead") is judged as one led by the api: each member with an entry
// by its workload in the list, the frontend without an entry (the set's
// first commit) not compared. Catches: the lead's own image taken for the
// set's version, the lead without an entry failing every comparison.
func TestSetStatusMixedImageLead(t *testing.T) {
	set, migrate, apiApp, feApp := mixedSet()
	set.Workload = feApp.Workload
	set.Set = &config.SetSpec{Members: []config.SetMember{{Name: "shop-frontend", Image: frontendImage}, {Name: "shop-migrate", Job: true}, {Name: "shop-api"}}}
	cfg := &config.Config{Applications: []config.Application{migrate, apiApp, feApp, set}}
	read := func(api, fe string) rollout.CanaryStatus {
		return rollout.Combine([]rollout.WorkloadStatus{
			{Name: "shop-frontend", Phase: "Succeeded", PrimaryImage: fe, TargetImage: fe},
			{Name: "shop-api", Phase: "Succeeded", PrimaryImage: api, TargetImage: api},
		})
	}
	v1, v2, first := mixed(c1, "1.0.0"), mixed(c2, "1.1.0"), mixed(c1, "")
	for _, tt := range []struct {
		name          string
		version, prev rollout.SetVersion
		st            rollout.CanaryStatus
		want          string
	}{
		{"the new version", v2, v1, read(shopRepo+"@"+c2, ref(frontend("1.1.0"))), "shop@" + v2.Digest()},
		{"the cluster's previous version", v2, v1, read(shopRepo+"@"+c1, ref(frontend("1.0.0"))), "shop@" + v1.Digest()},
		{"the new commit, the frontend's old image", v2, v1, read(shopRepo+"@"+c2, ref(frontend("1.0.0"))),
			"mixed: shop-frontend=" + ref(frontend("1.0.0")) + ", shop-api=" + shopRepo + "@" + c2},
		{"the first commit, no entry of the lead", first, nil, read(shopRepo+"@"+c1, "registry.test/shop/frontend:0.1.0"), "shop@" + first.Digest()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := setRollout(tt.version, tt.prev, tt.prev, rollout.ClusterProgressing)
			r.Members = set.Set.Names()
			if got := r.SetStatus(cfg, set, "c1", tt.st).PrimaryImage; got != tt.want {
				t.Errorf("primary = %q, want %q", got, tt.want)
			}
		})
	}
}

// A set of git and image members' rollout records its Job's state by its
// git members' commit (the tuple's hash is no Job's revision). Catches: a
// Job that ran at the tuple's commit shown pending for ever.
func TestRecordJobsMixed(t *testing.T) {
	v := mixed(c2, "1.0.0")
	r := setRollout(v, mixed(c1, "1.0.0"), nil, rollout.ClusterProgressing)
	for _, tt := range []struct {
		name string
		job  rollout.JobStatus
		want string
	}{
		{"at the tuple's commit", rollout.JobStatus{Name: "shop-migrate", Found: true, Revision: shopRepo + "@" + c2, Complete: true}, rollout.JobComplete},
		{"at the previous commit", rollout.JobStatus{Name: "shop-migrate", Found: true, Revision: shopRepo + "@" + c1, Complete: true}, rollout.JobPending},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r.RecordJobs("c1", []rollout.JobStatus{tt.job})
			cl, _, _ := r.Cluster("c1")
			if got := cl.Jobs["shop-migrate"]; got != tt.want {
				t.Errorf("the Job's state = %q, want %q", got, tt.want)
			}
		})
	}
}

// A set of git and image members is reconciled member by member: the api
// (a git member) against what the deployed tuple's commit renders
// (Observed.Rendered, its reasons naming the commit), the frontend (an
// image member) against its entry (MemberExpected, its reasons naming the
// tuple), a cluster by its first member not current (SetObserved, as the
// reconciler hands it over). An image member without a workload is only
// reported (the set's run sets its image on a live workload); an empty
// git member is caught up (its render creates the workload). Catches a
// set judged as a git application only (the frontend's missing workload
// caught up, a run that cannot set its image; its reasons naming a
// render) and reasons naming the tuple's hash as a commit.
func TestReconcileMixedSet(t *testing.T) {
	set, _, _, _ := mixedSet()
	set.Namespace, set.DriftPolicy = "shop", config.DriftPolicyRevert
	report := set
	report.DriftPolicy = config.DriftPolicyReport
	deployed := mixed(c1, "2.0.0")
	st := rollout.AppState{DeployedTag: deployed.Tag(), DeployedDigest: deployed.Digest(), DeployedVersions: deployed, DeployedClusters: []string{"c1", "c2"}}
	const (
		apiImg = "registry.test/shop/api:1.0.0"
		hand   = "registry.test/shop/api:6.6.6"
		feHand = frontendImage + ":6.6.6"
	)
	rev, feRef := shopRepo+"@"+c1, frontendImage+"@sha256:fe2.0.0"
	apiAt := func(c, img string) rollout.Observed {
		return rollout.Observed{Cluster: c, Member: "shop-api", Workload: true, Canary: true, Primary: rev, PrimaryImage: img, Rendered: apiImg}
	}
	feAt := func(c, img string) rollout.Observed {
		o := rollout.Observed{Cluster: c, Member: "shop-frontend", Workload: true, Canary: true, Primary: img, PrimaryImage: img}
		o.Rendered = rollout.MemberExpected(o, frontend("2.0.0"))
		return o
	}
	judged := func(members ...rollout.Observed) rollout.Observed { return rollout.SetObserved(members) }
	cur := func(c string) rollout.ClusterCheck {
		return rollout.ClusterCheck{Cluster: c, State: rollout.CheckCurrent, Image: rev, Member: "shop-api"}
	}
	apiDrift := rollout.ClusterCheck{Cluster: "c2", State: rollout.CheckDrifted, Image: hand, Member: "shop-api",
		Reason: "shop-api: the primary runs " + hand + ", not " + apiImg + ", which the validated main@1111111 (" + c1 + ") renders"}
	feDrift := rollout.ClusterCheck{Cluster: "c2", State: rollout.CheckDrifted, Image: feHand, Member: "shop-frontend",
		Reason: "shop-frontend: the primary runs " + feHand + ", not " + feRef + ", its version in the validated " + deployed.Tag() + " (" + deployed.Digest() + ")"}
	tests := []struct {
		name string
		app  config.Application
		obs  []rollout.Observed
		want rollout.Reconciliation
	}{
		{name: "every member current", app: set,
			obs:  []rollout.Observed{judged(apiAt("c1", apiImg), feAt("c1", feRef)), judged(apiAt("c2", apiImg), feAt("c2", feRef))},
			want: rollout.Reconciliation{Clusters: []rollout.ClusterCheck{cur("c1"), cur("c2")}}},
		{name: "the git member's primary changed by hand: drift against the commit, reverted", app: set,
			obs:  []rollout.Observed{judged(apiAt("c1", apiImg), feAt("c1", feRef)), judged(apiAt("c2", hand), feAt("c2", feRef))},
			want: rollout.Reconciliation{Drifted: []string{"c2"}, Revert: []string{"c2"}, Clusters: []rollout.ClusterCheck{cur("c1"), apiDrift}}},
		{name: "the image member's primary changed by hand: drift against its entry, reported", app: report,
			obs:  []rollout.Observed{judged(apiAt("c1", apiImg), feAt("c1", feRef)), judged(apiAt("c2", apiImg), feAt("c2", feHand))},
			want: rollout.Reconciliation{Drifted: []string{"c2"}, Clusters: []rollout.ClusterCheck{cur("c1"), feDrift}}},
		{name: "the git member empty, its workload gone too: caught up, its render creates it", app: set,
			obs: []rollout.Observed{judged(apiAt("c1", apiImg), feAt("c1", feRef)), judged(rollout.Observed{Cluster: "c2", Member: "shop-api"}, feAt("c2", feRef))},
			want: rollout.Reconciliation{CatchUp: []string{"c2"}, Clusters: []rollout.ClusterCheck{cur("c1"), {Cluster: "c2", State: rollout.CheckCatchUp, Member: "shop-api",
				Reason: "shop-api: no canary or primary: the cluster is new to the application, or came back empty"}}}},
		{name: "the image member empty without its workload: only reported", app: set,
			obs: []rollout.Observed{judged(apiAt("c1", apiImg), feAt("c1", feRef)), judged(apiAt("c2", apiImg), rollout.Observed{Cluster: "c2", Member: "shop-frontend"})},
			want: rollout.Reconciliation{Clusters: []rollout.ClusterCheck{cur("c1"), {Cluster: "c2", State: rollout.CheckNoWorkload, Member: "shop-frontend",
				Reason: "shop-frontend: no workload to set the image of"}}}},
		{name: "a cluster that entered the waves with the frontend on another image: caught up", app: set,
			obs: []rollout.Observed{judged(apiAt("c1", apiImg), feAt("c1", feRef)), judged(apiAt("c3", apiImg), feAt("c3", feHand))},
			want: rollout.Reconciliation{CatchUp: []string{"c3"}, Clusters: []rollout.ClusterCheck{cur("c1"), {Cluster: "c3", State: rollout.CheckCatchUp, Image: feHand, Member: "shop-frontend",
				Reason: "shop-frontend: entered the waves after " + deployed.Tag() + " was rolled out: runs " + feHand + ", the set's version has " + feRef}}}},
		{name: "a cluster that entered the waves with the api on another image: caught up", app: set,
			obs: []rollout.Observed{judged(apiAt("c1", apiImg), feAt("c1", feRef)), judged(apiAt("c3", hand), feAt("c3", feRef))},
			want: rollout.Reconciliation{CatchUp: []string{"c3"}, Clusters: []rollout.ClusterCheck{cur("c1"), {Cluster: "c3", State: rollout.CheckCatchUp, Image: rev, Member: "shop-api",
				Reason: "shop-api: entered the waves after main@1111111 was rolled out: runs " + hand + ", the commit renders " + apiImg}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rollout.Reconcile(reconcileFleet(), tt.app, st, nil, tt.obs, nil)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Reconcile (-want +got):\n%s", diff)
			}
		})
	}
}

// The catch-up or revert of a set of git and image members carries the
// deployed tuple, as its Versions and PreviousVersions: its run applies
// the git members at the tuple's commit and each image member at its
// entry (deliver's setCommit needs the git entries).
func TestPlanReconcileMixedSet(t *testing.T) {
	set, _, _, _ := mixedSet()
	deployed := mixed(c1, "2.0.0")
	st := rollout.AppState{DeployedTag: deployed.Tag(), DeployedDigest: deployed.Digest(), DeployedVersions: deployed, DeployedClusters: []string{"c1", "c2"}}
	for _, kind := range []string{rollout.KindCatchUp, rollout.KindDriftRevert} {
		req := events.ReconcileRequested{Application: "shop", Kind: kind, Image: "shop", Tag: deployed.Tag(), Digest: deployed.Digest(), Clusters: []string{"c3"}, Reason: "r"}
		got, skip := rollout.PlanReconcile(reconcileFleet(), set, st, nil, req, "id")
		if skip != "" {
			t.Fatalf("%s skipped: %s", kind, skip)
		}
		want := rollout.Rollout{ID: "id", Application: "shop", Image: "shop", Tag: deployed.Tag(), Digest: deployed.Digest(), Phase: rollout.Progressing,
			PreviousTag: deployed.Tag(), PreviousDigest: deployed.Digest(), Kind: kind, Reason: "r", Members: []string{"shop-migrate", "shop-api", "shop-frontend"},
			Versions: deployed, PreviousVersions: deployed, Waves: []rollout.Wave{{Name: "b", Clusters: []rollout.Cluster{{Name: "c3", Phase: rollout.ClusterPending}}}}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("PlanReconcile of a %s (-want +got):\n%s", kind, diff)
		}
	}
}
