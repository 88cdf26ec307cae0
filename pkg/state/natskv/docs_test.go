package natskv_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
	list := func() []string {
		var keys []string
		if err := d.List(ctx, "sessions", func(key string, _ []byte) error { keys = append(keys, key); return nil }); err != nil {
			t.Fatal(err)
		}
		slices.Sort(keys)
		return keys
	}
	if diff := cmp.Diff([]string{"4f2a", "b/c d"}, list()); diff != "" {
		t.Errorf("listed keys (-want +got):\n%s", diff)
	}
	for _, k := range []string{"4f2a", "4f2a", "missing"} {
		if err := d.Delete(ctx, "sessions", k); err != nil {
			t.Errorf("Delete(%s): %v", k, err)
		}
	}
	if diff := cmp.Diff([]string{"b/c d"}, list()); diff != "" {
		t.Errorf("keys after the deletes (-want +got):\n%s", diff)
	}
}
