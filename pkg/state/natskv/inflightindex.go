package natskv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// inFlightIndex is the rollouts in flight, kept by a watch of their
// bucket's keys and revisions (metadata only, a follower), each decoded
// once per revision it is listed at. plan lists the rollouts in flight for
// every push: through a watch of its own, that read and decoded every
// rollout in flight each time (a consumer made, every value sent, for one
// application's). Now a list asks the leader for the bucket's last
// revision, waits until the watch has seen it, and reads (from the leader)
// only the rollouts changed since this replica last decoded them. Values
// are not watched: a 1,000-cluster rollout is rewritten many times a
// second, and every replica would receive each copy.
type inFlightIndex struct {
	follower
	keys map[string]*inFlightEntry // under mu
}

// inFlightEntry is a key of the bucket: its last revision, and the value
// last decoded (of that revision or an older one).
type inFlightEntry struct {
	rev     uint64
	decoded *stored
}

// newInFlightIndex is the index of the rollouts' bucket kv.
func newInFlightIndex(kv jetstream.KeyValue) *inFlightIndex {
	x := &inFlightIndex{keys: map[string]*inFlightEntry{}}
	x.follower = follower{kv: kv, what: "the rollouts in flight", opts: []jetstream.WatchOpt{jetstream.MetaOnly()}, load: x.load, apply: x.apply}
	return x
}

// load takes the bucket's keys as a watch delivered them at its start,
// keeping what was decoded of those that did not change.
func (x *inFlightIndex) load(entries []jetstream.KeyValueEntry) {
	old := x.keys
	x.keys = make(map[string]*inFlightEntry, len(entries))
	for _, e := range entries {
		x.apply(e)
	}
	for k, e := range x.keys {
		if o, ok := old[k]; ok && o.decoded != nil && o.decoded.rev <= e.rev {
			e.decoded = o.decoded
		}
	}
}

// apply records one change the watch delivered.
func (x *inFlightIndex) apply(e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		delete(x.keys, e.Key())
		return
	}
	if cur, ok := x.keys[e.Key()]; ok {
		cur.rev = max(cur.rev, e.Revision())
		return
	}
	x.keys[e.Key()] = &inFlightEntry{rev: e.Revision()}
}

// list returns every rollout in flight as of the call, in key order, each
// a copy of its own; ok is false when the index could not be brought up
// to date (the caller reads the bucket itself).
func (x *inFlightIndex) list(ctx context.Context) (out []stored, ok bool, err error) {
	if !x.upToDate(ctx) {
		return nil, false, nil
	}
	type item struct {
		key     string
		rev     uint64
		decoded *stored
	}
	x.mu.Lock()
	items := make([]item, 0, len(x.keys))
	for k, e := range x.keys {
		items = append(items, item{k, e.rev, e.decoded})
	}
	x.mu.Unlock()
	slices.SortFunc(items, func(a, b item) int { return strings.Compare(a.key, b.key) })
	out = make([]stored, 0, len(items))
	for _, it := range items {
		s := it.decoded
		if s == nil || s.rev < it.rev {
			if s, err = x.read(ctx, it.key); err != nil {
				return nil, true, err
			}
			if s == nil {
				continue // archived since
			}
		}
		out = append(out, stored{key: s.key, rev: s.rev, env: envelope{Rollout: s.env.Rollout.Clone(), Outbox: slices.Clone(s.env.Outbox)}})
	}
	return out, true, nil
}

// read reads and decodes a key's value (from the leader) and keeps it;
// nil when the key is gone.
func (x *inFlightIndex) read(ctx context.Context, key string) (*stored, error) {
	e, err := x.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading rollout %s: %w", key, err)
	}
	s := &stored{key: key, rev: e.Revision()}
	if err := json.Unmarshal(e.Value(), &s.env); err != nil {
		return nil, fmt.Errorf("decoding rollout %s: %w", key, err)
	}
	x.mu.Lock()
	if cur, ok := x.keys[key]; ok && (cur.decoded == nil || cur.decoded.rev < s.rev) {
		cur.decoded = s
	}
	x.mu.Unlock()
	return s, nil
}
