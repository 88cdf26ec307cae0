package natskv_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/natskv"
)

func sample(id string, clusters int) rollout.Rollout {
	ro := rollout.Rollout{
		ID: id, Application: "shop", Image: "registry.test/shop", Tag: "1.0.0", Digest: "sha256:" + fmt.Sprintf("%064d", 1), Phase: rollout.Progressing,
		Waves: []rollout.Wave{{Name: "all"}},
	}
	for i := range clusters {
		ro.Waves[0].Clusters = append(ro.Waves[0].Clusters, rollout.Cluster{Name: fmt.Sprintf("cluster-%04d", i), Phase: rollout.ClusterPending})
	}
	return ro
}

func event(t *testing.T, id string) cloudevents.Event {
	t.Helper()
	e, err := events.New(id, events.Source, "dev.flotilla.natskv.v1", map[string]string{"id": id})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func busIDs(t *testing.T, b bus.Bus) []string {
	t.Helper()
	recs, err := b.Read(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, r := range recs {
		out = append(out, r.Event.ID())
	}
	return out
}

// Three replicas, each with its own connection, update one rollout at
// once: every change is kept, each once.
func TestReplicasLoseNoUpdates(t *testing.T) {
	ctx := context.Background()
	prefix := newPrefix()
	rs := []replica{open(t, prefix), open(t, prefix), open(t, prefix)}
	if _, err := rs[0].repo.Create(ctx, sample("r1", 3)); err != nil {
		t.Fatal(err)
	}
	const each = 10
	var wg sync.WaitGroup
	for i, r := range rs {
		for j := range each {
			wg.Go(func() {
				id := fmt.Sprintf("r%d-%d", i, j)
				_, _, err := r.repo.UpdateEmit(ctx, "r1", func(ro *rollout.Rollout) ([]cloudevents.Event, error) {
					ro.Failures = append(ro.Failures, rollout.Failure{EventID: id})
					return []cloudevents.Event{event(t, id)}, nil
				})
				if err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	got, err := rs[2].repo.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Failures) != len(rs)*each || got.Version != int64(1+len(rs)*each) {
		t.Errorf("after %d updates by %d replicas: %d kept, version %d", len(rs)*each, len(rs), len(got.Failures), got.Version)
	}
	if n := len(busIDs(t, rs[1].bus)); n != len(rs)*each {
		t.Errorf("the bus has %d events of %d updates", n, len(rs)*each)
	}
}

// DESIGN's one wave of 1,000 clusters: the rollout is one value, under
// the server's 1 MiB payload limit, updated whole.
func TestARolloutOfAThousandClusters(t *testing.T) {
	ctx := context.Background()
	r := open(t, newPrefix())
	if _, err := r.repo.Create(ctx, sample("big", 1000)); err != nil {
		t.Fatal(err)
	}
	got, err := r.repo.Update(ctx, "big", func(ro *rollout.Rollout) error {
		for i := range ro.Waves[0].Clusters {
			c := &ro.Waves[0].Clusters[i]
			c.Phase, c.Run = rollout.ClusterApplying, fmt.Sprintf("big/0/apply/%s", c.Name)
			c.Message = "applying the canary of registry.test/shop:1.0.0 in " + c.Name
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Waves[0].Clusters[999].Phase != rollout.ClusterApplying {
		t.Errorf("cluster 999 is %s", got.Waves[0].Clusters[999].Phase)
	}
	raw, _ := json.Marshal(got)
	t.Logf("a rollout of 1,000 applying clusters is %d KiB of JSON", len(raw)>>10)
}

// failingBus refuses every append: the bus is down after the update
// committed (a fake only to inject that failure).
type failingBus struct{}

func (failingBus) Schedule(context.Context, ...cloudevents.Event) error {
	return errors.New("injected: the bus is unreachable")
}

// An update whose events the bus refused keeps them in its outbox: Relay,
// or the rollout's next update, appends them, once, in order.
func TestTheOutboxOutlivesABusThatFailed(t *testing.T) {
	ctx := context.Background()
	prefix := newPrefix()
	good := open(t, prefix)
	down, err := natskv.Open(ctx, good.nc, failingBus{}, natskv.Options{Prefix: prefix}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := good.repo.Create(ctx, sample("r1", 1)); err != nil {
		t.Fatal(err)
	}
	emit := func(repo *natskv.Repo, ids ...string) {
		t.Helper()
		_, out, err := repo.UpdateEmit(ctx, "r1", func(ro *rollout.Rollout) ([]cloudevents.Event, error) {
			var evs []cloudevents.Event
			for _, id := range ids {
				evs = append(evs, event(t, id))
			}
			ro.Reason = ids[0]
			return evs, nil
		})
		if err != nil || len(out) != len(ids) {
			t.Fatalf("UpdateEmit(%v) = %d events, %v", ids, len(out), err)
		}
	}
	emit(down, "a1", "a2") // committed; the bus refused them
	if diff := cmp.Diff([]string{}, busIDs(t, good.bus)); diff != "" {
		t.Fatalf("bus (-want +got):\n%s", diff)
	}
	emit(good.repo, "b1") // appends a1, a2 first
	if diff := cmp.Diff([]string{"a1", "a2", "b1"}, busIDs(t, good.bus)); diff != "" {
		t.Errorf("bus after the next update (-want +got):\n%s", diff)
	}
	emit(down, "c1")
	if err := good.repo.Relay(ctx); err != nil {
		t.Fatal(err)
	}
	if err := good.repo.Relay(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a1", "a2", "b1", "c1"}, busIDs(t, good.bus)); diff != "" {
		t.Errorf("bus after Relay twice (-want +got):\n%s", diff)
	}
	ro, err := good.repo.Get(ctx, "r1")
	if err != nil || ro.Reason != "c1" || ro.Version != 4 {
		t.Errorf("rollout = %q v%d, %v; want c1 v4", ro.Reason, ro.Version, err)
	}
}

// List pages the archive from an index its watch keeps, and a rollout
// another replica archived a moment before is on the page: the index
// catches up with the archive's last write before it answers.
func TestListSeesWhatAnotherReplicaArchived(t *testing.T) {
	ctx := context.Background()
	prefix := newPrefix()
	reader, writer := open(t, prefix), open(t, prefix)
	if p, err := reader.repo.List(ctx, "", 2); err != nil || len(p.Rollouts) != 0 {
		t.Fatalf("List of nothing = %+v, %v", p, err)
	}
	var want []string
	for i := range 5 {
		id := fmt.Sprintf("r%d", i)
		ro := sample(id, 1)
		ro.Created = time.Unix(int64(1000+i), 0)
		if _, err := writer.repo.Create(ctx, ro); err != nil {
			t.Fatal(err)
		}
		if _, err := writer.repo.Update(ctx, id, func(ro *rollout.Rollout) error { ro.Phase = rollout.Succeeded; return nil }); err != nil {
			t.Fatal(err)
		}
		want = append([]string{id}, want...) // newest first
		// At once, from the other replica: the newest is on the first page.
		p, err := reader.repo.List(ctx, "", 2)
		if err != nil || len(p.Rollouts) == 0 || p.Rollouts[0].ID != id {
			t.Fatalf("List after archiving %s = %v, %v", id, rolloutIDs(p.Rollouts), err)
		}
	}
	var got []string
	before := ""
	for range 10 {
		p, err := reader.repo.List(ctx, before, 2)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rolloutIDs(p.Rollouts)...)
		if p.Next == "" {
			break
		}
		before = p.Next
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pages (-want +got):\n%s", diff)
	}
}

func rolloutIDs(ros []rollout.Rollout) []string {
	out := []string{}
	for _, ro := range ros {
		out = append(out, ro.ID)
	}
	return out
}
