package embedded

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

func wave(n int) rollout.Rollout {
	ro := rollout.Rollout{ID: "r1", Application: "app", Image: "registry.test/app", Tag: "1.0.0", Digest: "sha256:abc", Phase: rollout.Progressing}
	ro.Waves = []rollout.Wave{{Name: "all"}}
	for i := range n {
		ro.Waves[0].Clusters = append(ro.Waves[0].Clusters, rollout.Cluster{Name: "c" + string(rune('a'+i)), Phase: rollout.ClusterPending})
	}
	return ro
}

// The cache is keyed by the document's bytes: bytes written by a
// transaction that did not commit (kept by EncodeDocument) do not match
// what the store still holds, which is decoded; what the cache hands out
// is a copy.
func TestDecodedCacheKeyedByBytes(t *testing.T) {
	var c decodedCache
	stored := wave(2)
	raw, err := json.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	uncommitted := wave(2)
	uncommitted.Waves[0].Clusters[0].Phase = rollout.ClusterSucceeded
	var scratch rollout.Rollout
	if _, err := (rolloutDoc{id: "r1", ro: &uncommitted, cache: &c}).EncodeDocument(); err != nil {
		t.Fatal(err)
	}
	if err := (rolloutDoc{id: "r1", ro: &scratch, cache: &c}).DecodeDocument(raw); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(stored, scratch); d != "" {
		t.Errorf("decoded after an uncommitted write (-stored +got):\n%s", d)
	}
	scratch.Waves[0].Clusters[1].Phase = rollout.ClusterFailed // the caller's, not the cache's
	var again rollout.Rollout
	if err := (rolloutDoc{id: "r1", ro: &again, cache: &c}).DecodeDocument(raw); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(stored, again); d != "" {
		t.Errorf("decoded from the cache (-stored +got):\n%s", d)
	}
	if c.decodes != 1 {
		t.Errorf("%d documents decoded, want 1: the second read of the same bytes is the cache's", c.decodes)
	}
}

// A read of the store while an update of the rollout is under way sees
// the version before it, whose bytes the cache still has: it does not
// decode them, and the update after the commit does not either.
func TestDecodedCacheDuringAnUpdate(t *testing.T) {
	var c decodedCache
	before := wave(2)
	raw, err := (rolloutDoc{id: "r1", ro: &before, cache: &c}).EncodeDocument() // committed
	if err != nil {
		t.Fatal(err)
	}
	next := before.Clone()
	next.Waves[0].Clusters[0].Phase = rollout.ClusterSucceeded
	rawNext, err := (rolloutDoc{id: "r1", ro: &next, cache: &c}).EncodeDocument() // under way
	if err != nil {
		t.Fatal(err)
	}
	var read, updated rollout.Rollout
	if err := (rolloutDoc{id: "r1", ro: &read, cache: &c}).DecodeDocument(raw); err != nil { // a read meanwhile
		t.Fatal(err)
	}
	if err := (rolloutDoc{id: "r1", ro: &updated, cache: &c}).DecodeDocument(rawNext); err != nil { // the next update
		t.Fatal(err)
	}
	if d := cmp.Diff(before, read); d != "" {
		t.Errorf("the read meanwhile (-want +got):\n%s", d)
	}
	if d := cmp.Diff(next, updated); d != "" {
		t.Errorf("the next update (-want +got):\n%s", d)
	}
	if c.decodes != 0 {
		t.Errorf("%d documents decoded, want none", c.decodes)
	}
}

// Updates of a rollout in flight decode its document once, not once each
// (the whole rollout of a 1,000-cluster wave, for every burst of its
// events), and what they keep reads back from the store unchanged.
func TestRepoUpdatesDecodeOnce(t *testing.T) {
	ctx := t.Context()
	s, err := store.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	now := func() time.Time { return time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC) }
	r := NewRepo(s, now)
	if _, err := r.Create(ctx, wave(3)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		r.hot.drop("r1") // every read and update goes to the store
		if _, err := r.Get(ctx, "r1"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Update(ctx, "r1", func(ro *rollout.Rollout) error {
			ro.Waves[0].Clusters[i].Phase = rollout.ClusterSucceeded
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if r.decoded.decodes != 1 {
		t.Errorf("%d documents decoded for 3 reads and 3 updates, want 1 (the first read)", r.decoded.decodes)
	}
	kept, err := r.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := NewRepo(s, now).Get(ctx, "r1") // decodes what the store holds
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(fresh, kept); d != "" {
		t.Errorf("the cache's rollout differs from the store's (-store +cache):\n%s", d)
	}
}
