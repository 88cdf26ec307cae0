package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Two replicas in scale-out mode on a real three-node JetStream cluster: a
// control sent to one (stop the fleet) is handled by whichever holds its
// partition and read back from the other; and the reverse.
func TestScaleOutReplicasShareOneFleet(t *testing.T) {
	replica := func(name string) *Server {
		cfg := testConfig(t, fmt.Sprintf("  bus: {url: %q, stream: SHARE, partitions: 4, replica: %s}\n", natsCluster.URL(), name))
		return runServer(t, cfg, Options{NoPrune: true})
	}
	a, b := replica("a"), replica("b")
	for _, s := range []*Server{a, b} {
		waitReady(t, s)
	}
	control := func(s *Server, what string) {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"reason": "freeze for the test"})
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+s.Addr()+"/api/v1/fleet/"+what, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST fleet/%s: %s", what, resp.Status)
		}
	}
	fleetOn := func(s *Server, stopped bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			var st rollout.FleetState
			resp, err := get(t, "http://"+s.Addr()+"/api/v1/fleet")
			if err == nil {
				err = json.NewDecoder(resp.Body).Decode(&st)
				_ = resp.Body.Close()
			}
			if err == nil && st.Stopped == stopped {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the fleet is not stopped=%v on %s: %+v, %v", stopped, s.Addr(), st, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	control(a, "stop")
	fleetOn(b, true)
	control(b, "start")
	fleetOn(a, false)
}

func waitReady(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := get(t, "http://"+s.Addr()+"/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready", s.Addr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Pipeline run and prune requests go with the workload they write; every
// other event with its dispatch key.
func TestPartitionKey(t *testing.T) {
	req := func(rolloutID, app, cluster string) cloudevents.Event {
		e, err := events.New(rolloutID+"/"+cluster, "/test", events.TypePipelineRunRequested,
			events.PipelineRunRequested{RolloutID: rolloutID, Application: app, Cluster: cluster})
		if err != nil {
			t.Fatal(err)
		}
		e.SetExtension(events.ExtRolloutID, rolloutID)
		e.SetSubject(cluster)
		return e
	}
	prune, err := events.New("r1/c1/prune", "/test", events.TypePruneRequested,
		events.PruneRequested{RolloutID: "r1", Application: "shop", Cluster: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	prune.SetExtension(events.ExtRolloutID, "r1")
	other, err := events.New("w", "/test", events.TypeWaveStarted, events.WaveStarted{RolloutID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	other.SetExtension(events.ExtRolloutID, "r1")
	for _, tc := range []struct {
		name string
		e    cloudevents.Event
		want string
	}{
		{"a run of r1", req("r1", "shop", "c1"), "workload/shop/c1"},
		{"a run of r2, superseding r1", req("r2", "shop", "c1"), "workload/shop/c1"},
		{"another cluster", req("r2", "shop", "c2"), "workload/shop/c2"},
		{"a prune, with the runs of its workload", prune, "workload/shop/c1"},
		{"any other event", other, "rollout/r1"},
	} {
		if got := partitionKey(tc.e); got != tc.want {
			t.Errorf("%s: partitionKey = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// get is a GET of url bound to the test's context.
// get reads url with testConfig's API token.
func get(t *testing.T, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	return http.DefaultClient.Do(req)
}
