package reconcile_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/reconcile"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// workloads is what each cluster runs of each workload, as a Reader; a
// workload missing is unreadable.
type workloads struct {
	mu   sync.Mutex
	runs map[string]rollout.Observed // by cluster/workload
}

func (w *workloads) Observe(_ context.Context, cluster, _ string, wl config.Workload) (rollout.Observed, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o, ok := w.runs[cluster+"/"+wl.Name]
	if !ok {
		return o, errors.New("connection refused")
	}
	return o, nil
}

func (w *workloads) set(key string, o rollout.Observed) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.runs[key] = o
}

// memberImages renders each member's image of the commit, the same in
// every cluster.
type memberImages map[string]string

func (m memberImages) WorkloadImage(_ context.Context, app config.Application, _, _ string) (string, error) {
	img, ok := m[app.Name]
	if !ok {
		return "", errors.New("renders no Deployment ns/" + app.Name)
	}
	return img, nil
}

const (
	setCommit = "0123456789abcdef0123456789abcdef01234567"
	setRev    = "https://git.test/deploy.git@" + setCommit
	apiImage  = "reg.test/shop-api:1.0.0"
	webImage  = "reg.test/shop-frontend:1.0.0"
	handImage = "reg.test/shop-frontend:6.6.6"
)

// shopConfig is release set shop (its application as Load builds it: the
// lead shop-api, driftPolicy revert) of a migration Job, an api and a
// frontend, over the tests' fleet.
func shopConfig() *config.Config {
	git := func(path string) *config.Source {
		return &config.Source{Git: &config.GitSource{URL: "https://git.test/deploy.git", Branch: "main", Paths: []string{path}}}
	}
	member := func(name, kind string) config.Application {
		return config.Application{Name: name, Namespace: "ns", Workload: config.Workload{Kind: kind, Name: name}, Source: git(name), MemberOf: "shop"}
	}
	set := config.Application{Name: "shop", Namespace: "ns", Workload: config.Workload{Name: "shop-api"}, Source: git("shop-api"),
		DriftPolicy: config.DriftPolicyRevert, Set: &config.SetSpec{Members: []config.SetMember{{Name: "shop-migrate", Job: true}, {Name: "shop-api"}, {Name: "shop-frontend"}}}}
	return &config.Config{
		Fleet: fleet(),
		Applications: []config.Application{
			member("shop-migrate", config.KindJob), member("shop-api", ""), member("shop-frontend", ""), set,
		},
	}
}

// current is a member's canary and primary on the set's commit.
func current(cluster, image string) rollout.Observed {
	return rollout.Observed{Cluster: cluster, Workload: true, Canary: true, Primary: setRev, PrimaryImage: image}
}

// A release set is checked as one: each member with a canary read in
// every cluster (the Job member never: it has no canary), a cluster
// judged by its first member not current there. The frontend's primary
// changed by hand in c2 is the set's drift (journaled naming the member,
// reverted with the set's commit, as the set's driftPolicy says); the
// frontend's canary missing in c3 catches the whole set up there; a
// member's own check is its set's.
func TestCheckReleaseSet(t *testing.T) {
	s, repo := newRepo(t)
	ws := &workloads{runs: map[string]rollout.Observed{}}
	for _, c := range []string{"c1", "c2", "c3"} {
		ws.set(c+"/shop-api", current(c, apiImage))
		ws.set(c+"/shop-frontend", current(c, webImage))
	}
	hand := current("c2", handImage)
	hand.Generation = 4
	ws.set("c2/shop-frontend", hand)
	ws.set("c3/shop-frontend", rollout.Observed{Cluster: "c3", Workload: true})
	if err := repo.UpdateApp(t.Context(), "shop", func(st *rollout.AppState) error {
		st.DeployedTag, st.DeployedDigest, st.DeployedClusters = "main@0123456789ab", setCommit, []string{"c1", "c2", "c3"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	j := journal{s}
	r, err := reconcile.New(shopConfig(), ws, repo, j, reconcile.Options{
		Render: memberImages{"shop-api": apiImage, "shop-frontend": webImage}, Now: func() time.Time { return t0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	var rec rollout.Reconciliation
	for range 2 {
		if rec, err = r.Check(t.Context(), "shop"); err != nil {
			t.Fatal(err)
		}
	}
	type found struct {
		CatchUp, Drifted, Revert []string
		Checks                   []rollout.ClusterCheck
	}
	want := found{CatchUp: []string{"c3"}, Drifted: []string{"c2"}, Revert: []string{"c2"}, Checks: []rollout.ClusterCheck{
		{Cluster: "c1", State: rollout.CheckCurrent, Image: setRev, Member: "shop-api"},
		{Cluster: "c2", State: rollout.CheckDrifted, Image: handImage, Generation: 4, Member: "shop-frontend",
			Reason: "shop-frontend: the primary runs " + handImage + ", not " + webImage + ", which the validated main@0123456789ab (" + setCommit + ") renders"},
		{Cluster: "c3", State: rollout.CheckCatchUp, Member: "shop-frontend",
			Reason: "shop-frontend: no canary or primary: the cluster is new to the application, or came back empty"},
	}}
	if diff := cmp.Diff(want, found{rec.CatchUp, rec.Drifted, rec.Revert, rec.Clusters}); diff != "" {
		t.Errorf("the set's check (-want +got):\n%s", diff)
	}
	wantJournal := []string{"drift.detected c2 " + handImage + " revert", "reconcile.requested catch-up c3", "reconcile.requested drift-revert c2"}
	if diff := cmp.Diff(wantJournal, sortedAfterFirst(j.types(t))); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	recs, err := s.Read(t.Context(), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	type entry struct{ Type, Application, Member string }
	var got []entry
	for _, rc := range recs {
		e := entry{Type: rc.Event.Type()}
		switch e.Type {
		case events.TypeDriftDetected:
			p, _ := events.Decode[events.DriftDetected](rc.Event)
			e.Application, e.Member = p.Application, p.Member
		case events.TypeReconcileRequested:
			p, _ := events.Decode[events.ReconcileRequested](rc.Event)
			e.Application = p.Application
		}
		got = append(got, e)
	}
	wantEntries := []entry{{events.TypeDriftDetected, "shop", "shop-frontend"}, {events.TypeReconcileRequested, "shop", ""}, {events.TypeReconcileRequested, "shop", ""}}
	if diff := cmp.Diff(wantEntries, got); diff != "" {
		t.Errorf("journaled for (-want +got):\n%s", diff)
	}

	// The api's primary changed by hand in c2 as well: the first member
	// not current is the api, a new drift (another member's primary).
	ws.set("c2/shop-api", rollout.Observed{Cluster: "c2", Workload: true, Canary: true, Primary: setRev, PrimaryImage: "reg.test/shop-api:0.9.0", Generation: 4})
	if rec, err = r.Check(t.Context(), "shop"); err != nil {
		t.Fatal(err)
	}
	if rec.Clusters[1].Member != "shop-api" || len(j.types(t)) != 5 {
		t.Errorf("the api drifted too: c2 judged by %q, journal %v; want shop-api, a second drift and revert", rec.Clusters[1].Member, j.types(t))
	}

	for _, m := range []string{"shop-api", "shop-migrate"} {
		rec, err := r.Check(t.Context(), m)
		if err != nil {
			t.Fatal(err)
		}
		if want := "a member of release set shop: checked with its set"; rec.Skip != want {
			t.Errorf("Check(%s) skipped %q, want %q", m, rec.Skip, want)
		}
	}
}

// sortedAfterFirst sorts all but the first entry (the requests are
// journaled in no set order).
func sortedAfterFirst(s []string) []string {
	if len(s) > 1 {
		slices.Sort(s[1:])
	}
	return s
}

// A member's primary changed (the watch cache's event names the member's
// workload) checks its set within the settle time.
func TestChangedMemberChecksItsSet(t *testing.T) {
	s, repo := newRepo(t)
	cfg := shopConfig()
	cfg.Fleet.Reconcile = config.Reconcile{Interval: &config.Duration{Duration: time.Hour}}
	ws := &workloads{runs: map[string]rollout.Observed{}}
	for _, c := range []string{"c1", "c2", "c3"} {
		ws.set(c+"/shop-api", current(c, apiImage))
		ws.set(c+"/shop-frontend", current(c, webImage))
	}
	if err := repo.UpdateApp(t.Context(), "shop", func(st *rollout.AppState) error {
		st.DeployedTag, st.DeployedDigest = "main@0123456789ab", setCommit
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	j := journal{s}
	r, err := reconcile.New(cfg, ws, repo, j, reconcile.Options{Settle: 10 * time.Millisecond, Render: memberImages{"shop-api": apiImage, "shop-frontend": webImage}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	time.Sleep(100 * time.Millisecond) // the first check, at start: current
	if got := j.types(t); len(got) != 0 {
		t.Fatalf("the first check journaled %v, want nothing", got)
	}
	ws.set("c1/shop-frontend", current("c1", handImage))
	r.Changed("c1", "ns", "shop-frontend")
	deadline := time.Now().Add(5 * time.Second)
	for !slices.ContainsFunc(j.types(t), func(s string) bool { return strings.HasPrefix(s, "drift.detected c1 "+handImage) }) {
		if time.Now().After(deadline) {
			t.Fatalf("no drift journaled 5 s after the frontend's primary changed: %v", j.types(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

const (
	setAPI      = "reg.test/shop/api"
	setFrontend = "reg.test/shop/frontend"
)

// imageShopConfig is release set shop of image members (its application
// as Load builds it: no source, the lead shop-api, driftPolicy revert): an
// api, a frontend and a worker no rollout of the set carried yet.
func imageShopConfig() *config.Config {
	member := func(name, img string) config.Application {
		return config.Application{Name: name, Image: img, Namespace: "ns", Workload: config.Workload{Kind: config.KindDeployment, Name: name}, MemberOf: "shop"}
	}
	set := config.Application{Name: "shop", Namespace: "ns", Workload: config.Workload{Kind: config.KindDeployment, Name: "shop-api"},
		DriftPolicy: config.DriftPolicyRevert, Set: &config.SetSpec{Members: []config.SetMember{{Name: "shop-api"}, {Name: "shop-frontend"}, {Name: "shop-worker"}}}}
	return &config.Config{Fleet: fleet(), Applications: []config.Application{
		member("shop-api", setAPI), member("shop-frontend", setFrontend), member("shop-worker", "reg.test/shop/worker"), set,
	}}
}

// pinned is an image member's canary and primary as the set's run leaves
// them: the member's image pinned at its digest, as its revision too.
func pinned(cluster, ref string) rollout.Observed {
	return rollout.Observed{Cluster: cluster, Workload: true, Canary: true, Primary: ref, PrimaryImage: ref}
}

// A release set of image members is held against its deployed tuple: each
// member's primary against its own entry (its image and digest), never
// the tuple's hash, so a fresh set is current everywhere (no false drift);
// a member with no entry is not read at all (the worker: reading it would
// fail). The frontend's primary changed by hand in c2 is the set's drift,
// naming the member, reverted as the set's driftPolicy says; c3, which
// entered the set's waves and has no canaries yet, is caught up: a
// catch-up rollout of the set applying the deployed tuple there.
func TestCheckImageSet(t *testing.T) {
	s, repo := newRepo(t)
	cfg := imageShopConfig()
	set, _ := cfg.Application("shop")
	deployed := rollout.SetVersion{
		{Application: "shop-api", Image: setAPI, Tag: "1.1.0", Digest: "sha256:a110"},
		{Application: "shop-frontend", Image: setFrontend, Tag: "1.0.0", Digest: "sha256:f100"},
	}
	apiRef, webRef := setAPI+"@sha256:a110", setFrontend+"@sha256:f100"
	ws := &workloads{runs: map[string]rollout.Observed{}}
	for _, c := range []string{"c1", "c2", "c3"} {
		ws.set(c+"/shop-api", pinned(c, apiRef))
		ws.set(c+"/shop-frontend", pinned(c, webRef))
	}
	// Another spelling of the api's digest is running it too.
	tagged := setAPI + ":1.1.0@sha256:a110"
	ws.set("c1/shop-api", pinned("c1", tagged))
	if err := repo.UpdateApp(t.Context(), "shop", func(st *rollout.AppState) error {
		st.DeployedTag, st.DeployedDigest, st.DeployedVersions = deployed.Tag(), deployed.Digest(), deployed
		st.DeployedClusters = []string{"c1", "c2"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	j := journal{s}
	r, err := reconcile.New(cfg, ws, repo, j, reconcile.Options{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := r.Check(t.Context(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rec.Clusters {
		if c.State != rollout.CheckCurrent || c.Member != "shop-api" || c.Reason != "" {
			t.Errorf("fresh set: %+v, want current (judged by its first member, no reason)", c)
		}
	}
	if len(rec.Clusters) != 3 || len(j.types(t)) != 0 {
		t.Fatalf("fresh set: %d clusters checked, journal %v; want 3, nothing journaled", len(rec.Clusters), j.types(t))
	}

	hand := pinned("c2", setFrontend+":6.6.6")
	hand.Generation = 4
	ws.set("c2/shop-frontend", hand)
	ws.set("c3/shop-api", rollout.Observed{Cluster: "c3", Workload: true})
	ws.set("c3/shop-frontend", rollout.Observed{Cluster: "c3", Workload: true})
	if rec, err = r.Check(t.Context(), "shop"); err != nil {
		t.Fatal(err)
	}
	type found struct {
		CatchUp, Drifted, Revert []string
		Checks                   []rollout.ClusterCheck
	}
	want := found{CatchUp: []string{"c3"}, Drifted: []string{"c2"}, Revert: []string{"c2"}, Checks: []rollout.ClusterCheck{
		{Cluster: "c1", State: rollout.CheckCurrent, Image: tagged, Member: "shop-api"},
		{Cluster: "c2", State: rollout.CheckDrifted, Image: setFrontend + ":6.6.6", Generation: 4, Member: "shop-frontend",
			Reason: "shop-frontend: the primary runs " + setFrontend + ":6.6.6, not " + webRef + ", its version in the validated " + deployed.Tag() + " (" + deployed.Digest() + ")"},
		{Cluster: "c3", State: rollout.CheckCatchUp, Member: "shop-api",
			Reason: "shop-api: no canary or primary: the cluster is new to the application, or came back empty"},
	}}
	if diff := cmp.Diff(want, found{rec.CatchUp, rec.Drifted, rec.Revert, rec.Clusters}); diff != "" {
		t.Errorf("the set's check (-want +got):\n%s", diff)
	}
	wantJournal := []string{"drift.detected c2 " + setFrontend + ":6.6.6 revert", "reconcile.requested catch-up c3", "reconcile.requested drift-revert c2"}
	if diff := cmp.Diff(wantJournal, sortedAfterFirst(j.types(t))); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}

	// The catch-up's request plans a rollout of the set carrying the
	// deployed tuple (its run applies every member with an entry) to c3.
	recs, err := s.Read(t.Context(), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var catchUp events.ReconcileRequested
	var subject string
	for _, rc := range recs {
		if p, err := events.Decode[events.ReconcileRequested](rc.Event); err == nil && rc.Event.Type() == events.TypeReconcileRequested && p.Kind == rollout.KindCatchUp {
			catchUp, subject = p, rc.Event.Subject()
		}
		if p, err := events.Decode[events.DriftDetected](rc.Event); err == nil && rc.Event.Type() == events.TypeDriftDetected && p.Member != "shop-frontend" {
			t.Errorf("drift.detected names member %q, want shop-frontend", p.Member)
		}
	}
	if catchUp.Application != "shop" || catchUp.Image != "shop" || subject != setAPI+"@"+deployed.Digest() {
		t.Errorf("catch-up request of %q, image %q, subject %q; want the set's, its image the set, keyed with the api's pushes", catchUp.Application, catchUp.Image, subject)
	}
	st, err := repo.App(t.Context(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	ro, skip := rollout.PlanReconcile(cfg, set, st, nil, catchUp, "cu")
	if skip != "" {
		t.Fatalf("PlanReconcile skipped: %s", skip)
	}
	var clusters []string
	for _, w := range ro.Waves {
		for _, c := range w.Clusters {
			clusters = append(clusters, c.Name)
		}
	}
	if diff := cmp.Diff([]any{rollout.KindCatchUp, deployed, deployed, []string{"c3"}}, []any{ro.Kind, ro.Versions, ro.PreviousVersions, clusters}); diff != "" {
		t.Errorf("the catch-up rollout (-want +got):\n%s", diff)
	}
}

// atCommit renders each member's image of commit alone, the same in every
// cluster: asked of another commit (the tuple's hash), it renders nothing.
type atCommit struct {
	commit string
	images map[string]string
}

func (a atCommit) WorkloadImage(_ context.Context, app config.Application, _, commit string) (string, error) {
	img, ok := a.images[app.Name]
	if !ok || commit != a.commit {
		return "", errors.New("commit " + commit + " renders no Deployment ns/" + app.Name)
	}
	return img, nil
}

// mixedShopConfig is shopConfig's set with the frontend an image member
// (config.SetMember.Image): the Job and the api rendered from the
// repository, the frontend's image the registry's, driftPolicy revert.
func mixedShopConfig() *config.Config {
	cfg := shopConfig()
	for i, a := range cfg.Applications {
		switch a.Name {
		case "shop-frontend":
			cfg.Applications[i].Source, cfg.Applications[i].Image = nil, setFrontend
			cfg.Applications[i].Workload.Kind = config.KindDeployment
		case "shop":
			cfg.Applications[i].Set.Members[2].Image = setFrontend
		}
	}
	return cfg
}

// A release set of git and image members is held against its deployed
// tuple member by member: the api (a git member) against what the tuple's
// commit renders for it, the frontend (an image member) against its entry
// (its image at its digest). So a fresh set is current everywhere.
// Then the api's primary changed by hand in c1 and the frontend's in c2
// are the set's drift, each naming its member and reverted by one
// drift-revert of the deployed tuple; c3, whose api canary went, is
// caught up with it (every member: its run applies the api at the commit
// and the frontend at its entry). Catches the check skipping such a set;
// the frontend rendered from the repository (it has no manifest there:
// never compared, its drift unseen) or held against the tuple's hash
// (drifted everywhere); the api rendered at the tuple's hash (which no
// commit is: never compared); a catch-up or revert that carries no tuple
// (its run would name no commit).
func TestCheckMixedSet(t *testing.T) {
	s, repo := newRepo(t)
	cfg := mixedShopConfig()
	set, _ := cfg.Application("shop")
	commit := rollout.MemberVersion{Image: "https://git.test/deploy.git", Tag: "main@0123456789ab", Digest: setCommit}
	deployed := rollout.SetVersion{
		{Application: "shop-frontend", Image: setFrontend, Tag: "2.0.0", Digest: "sha256:f200"},
	}.WithCommit(set, commit)
	webRef := setFrontend + "@sha256:f200"
	ws := &workloads{runs: map[string]rollout.Observed{}}
	for _, c := range []string{"c1", "c2", "c3"} {
		ws.set(c+"/shop-api", current(c, apiImage))
		ws.set(c+"/shop-frontend", pinned(c, webRef))
	}
	if err := repo.UpdateApp(t.Context(), "shop", func(st *rollout.AppState) error {
		st.DeployedTag, st.DeployedDigest, st.DeployedVersions = deployed.Tag(), deployed.Digest(), deployed
		st.DeployedClusters = []string{"c1", "c2", "c3"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	j := journal{s}
	r, err := reconcile.New(cfg, ws, repo, j, reconcile.Options{
		Render: atCommit{commit: setCommit, images: map[string]string{"shop-api": apiImage}}, Now: func() time.Time { return t0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := r.Check(t.Context(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	fresh := []rollout.ClusterCheck{
		{Cluster: "c1", State: rollout.CheckCurrent, Image: setRev, Member: "shop-api"},
		{Cluster: "c2", State: rollout.CheckCurrent, Image: setRev, Member: "shop-api"},
		{Cluster: "c3", State: rollout.CheckCurrent, Image: setRev, Member: "shop-api"},
	}
	if diff := cmp.Diff(fresh, rec.Clusters); diff != "" || rec.Skip != "" {
		t.Errorf("fresh set: skip %q, checks (-want +got):\n%s", rec.Skip, diff)
	}
	if got := j.types(t); len(got) > 0 {
		t.Fatalf("fresh set: journaled %v, want nothing", got)
	}

	apiHand := current("c1", "reg.test/shop-api:6.6.6")
	apiHand.Generation = 3
	ws.set("c1/shop-api", apiHand)
	webHand := pinned("c2", setFrontend+":6.6.6")
	webHand.Generation = 4
	ws.set("c2/shop-frontend", webHand)
	ws.set("c3/shop-api", rollout.Observed{Cluster: "c3", Workload: true})
	if rec, err = r.Check(t.Context(), "shop"); err != nil {
		t.Fatal(err)
	}
	type found struct {
		CatchUp, Drifted, Revert []string
		Checks                   []rollout.ClusterCheck
	}
	want := found{CatchUp: []string{"c3"}, Drifted: []string{"c1", "c2"}, Revert: []string{"c1", "c2"}, Checks: []rollout.ClusterCheck{
		{Cluster: "c1", State: rollout.CheckDrifted, Image: "reg.test/shop-api:6.6.6", Generation: 3, Member: "shop-api",
			Reason: "shop-api: the primary runs reg.test/shop-api:6.6.6, not " + apiImage + ", which the validated main@0123456789ab (" + setCommit + ") renders"},
		{Cluster: "c2", State: rollout.CheckDrifted, Image: setFrontend + ":6.6.6", Generation: 4, Member: "shop-frontend",
			Reason: "shop-frontend: the primary runs " + setFrontend + ":6.6.6, not " + webRef + ", its version in the validated " + deployed.Tag() + " (" + deployed.Digest() + ")"},
		{Cluster: "c3", State: rollout.CheckCatchUp, Member: "shop-api",
			Reason: "shop-api: no canary or primary: the cluster is new to the application, or came back empty"},
	}}
	if diff := cmp.Diff(want, found{rec.CatchUp, rec.Drifted, rec.Revert, rec.Clusters}); diff != "" {
		t.Errorf("the set's check (-want +got):\n%s", diff)
	}
	wantJournal := []string{
		"drift.detected c1 reg.test/shop-api:6.6.6 revert", "drift.detected c2 " + setFrontend + ":6.6.6 revert",
		"reconcile.requested catch-up c3", "reconcile.requested drift-revert c1,c2",
	}
	if diff := cmp.Diff(wantJournal, slices.Sorted(slices.Values(j.types(t)))); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}

	// Each request plans a rollout of the set carrying the deployed tuple
	// (its run applies the api at the commit, the frontend at its entry),
	// named after the set and keyed with the repository's pushes.
	recs, err := s.Read(t.Context(), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	type planned struct {
		Kind, Image, Subject       string
		Versions, PreviousVersions rollout.SetVersion
		Clusters                   []string
	}
	var got []planned
	for _, rc := range recs {
		if rc.Event.Type() != events.TypeReconcileRequested {
			if p, err := events.Decode[events.DriftDetected](rc.Event); err == nil && p.Application != "shop" {
				t.Errorf("drift.detected of %q, want the set's", p.Application)
			}
			continue
		}
		req, err := events.Decode[events.ReconcileRequested](rc.Event)
		if err != nil {
			t.Fatal(err)
		}
		st, err := repo.App(t.Context(), "shop")
		if err != nil {
			t.Fatal(err)
		}
		ro, skip := rollout.PlanReconcile(cfg, set, st, nil, req, "id")
		if skip != "" {
			t.Fatalf("PlanReconcile of the %s skipped: %s", req.Kind, skip)
		}
		p := planned{Kind: ro.Kind, Image: ro.Image, Subject: rc.Event.Subject(), Versions: ro.Versions, PreviousVersions: ro.PreviousVersions}
		for _, w := range ro.Waves {
			for _, c := range w.Clusters {
				p.Clusters = append(p.Clusters, c.Name)
			}
		}
		got = append(got, p)
	}
	slices.SortFunc(got, func(a, b planned) int { return strings.Compare(a.Kind, b.Kind) })
	subject := "https://git.test/deploy.git#" + deployed.Digest()
	wantPlanned := []planned{
		{Kind: rollout.KindCatchUp, Image: "shop", Subject: subject, Versions: deployed, PreviousVersions: deployed, Clusters: []string{"c3"}},
		{Kind: rollout.KindDriftRevert, Image: "shop", Subject: subject, Versions: deployed, PreviousVersions: deployed, Clusters: []string{"c1", "c2"}},
	}
	if diff := cmp.Diff(wantPlanned, got); diff != "" {
		t.Errorf("the rollouts requested (-want +got):\n%s", diff)
	}
}
