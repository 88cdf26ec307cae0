package natskv

import (
	"context"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// archiveIndex is the archive's page keys (created.id), sorted, kept by a
// watch of the bucket's keys (metadata only, a follower): a page of List
// reads its own rollouts, not every key of the archive.
type archiveIndex struct {
	follower
	keys []string // ascending; under mu
}

// newArchiveIndex is the index of the archive bucket kv.
func newArchiveIndex(kv jetstream.KeyValue) *archiveIndex {
	x := &archiveIndex{}
	x.follower = follower{kv: kv, what: "the archive", opts: []jetstream.WatchOpt{jetstream.MetaOnly()}, load: x.load, apply: x.apply}
	return x
}

// page returns the keys of a page (newest first, before before: "" from
// the newest; at most limit, <= 0: all) and whether more remain. ok is
// false when the index could not be brought up to date: the caller lists
// the keys itself.
func (x *archiveIndex) page(ctx context.Context, before string, limit int) (keys []string, more, ok bool) {
	if !x.upToDate(ctx) {
		return nil, false, false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	end := len(x.keys)
	if before != "" {
		end, _ = slices.BinarySearch(x.keys, before)
	}
	start := 0
	if limit > 0 && end > limit {
		start, more = end-limit, true
	}
	keys = slices.Clone(x.keys[start:end])
	slices.Reverse(keys)
	return keys, more, true
}

// load takes the archive's keys as a watch delivered them at its start.
func (x *archiveIndex) load(entries []jetstream.KeyValueEntry) {
	x.keys = x.keys[:0]
	for _, e := range entries {
		x.apply(e)
	}
}

// apply records one change the watch delivered.
func (x *archiveIndex) apply(e jetstream.KeyValueEntry) {
	if !isPageKey(e.Key()) {
		return
	}
	i, found := slices.BinarySearch(x.keys, e.Key())
	switch {
	case e.Operation() == jetstream.KeyValuePut && !found:
		x.keys = slices.Insert(x.keys, i, e.Key())
	case e.Operation() != jetstream.KeyValuePut && found:
		x.keys = slices.Delete(x.keys, i, i+1)
	}
}

// isPageKey tells a finished rollout's key from its id's index entry.
func isPageKey(key string) bool { return !strings.HasPrefix(key, "id.") }
