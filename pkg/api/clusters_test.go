package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/gates"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// healthOf answers a fixed health per cluster.
type healthOf map[string]api.ClusterHealth

func (h healthOf) Health(_ context.Context, name string) api.ClusterHealth { return h[name] }

// serveRollouts serves the API over a real store holding ros, created in
// order (the last is the newest).
func serveRollouts(t *testing.T, ros []rollout.Rollout, configure func(*api.API)) *httptest.Server {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	repo := embedded.NewRepo(s, nil)
	for _, ro := range ros {
		phase := ro.Phase
		ro.Phase = rollout.Progressing
		if _, err := repo.Create(t.Context(), ro); err != nil {
			t.Fatal(err)
		}
		if phase.Done() { // finished: archived
			if _, err := repo.Update(t.Context(), ro.ID, func(r *rollout.Rollout) error { r.Phase = phase; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Millisecond)
	}
	a := api.New(repo, gates.NewStoreApprovals(s), s, nil)
	configure(a)
	return serve(t, a, map[string]string{"ops": token})
}

// One application's rollouts are paged as the list is: its rollouts in
// flight, then its finished ones, newest first, ?limit= at a time, the
// next page named by a Link that keeps the application.
func TestListOneApplicationsRollouts(t *testing.T) {
	var ros []rollout.Rollout
	for i := range 7 {
		app := "shop"
		if i%2 == 1 {
			app = "cart"
		}
		ros = append(ros, rollout.Rollout{ID: fmt.Sprintf("r%d", i), Application: app, Phase: rollout.Succeeded})
	}
	ros = append(ros, rollout.Rollout{ID: "r7", Application: "shop", Phase: rollout.Progressing},
		rollout.Rollout{ID: "r8", Application: "cart", Phase: rollout.Progressing})
	srv := serveRollouts(t, ros, func(a *api.API) { a.WithApplications("shop", "cart") })
	var pages [][]string
	next := "/api/v1/rollouts?application=shop&limit=2"
	for next != "" && len(pages) < 10 {
		status, h, body := call(t, srv, "GET", next, token, "")
		if status != 200 {
			t.Fatalf("GET %s = %d %s", next, status, body)
		}
		var got []rollout.Rollout
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range got {
			ids = append(ids, r.ID)
		}
		pages = append(pages, ids)
		next = ""
		if link := h.Get("Link"); link != "" {
			next, _, _ = strings.Cut(strings.TrimPrefix(link, "<"), ">")
			if !strings.Contains(next, "application=shop") {
				t.Errorf("Link %q lost the application", link)
			}
		}
	}
	want := [][]string{{"r7", "r6", "r4"}, {"r2", "r0"}, nil}
	if diff := cmp.Diff(want, pages); diff != "" {
		t.Errorf("pages (-want +got):\n%s", diff)
	}
	if status, _, body := call(t, srv, "GET", "/api/v1/rollouts?application=nope", token, ""); status != http.StatusNotFound {
		t.Errorf("an unknown application = %d %s, want 404", status, body)
	}
}

// GET /api/v1/clusters says each cluster's health beside what it runs.
func TestClustersSayTheirHealth(t *testing.T) {
	at := time.Date(2026, 11, 28, 22, 0, 0, 0, time.UTC)
	health := healthOf{
		"c1": {Reachable: true, Kubernetes: "v1.34.1", Flagger: "Ready", Canaries: 2, Checked: at},
		"c2": {Flagger: "Unknown", Detail: "reaching the API server: connection refused", Checked: at},
	}
	srv := serveRollouts(t, nil, func(a *api.API) {
		a.WithClusters(api.ClusterInfo{Name: "c1"}, api.ClusterInfo{Name: "c2"}).WithHealth(health)
	})
	status, _, body := call(t, srv, "GET", "/api/v1/clusters", token, "")
	if status != 200 {
		t.Fatalf("GET /api/v1/clusters = %d %s", status, body)
	}
	var got []api.ClusterView
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	h1, h2 := health["c1"], health["c2"]
	want := []api.ClusterView{
		{Name: "c1", Applications: map[string]api.Running{}, Health: &h1},
		{Name: "c2", Applications: map[string]api.Running{}, Health: &h2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
}

// The fleet view says, per application and cluster, what the latest check
// against the validated digest found: a drift, a cluster to catch up; not
// a check held against a digest no longer validated, nor one a rollout
// that succeeded on the cluster since made current. A rollout in flight
// that no push started says its kind.
func TestFleetViewDrift(t *testing.T) {
	since := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	clusters := []api.ClusterInfo{{Name: "c1"}, {Name: "c2"}, {Name: "c3"}}
	ok := func(name string, at time.Time) rollout.Cluster {
		return rollout.Cluster{Name: name, Phase: rollout.ClusterSucceeded, Updated: at}
	}
	v1 := rollout.Rollout{ID: "r1", Application: "shop", Tag: "1.0", Digest: "sha256:1", Phase: rollout.Succeeded,
		Waves: []rollout.Wave{{Clusters: []rollout.Cluster{ok("c1", since.Add(-time.Hour)), ok("c2", since.Add(-time.Hour))}}}}
	drifted := rollout.ClusterCheck{Cluster: "c2", State: rollout.CheckDrifted, Image: "reg/shop:0.9", Generation: 3, Reason: "the primary runs reg/shop:0.9"}
	catchUp := rollout.ClusterCheck{Cluster: "c3", State: rollout.CheckCatchUp, Reason: "entered the waves after 1.0 was rolled out"}
	state := func(digest string, cs ...rollout.ClusterCheck) map[string]rollout.AppState {
		return map[string]rollout.AppState{"shop": {DeployedTag: "1.0", DeployedDigest: "sha256:1",
			Drift: &rollout.DriftStatus{Digest: digest, Tag: "1.0", Since: since, Clusters: cs}}}
	}
	drift := func(c rollout.ClusterCheck) *api.Drift {
		return &api.Drift{State: c.State, Image: c.Image, Reason: c.Reason, Tag: "1.0", Digest: "sha256:1", Since: since}
	}
	took := api.Running{Tag: "1.0", Digest: "sha256:1", Rollout: "r1"}
	for _, tc := range []struct {
		name string
		ros  []rollout.Rollout
		apps map[string]rollout.AppState
		want map[string]api.Running // by cluster, of shop
	}{
		{"drifted, and new to the waves", []rollout.Rollout{v1}, state("sha256:1", drifted, catchUp),
			map[string]api.Running{"c1": took, "c2": {Tag: "1.0", Digest: "sha256:1", Rollout: "r1", Drift: drift(drifted)}, "c3": {Drift: drift(catchUp)}}},
		{"held against a digest no longer validated", []rollout.Rollout{v1}, state("sha256:0", drifted),
			map[string]api.Running{"c1": took, "c2": took}},
		{"no check yet", []rollout.Rollout{v1}, nil, map[string]api.Running{"c1": took, "c2": took}},
		{"reverting, catching up", []rollout.Rollout{
			{ID: "r2", Application: "shop", Tag: "1.0", Digest: "sha256:1", Phase: rollout.Progressing, Kind: rollout.KindDriftRevert,
				Waves: []rollout.Wave{{Clusters: []rollout.Cluster{{Name: "c2", Phase: rollout.ClusterProgressing}, {Name: "c3", Phase: rollout.ClusterPending}}}}}, v1},
			state("sha256:1", drifted, catchUp),
			map[string]api.Running{"c1": took,
				"c2": {Tag: "1.0", Digest: "sha256:1", Rollout: "r1", RollingOut: "1.0", InFlight: "r2", Phase: "Progressing", Kind: rollout.KindDriftRevert, Drift: drift(drifted)},
				"c3": {RollingOut: "1.0", InFlight: "r2", Phase: "Pending", Kind: rollout.KindDriftRevert, Drift: drift(catchUp)}}},
		{"reverted since the check", []rollout.Rollout{
			{ID: "r2", Application: "shop", Tag: "1.0", Digest: "sha256:1", Phase: rollout.Succeeded, Kind: rollout.KindDriftRevert,
				Waves: []rollout.Wave{{Clusters: []rollout.Cluster{ok("c2", since.Add(time.Minute))}}}}, v1},
			state("sha256:1", drifted),
			map[string]api.Running{"c1": took, "c2": {Tag: "1.0", Digest: "sha256:1", Rollout: "r2"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]api.Running{}
			for _, c := range api.FleetView(clusters, tc.ros, tc.apps) {
				if run, ok := c.Applications["shop"]; ok {
					got[c.Name] = run
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// GET /api/v1/clusters reads each application's state for its drift.
func TestClustersSayTheirDrift(t *testing.T) {
	since := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	repo := embedded.NewRepo(s, nil)
	if err := repo.UpdateApp(t.Context(), "shop", func(st *rollout.AppState) error {
		st.DeployedTag, st.DeployedDigest = "1.0", "sha256:1"
		st.Drift = &rollout.DriftStatus{Digest: "sha256:1", Tag: "1.0", Since: since,
			Clusters: []rollout.ClusterCheck{{Cluster: "c1", State: rollout.CheckDrifted, Image: "reg/shop:0.9"}}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, api.New(repo, gates.NewStoreApprovals(s), s, nil).WithClusters(api.ClusterInfo{Name: "c1"}).
		WithApplicationInfos(repo, api.ApplicationInfo{Name: "shop", Kind: api.KindImage}), map[string]string{"ops": token})
	status, _, body := call(t, srv, "GET", "/api/v1/clusters", token, "")
	if status != 200 {
		t.Fatalf("GET /api/v1/clusters = %d %s", status, body)
	}
	var got []api.ClusterView
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	want := []api.ClusterView{{Name: "c1", Applications: map[string]api.Running{
		"shop": {Drift: &api.Drift{State: rollout.CheckDrifted, Image: "reg/shop:0.9", Tag: "1.0", Digest: "sha256:1", Since: since}},
	}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
}

// GET /api/v1/clusters says each cluster's labels, the wave it is in and,
// for a discovered one, where it comes from.
func TestFleetViewWaves(t *testing.T) {
	got := api.FleetView([]api.ClusterInfo{{Name: "c1", Labels: map[string]string{"env": "dev"}, Wave: "canary"},
		{Name: "c2", Source: "fleet.discovery.argocd: Secret argocd/c2"}}, nil, nil)
	want := []api.ClusterView{
		{Name: "c1", Labels: map[string]string{"env": "dev"}, Wave: "canary", Applications: map[string]api.Running{}},
		{Name: "c2", Source: "fleet.discovery.argocd: Secret argocd/c2", Applications: map[string]api.Running{}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FleetView (-want +got):\n%s", diff)
	}
}
