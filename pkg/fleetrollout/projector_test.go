package fleetrollout_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/fleetrollout"
	"github.com/flotilla-cd/flotilla/pkg/kube"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

var fleet *localfleet.Fleet

func TestMain(m *testing.M) {
	os.Exit(fleettest.Main(m, fleettest.Options{Clusters: 1}, &fleet))
}

// A rollout's FleetRollout follows it on a real API server: created with
// its first event, its phase, wave and clusters updated as it moves; the
// printer columns (what kubectl get shows) read them.
func TestFleetRolloutsFollowTheRollouts(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, _ := fleet.Cluster("c1")
	cl, err := fleettest.NewClients(c)
	if err != nil {
		t.Fatal(err)
	}
	crds, err := kube.Decode(fleetrollout.CRD)
	if err != nil {
		t.Fatal(err)
	}
	a, err := kube.NewApplier(cl.Config, "flotilla-test")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(ctx, crds...); err != nil {
		t.Fatal(err)
	}
	if err := kube.WaitCRDsEstablished(ctx, cl.Config, "fleetrollouts.flotilla.dev"); err != nil {
		t.Fatal(err)
	}
	ns := cl.Namespace(ctx, t, "fro")

	s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	repo := embedded.NewRepo(s, nil)
	p := fleetrollout.New(s, repo, cl.Dynamic, ns, nil)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done }) //nolint:errcheck // after stop, Run returns its cancellation

	ro := rollout.Rollout{ID: "shop-0a1b2c3d4e", Application: "shop", Image: "registry.test/shop", Tag: "1.4.0", Digest: "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		Phase: rollout.Progressing, Waves: []rollout.Wave{
			{Name: "canary", Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterProgressing}}},
			{Name: "prod", Clusters: []rollout.Cluster{{Name: "c2", Phase: rollout.ClusterPending}, {Name: "c3", Phase: rollout.ClusterPending}}},
		}}
	if _, err := repo.Create(ctx, ro); err != nil {
		t.Fatal(err)
	}
	announce := func(id string) {
		t.Helper()
		e, err := events.New(id, "/test", events.TypeWaveStarted, events.WaveStarted{RolloutID: ro.ID})
		if err != nil {
			t.Fatal(err)
		}
		e.SetExtension(events.ExtRolloutID, ro.ID)
		if _, err := s.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	announce("w1")
	statusIs(ctx, t, cl.Dynamic.Resource(fleetrollout.Resource).Namespace(ns), "shop-0a1b2c3d4e",
		map[string]any{"phase": "Progressing", "wave": "1/2 canary", "clusters": "0/3"})

	if _, err := repo.Update(ctx, ro.ID, func(r *rollout.Rollout) error {
		r.Waves[0].Clusters[0].Phase = rollout.ClusterSucceeded
		r.Wave = 1
		r.Waiting = "wave 2 (prod) waits for 1 approval"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	announce("w2")
	got := statusIs(ctx, t, cl.Dynamic.Resource(fleetrollout.Resource).Namespace(ns), "shop-0a1b2c3d4e",
		map[string]any{"phase": "Progressing", "wave": "2/2 prod", "clusters": "1/3", "waiting": "wave 2 (prod) waits for 1 approval"})
	if spec, _, _ := unstructured.NestedStringMap(got.Object, "spec"); spec["application"] != "shop" || spec["version"] != "1.4.0" {
		t.Errorf("spec %v", spec)
	}

	// What kubectl get fleetrollouts prints: the server's table.
	hc, err := rest.HTTPClientFor(cl.Config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cl.Config.Host+"/apis/flotilla.dev/v1alpha1/namespaces/"+ns+"/fleetrollouts", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var table metav1.Table
	if err := json.NewDecoder(resp.Body).Decode(&table); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		if c.Priority == 0 {
			cols = append(cols, c.Name)
		}
	}
	if diff := cmp.Diff([]string{"Name", "Application", "Version", "Phase", "Wave", "Clusters", "Age"}, cols); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if len(table.Rows) != 1 || !cmp.Equal(table.Rows[0].Cells[:6], []any{"shop-0a1b2c3d4e", "shop", "1.4.0", "Progressing", "2/2 prod", "1/3"}) {
		t.Errorf("rows %v", table.Rows)
	}
}

// statusIs waits until the FleetRollout's status has want's fields.
func statusIs(ctx context.Context, t *testing.T, res interface {
	Get(context.Context, string, metav1.GetOptions, ...string) (*unstructured.Unstructured, error)
}, name string, want map[string]any) *unstructured.Unstructured {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		u, err := res.Get(ctx, name, metav1.GetOptions{})
		var got map[string]any
		if err == nil {
			st, _, _ := unstructured.NestedMap(u.Object, "status")
			got = map[string]any{}
			for k := range want {
				got[k] = st[k]
			}
			if cmp.Equal(want, got) {
				return u
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("FleetRollout %s: status %v (%v), want %v", name, got, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
