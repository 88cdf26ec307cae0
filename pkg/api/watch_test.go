package api_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
	"github.com/flotilla-cd/flotilla/pkg/testkit/apitest"
	"github.com/flotilla-cd/flotilla/pkg/watch"
)

// newWatchedAPI serves the API with a running hub over a real store
// holding rollout r1.
func newWatchedAPI(t *testing.T) (*apitest.Server, *store.Store, *embedded.Repo) {
	t.Helper()
	srv := apitest.Watched(t, rollout.Rollout{ID: "r1", Application: "shop", Phase: rollout.Progressing,
		Created: time.Now().Add(-time.Minute), Waves: []rollout.Wave{{Name: "all", Clusters: []rollout.Cluster{{Name: "c1"}}}}})
	return &srv, srv.Journal, srv.Repo
}

func appendEvent(t *testing.T, s *store.Store, id, typ, ro string) {
	t.Helper()
	e, err := events.New(id, events.Source, typ, events.ClusterResult{RolloutID: ro, Cluster: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	e.SetExtension(events.ExtRolloutID, ro)
	if _, err := s.Append(t.Context(), e); err != nil {
		t.Fatal(err)
	}
}

func TestWatchStreamsEventsAndRollouts(t *testing.T) {
	srv, s, repo := newWatchedAPI(t)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/api/v1/watch?rollout=r1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	lines := bufio.NewScanner(resp.Body)
	// The stream is open once its first comment arrives.
	for lines.Scan() && lines.Text() != "" {
	}
	if _, err := repo.Update(t.Context(), "r1", func(r *rollout.Rollout) error {
		r.Waves[0].Clusters[0].Phase = rollout.ClusterSucceeded
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	appendEvent(t, s, "other", events.TypeClusterSucceeded, "r2")
	appendEvent(t, s, "e1", events.TypeClusterSucceeded, "r1")
	var got []string
	var kind string
	for len(got) < 2 && lines.Scan() {
		l := lines.Text()
		switch {
		case strings.HasPrefix(l, "event: "):
			kind = strings.TrimPrefix(l, "event: ")
		case strings.HasPrefix(l, "data: "):
			data := strings.TrimPrefix(l, "data: ")
			switch kind {
			case watch.KindEvent:
				var e watch.Entry
				if err := json.Unmarshal([]byte(data), &e); err != nil {
					t.Fatal(err)
				}
				got = append(got, "event "+e.ID)
			case watch.KindRollout:
				var r rollout.Rollout
				if err := json.Unmarshal([]byte(data), &r); err != nil {
					t.Fatal(err)
				}
				got = append(got, "rollout "+r.ID+" "+string(r.Waves[0].Clusters[0].Phase))
			}
		}
	}
	if diff := cmp.Diff([]string{"event e1", "rollout r1 Succeeded"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestTimelineOfARollout(t *testing.T) {
	srv, s, _ := newWatchedAPI(t)
	appendEvent(t, s, "e1", events.TypeClusterApplied, "r1")
	appendEvent(t, s, "x", events.TypeClusterApplied, "r2")
	appendEvent(t, s, "e2", events.TypeClusterSucceeded, "r1")
	var tl watch.TimelineOf
	get(t, srv.URL+"/api/v1/rollouts/r1/events", http.StatusOK, &tl)
	var ids []string
	for _, e := range tl.Events {
		ids = append(ids, e.ID+" "+e.Type)
	}
	if diff := cmp.Diff([]string{"e1 " + events.TypeClusterApplied, "e2 " + events.TypeClusterSucceeded}, ids); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	get(t, srv.URL+"/api/v1/rollouts/nope/events", http.StatusNotFound, nil)
}

func get(t *testing.T, url string, status int, v any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != status {
		t.Fatalf("GET %s: %d, want %d", url, resp.StatusCode, status)
	}
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFleetView(t *testing.T) {
	clusters := []api.ClusterInfo{{Name: "c1", Labels: map[string]string{"env": "prod"}}, {Name: "c2"}, {Name: "c3"}}
	ro := func(id, app, tag string, phase rollout.Phase, cs ...rollout.Cluster) rollout.Rollout {
		return rollout.Rollout{ID: id, Application: app, Tag: tag, Digest: "sha256:" + tag, Phase: phase, PreviousTag: "0.9",
			Waves: []rollout.Wave{{Clusters: cs}}}
	}
	c := func(name string, p rollout.ClusterPhase) rollout.Cluster {
		return rollout.Cluster{Name: name, Phase: p, PreviousImage: "reg/app@sha256:prev"}
	}
	failed := func(c rollout.Cluster) rollout.Cluster { c.Failure = "Flagger's analysis failed"; return c }
	ros := []rollout.Rollout{ // newest first
		ro("r4", "shop", "1.3", rollout.Progressing, c("c1", rollout.ClusterProgressing), c("c2", rollout.ClusterPending)),
		ro("r3", "shop", "1.2", rollout.RolledBack, c("c1", rollout.ClusterReverted), failed(c("c2", rollout.ClusterReverted)), c("c3", rollout.ClusterPending)),
		ro("r2", "shop", "1.1", rollout.Succeeded, c("c1", rollout.ClusterSucceeded), c("c2", rollout.ClusterSucceeded), c("c3", rollout.ClusterSucceeded)),
		ro("r1", "cart", "2.0", rollout.RollbackFailed, c("c2", rollout.ClusterRevertFailed), c("gone", rollout.ClusterSucceeded)),
	}
	want := []api.ClusterView{
		{Name: "c1", Labels: map[string]string{"env": "prod"}, Applications: map[string]api.Running{
			"shop": {Tag: "0.9", Digest: "sha256:prev", Rollout: "r3", RollingOut: "1.3", InFlight: "r4", Phase: "Progressing", State: api.StateReverted},
		}},
		{Name: "c2", Applications: map[string]api.Running{
			"shop": {Tag: "0.9", Digest: "sha256:prev", Rollout: "r3", RollingOut: "1.3", InFlight: "r4", Phase: "Pending",
				State: api.StateFailed, Failure: "Flagger's analysis failed"},
			"cart": {Unknown: "its revert failed in rollout r1", Rollout: "r1"},
		}},
		{Name: "c3", Applications: map[string]api.Running{"shop": {Tag: "1.1", Digest: "sha256:1.1", Rollout: "r2"}}},
	}
	if diff := cmp.Diff(want, api.FleetView(clusters, ros, nil)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestWatchRefusesAnUnknownOnly(t *testing.T) {
	srv, _, _ := newWatchedAPI(t)
	get(t, srv.URL+"/api/v1/watch?only=events", http.StatusBadRequest, nil)
}
