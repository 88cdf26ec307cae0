package natskv_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/flotilla-cd/flotilla/pkg/gates"
	"github.com/flotilla-cd/flotilla/pkg/state/natskv"
)

// pkg/gates' approvals and first sightings on the documents, shared by two
// replicas: an approval given through one is read by the other; the first
// sighting of a key is one time, whichever replica saw it first.
func TestGatesOnDocuments(t *testing.T) {
	ctx := context.Background()
	prefix := newPrefix()
	docs := func() *natskv.Docs {
		d, err := natskv.OpenDocs(ctx, open(t, prefix).nc, natskv.Options{Prefix: prefix}) //nolint:contextcheck // open bounds its setup by the test's own context (t.Context)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a, b := gates.NewStoreApprovals(docs()), gates.NewStoreApprovals(docs())
	if err := a.Approve(ctx, "r1", "c1", gates.Approval{Status: gates.StatusValid, By: "alice", Reason: "looks good", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	got, found, err := b.Approval(ctx, "r1", "c1")
	if err != nil || !found || got.Status != gates.StatusValid || got.By != "alice" {
		t.Errorf("the other replica's Approval = %+v, %v, %v", got, found, err)
	}
	if _, found, err := b.Approval(ctx, "r1", "c2"); found || err != nil {
		t.Errorf("Approval of another cluster = %v, %v", found, err)
	}
	base := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	firsts := make([]time.Time, 10)
	for i := range firsts {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			var err error
			if firsts[i], err = s.FirstSeen(ctx, "gate/r1/c1", base.Add(time.Duration(i)*time.Second)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, f := range firsts[1:] {
		if !f.Equal(firsts[0]) {
			t.Fatalf("first sightings differ: %v", firsts)
		}
	}
}

// List names each document by the key Put was given, so that Delete of
// that key removes it; deleting what is not there is no error.
func TestDocsListDelete(t *testing.T) {
	ctx := t.Context()
	prefix := newPrefix()
	d, err := natskv.OpenDocs(ctx, open(t, prefix).nc, natskv.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"4f2a", "b/c d"} {
		if err := d.Put(ctx, "sessions", k, map[string]string{"key": k}); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"4f2a", "b/c d"}, listed(t, d)); diff != "" {
		t.Errorf("listed keys (-want +got):\n%s", diff)
	}
	for _, k := range []string{"4f2a", "4f2a", "missing"} {
		if err := d.Delete(ctx, "sessions", k); err != nil {
			t.Errorf("Delete(%s): %v", k, err)
		}
	}
	if diff := cmp.Diff([]string{"b/c d"}, listed(t, d)); diff != "" {
		t.Errorf("keys after the deletes (-want +got):\n%s", diff)
	}
}

// A document Put through one replica is listed by the others right after
// (read your writes). List reads the bucket with a watch, whose consumer
// the server places on any of the bucket's NATS replicas, and one of them
// may not have applied yet a write the leader acknowledged: such a List
// left the write out (TestDocsListDelete listed no key after two Puts,
// under load). Each round writes through one node's connection and lists
// through the other two's.
func TestDocsListReadsTheWritesBefore(t *testing.T) {
	ctx := t.Context()
	prefix := newPrefix()
	var docs []*natskv.Docs
	for i := range 3 {
		nc, err := nats.Connect(cluster.NodeURL(i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		d, err := natskv.OpenDocs(ctx, nc, natskv.Options{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d)
	}
	var want []string
	for i := range 30 {
		k := fmt.Sprintf("k%02d", i)
		if err := docs[i%3].Put(ctx, "sessions", k, k); err != nil {
			t.Fatal(err)
		}
		want = append(want, k)
		for _, reader := range []int{(i + 1) % 3, (i + 2) % 3} {
			if diff := cmp.Diff(want, listed(t, docs[reader])); diff != "" {
				t.Fatalf("round %d, listed through node %d right after a Put through node %d (-want +got):\n%s", i, reader, i%3, diff)
			}
		}
	}
}

// listed is the keys of the documents List gives of collection
// "sessions", sorted.
func listed(t *testing.T, d *natskv.Docs) []string {
	t.Helper()
	var keys []string
	if err := d.List(t.Context(), "sessions", func(key string, _ []byte) error { keys = append(keys, key); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}
