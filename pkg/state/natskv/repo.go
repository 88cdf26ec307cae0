package natskv

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/bus/natsjs"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state"
)

var _ state.Rollouts = (*Repo)(nil)

// Bus is where the events of an update go (pkg/bus/natsjs implements it):
// those due later (deadlines) as timers, the others appended. Its
// de-duplication by id (of events and of timers) makes publishing an
// outbox again harmless.
type Bus interface {
	Schedule(ctx context.Context, evs ...cloudevents.Event) error
}

// Options name and size the buckets.
type Options struct {
	// Prefix names the buckets: <Prefix>_rollouts, _archive, _apps
	// (default "FLOTILLA").
	Prefix string
	// Replicas of the buckets (default 3).
	Replicas int
}

// Repo is the rollout state in JetStream KV buckets:
//
//	<Prefix>_rollouts  id -> envelope (the rollout in flight and its outbox)
//	<Prefix>_archive   created.id -> finished rollout; id.<id> -> its key
//	<Prefix>_apps      app.<name> -> application state; fleet -> the fleet's
type Repo struct {
	rollouts, archive, apps jetstream.KeyValue
	index                   *archiveIndex  // the archive's page keys, for List
	live                    *inFlightIndex // the rollouts in flight, for ListInFlight and Relay
	bus                     Bus
	now                     func() time.Time
}

// envelope is a rollout in flight as stored, with the events of its last
// update until the bus has them (the outbox).
type envelope struct {
	Rollout rollout.Rollout   `json:"rollout"`
	Outbox  []json.RawMessage `json:"outbox,omitempty"`
}

// Open creates or updates the buckets on nc's JetStream. b takes the events
// of updates; now (default time.Now) stamps rollouts.
func Open(ctx context.Context, nc *nats.Conn, b Bus, o Options, now func() time.Time) (*Repo, error) {
	o = o.withDefaults()
	if now == nil {
		now = time.Now
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	r := &Repo{bus: b, now: now}
	for _, kv := range []struct {
		name string
		dst  *jetstream.KeyValue
	}{{"rollouts", &r.rollouts}, {"archive", &r.archive}, {"apps", &r.apps}} {
		*kv.dst, err = natsjs.EnsureKeyValue(ctx, js, jetstream.KeyValueConfig{
			Bucket: o.Prefix + "_" + kv.name, Storage: jetstream.FileStorage, Replicas: o.Replicas, History: 1,
			Compression: true,
		})
		if err != nil {
			return nil, fmt.Errorf("creating bucket %s_%s: %w", o.Prefix, kv.name, err)
		}
		if err := answers(ctx, *kv.dst); err != nil {
			return nil, fmt.Errorf("bucket %s_%s: %w", o.Prefix, kv.name, err)
		}
		*kv.dst = patient{*kv.dst}
	}
	r.index = newArchiveIndex(r.archive)
	r.live = newInFlightIndex(r.rollouts)
	return r, nil
}

// answersFor bounds how long Open waits for a bucket to answer.
const answersFor = 30 * time.Second

// answers waits until a new bucket answers reads (its replicas elected a
// leader): until then a read finds no responders, or, while the NATS
// cluster is busy electing (replicas restarting), goes unanswered, or is
// answered "stream not found" by a node the bucket's creation has not
// reached yet (three replicas creating it at once). Each
// read is bounded, and retried for up to answersFor: a replica starting
// then should wait for its state, not exit.
func answers(ctx context.Context, kv jetstream.KeyValue) error {
	deadline := time.Now().Add(answersFor)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := kv.Get(rctx, "probe")
		cancel()
		if err == nil || errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		if !notYet(err) {
			return err
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("not answering: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not answering: %w", ctx.Err())
		case <-time.After(wait):
		}
	}
}

// notYet tells whether a read of a new bucket failed only because the
// bucket is not answering yet.
func notYet(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, jetstream.ErrStreamNotFound)
}

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = "FLOTILLA"
	}
	if o.Replicas <= 0 {
		o.Replicas = 3
	}
	return o
}

func idKey(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

func archiveKey(ro rollout.Rollout) string {
	return fmt.Sprintf("%020d.%s", ro.Created.UnixNano(), idKey(ro.ID))
}

func archiveIndexKey(id string) string { return "id." + idKey(id) }

// isConflict tells that a key changed (or was created) since it was read.
func isConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}

// getJSON reads key of kv into v; found is false when it has none.
func getJSON(ctx context.Context, kv jetstream.KeyValue, key string, v any) (rev uint64, found bool, err error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if err := json.Unmarshal(e.Value(), v); err != nil {
		return 0, false, fmt.Errorf("decoding %s: %w", key, err)
	}
	return e.Revision(), true, nil
}

// Get returns a rollout, in flight or archived.
func (r *Repo) Get(ctx context.Context, id string) (rollout.Rollout, error) {
	var env envelope
	_, found, err := getJSON(ctx, r.rollouts, idKey(id), &env)
	if err != nil {
		return rollout.Rollout{}, fmt.Errorf("reading rollout %s: %w", id, err)
	}
	if found {
		return env.Rollout, nil
	}
	return r.archived(ctx, id)
}

// Phase returns a rollout's phase, decoding only that of its value.
func (r *Repo) Phase(ctx context.Context, id string) (rollout.Phase, error) {
	var env struct {
		Rollout struct {
			Phase rollout.Phase `json:"phase"`
		} `json:"rollout"`
	}
	_, found, err := getJSON(ctx, r.rollouts, idKey(id), &env)
	if err != nil {
		return "", fmt.Errorf("reading rollout %s: %w", id, err)
	}
	if found {
		return env.Rollout.Phase, nil
	}
	ro, err := r.archived(ctx, id)
	return ro.Phase, err
}

func (r *Repo) archived(ctx context.Context, id string) (rollout.Rollout, error) {
	var ro rollout.Rollout
	e, err := r.archive.Get(ctx, archiveIndexKey(id))
	if err == nil {
		var found bool
		if _, found, err = getJSON(ctx, r.archive, string(e.Value()), &ro); err == nil && found {
			return ro, nil
		}
	}
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return ro, fmt.Errorf("reading archived rollout %s: %w", id, err)
	}
	return ro, fmt.Errorf("%w: %s", rollout.ErrNotFound, id)
}

// Create stores a new rollout unless one with its id exists.
func (r *Repo) Create(ctx context.Context, ro rollout.Rollout) (bool, error) {
	if _, err := r.archived(ctx, ro.ID); err == nil {
		return false, nil // it ran, and finished
	} else if !errors.Is(err, rollout.ErrNotFound) {
		return false, err
	}
	now := r.now().UTC()
	ro.Created, ro.Updated, ro.Version = now, now, 1
	raw, err := json.Marshal(envelope{Rollout: ro})
	if err != nil {
		return false, fmt.Errorf("encoding rollout %s: %w", ro.ID, err)
	}
	if _, err := r.rollouts.Create(ctx, idKey(ro.ID), raw); err != nil {
		if isConflict(err) {
			return false, nil
		}
		return false, fmt.Errorf("creating rollout %s: %w", ro.ID, err)
	}
	return true, nil
}

// Update changes a rollout under its revision, retried on a conflict.
func (r *Repo) Update(ctx context.Context, id string, fn func(*rollout.Rollout) error) (rollout.Rollout, error) {
	ro, _, err := r.UpdateEmit(ctx, id, func(ro *rollout.Rollout) ([]cloudevents.Event, error) { return nil, fn(ro) })
	return ro, err
}

// UpdateEmit changes a rollout and puts fn's events on the bus: they are
// written with the rollout (its outbox), under the rollout's revision,
// then appended to the bus and the outbox cleared. An outbox left by a
// crash (or a bus that failed) is appended by the next update of the
// rollout, before its own, or by Relay; the bus drops what it has, by id.
func (r *Repo) UpdateEmit(ctx context.Context, id string, fn func(*rollout.Rollout) ([]cloudevents.Event, error)) (rollout.Rollout, []cloudevents.Event, error) {
	key := idKey(id)
	for {
		var env envelope
		rev, found, err := getJSON(ctx, r.rollouts, key, &env)
		if err != nil {
			return rollout.Rollout{}, nil, fmt.Errorf("updating rollout %s: %w", id, err)
		}
		if !found {
			return r.updateArchived(ctx, id, fn)
		}
		if len(env.Outbox) > 0 {
			if rev, err = r.flush(ctx, key, env, rev); err != nil {
				if isConflict(err) {
					continue
				}
				return env.Rollout, nil, fmt.Errorf("updating rollout %s: %w", id, err)
			}
		}
		ro := env.Rollout // decoded afresh: fn may change it freely
		out, err := fn(&ro)
		if err != nil {
			return env.Rollout, nil, fmt.Errorf("updating rollout %s: %w", id, err)
		}
		ro.Updated = r.now().UTC()
		ro.Version++
		next := envelope{Rollout: ro}
		if len(out) > 0 {
			raws, err := bus.Encode(out)
			if err != nil {
				return env.Rollout, nil, fmt.Errorf("updating rollout %s: %w", id, err)
			}
			for _, raw := range raws {
				next.Outbox = append(next.Outbox, raw)
			}
		}
		raw, err := json.Marshal(next)
		if err != nil {
			return env.Rollout, nil, fmt.Errorf("encoding rollout %s: %w", id, err)
		}
		rev, err = r.rollouts.Update(ctx, key, raw, rev)
		if isConflict(err) {
			continue // another writer changed it: fn again, on theirs
		}
		if err != nil {
			return env.Rollout, nil, fmt.Errorf("updating rollout %s: %w", id, err)
		}
		// Committed. The outbox is durable: a failure from here on is
		// repaired by the next update or Relay, not by running fn again.
		if len(next.Outbox) > 0 {
			if _, err := r.flush(ctx, key, next, rev); err != nil && !isConflict(err) {
				return ro, out, nil
			}
		}
		if ro.Phase.Done() {
			if err := r.archiveRollout(ctx, id); err != nil {
				return ro, out, err
			}
		}
		return ro, out, nil
	}
}

// flush appends env's outbox to the bus and clears it under rev; it
// returns the new revision.
func (r *Repo) flush(ctx context.Context, key string, env envelope, rev uint64) (uint64, error) {
	evs := make([]cloudevents.Event, 0, len(env.Outbox))
	for _, raw := range env.Outbox {
		e, err := bus.Decode(raw)
		if err != nil {
			return rev, fmt.Errorf("an outbox event does not read back: %w", err)
		}
		evs = append(evs, e)
	}
	if err := r.bus.Schedule(ctx, evs...); err != nil {
		return rev, fmt.Errorf("appending the outbox: %w", err)
	}
	env.Outbox = nil
	raw, err := json.Marshal(env)
	if err != nil {
		return rev, err
	}
	return r.rollouts.Update(ctx, key, raw, rev)
}

// Relay appends every outbox left in flight (by a crash between an
// update and its append, or a bus that failed then) and clears it; the
// engine calls it at its start and on its resync.
func (r *Repo) Relay(ctx context.Context) error {
	envs, err := r.inFlight(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range envs {
		if len(e.env.Outbox) == 0 {
			continue
		}
		if _, err := r.flush(ctx, e.key, e.env, e.rev); err != nil && !isConflict(err) {
			errs = append(errs, fmt.Errorf("relaying the outbox of rollout %s: %w", e.env.Rollout.ID, err))
		}
	}
	return errors.Join(errs...)
}

// updateArchived runs fn on a copy of an archived rollout, which stays as
// it is (its errors still count).
func (r *Repo) updateArchived(ctx context.Context, id string, fn func(*rollout.Rollout) ([]cloudevents.Event, error)) (rollout.Rollout, []cloudevents.Event, error) {
	ro, err := r.archived(ctx, id)
	if err != nil {
		return ro, nil, err
	}
	scratch, _ := r.archived(ctx, id) // a copy of its own
	if _, err := fn(&scratch); err != nil {
		return ro, nil, fmt.Errorf("updating rollout %s: %w", id, err)
	}
	return ro, nil, nil
}

// archiveRollout moves a finished rollout (its outbox appended) to the
// archive: the archived copy and its index first, then the in-flight key
// under its revision. Each step can be repeated, so a crash between them
// is finished by the next ListInFlight.
func (r *Repo) archiveRollout(ctx context.Context, id string) error {
	key := idKey(id)
	var env envelope
	rev, found, err := getJSON(ctx, r.rollouts, key, &env)
	if err != nil || !found || !env.Rollout.Phase.Done() {
		return err
	}
	if len(env.Outbox) > 0 {
		if rev, err = r.flush(ctx, key, env, rev); err != nil {
			return fmt.Errorf("archiving rollout %s: %w", id, err)
		}
	}
	ro := env.Rollout
	raw, err := json.Marshal(ro)
	if err != nil {
		return err
	}
	ak := archiveKey(ro)
	if _, err := r.archive.Put(ctx, ak, raw); err != nil {
		return fmt.Errorf("archiving rollout %s: %w", id, err)
	}
	if _, err := r.archive.Put(ctx, archiveIndexKey(id), []byte(ak)); err != nil {
		return fmt.Errorf("archiving rollout %s: %w", id, err)
	}
	if err := r.rollouts.Purge(ctx, key, jetstream.LastRevision(rev)); err != nil && !isConflict(err) {
		return fmt.Errorf("archiving rollout %s: %w", id, err)
	}
	return nil
}

type stored struct {
	key string
	rev uint64
	env envelope
}

// inFlight reads every rollout in flight: from the index, or, when it
// cannot be brought up to date, through a watch of the bucket's values.
func (r *Repo) inFlight(ctx context.Context) ([]stored, error) {
	if r.live != nil {
		if out, ok, err := r.live.list(ctx); ok {
			return out, err
		}
	}
	entries, err := readAll(ctx, r.rollouts)
	if err != nil {
		return nil, fmt.Errorf("listing rollouts: %w", err)
	}
	out := make([]stored, 0, len(entries))
	for _, e := range entries {
		var env envelope
		if err := json.Unmarshal(e.Value(), &env); err != nil {
			return nil, fmt.Errorf("decoding rollout %s: %w", e.Key(), err)
		}
		out = append(out, stored{key: e.Key(), rev: e.Revision(), env: env})
	}
	return out, nil
}

// ListInFlight returns the rollouts not finished, newest first; a finished
// one still in flight (a crash while archiving it) is archived.
func (r *Repo) ListInFlight(ctx context.Context) ([]rollout.Rollout, error) {
	envs, err := r.inFlight(ctx)
	if err != nil {
		return nil, err
	}
	var out []rollout.Rollout
	for _, e := range envs {
		if e.env.Rollout.Phase.Done() {
			if err := r.archiveRollout(ctx, e.env.Rollout.ID); err != nil {
				return nil, err
			}
			continue
		}
		out = append(out, e.env.Rollout)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out, nil
}

// listPage is a page's keys, read from every key of the archive: what
// List does when its index is not up to date.
func (r *Repo) listPage(ctx context.Context, before string, limit int) (page []string, more bool, err error) {
	entries, err := readAll(ctx, r.archive, jetstream.MetaOnly())
	if err != nil {
		return nil, false, fmt.Errorf("listing finished rollouts: %w", err)
	}
	for _, e := range entries {
		if k := e.Key(); isPageKey(k) && (before == "" || k < before) {
			page = append(page, k)
		}
	}
	slices.Sort(page)
	slices.Reverse(page)
	if limit > 0 && len(page) > limit {
		page, more = page[:limit], true
	}
	return page, more, nil
}

// List returns a page: on the first (before "") every rollout in flight,
// then up to limit finished ones, newest first.
func (r *Repo) List(ctx context.Context, before string, limit int) (rollout.Page, error) {
	var p rollout.Page
	if before == "" {
		inFlight, err := r.ListInFlight(ctx)
		if err != nil {
			return p, err
		}
		p.Rollouts = inFlight
	}
	page, more, ok := r.index.page(ctx, before, limit)
	if !ok {
		var err error
		if page, more, err = r.listPage(ctx, before, limit); err != nil {
			return p, err
		}
	}
	if more {
		p.Next = page[len(page)-1]
	}
	for _, k := range page {
		var ro rollout.Rollout
		if _, found, err := getJSON(ctx, r.archive, k, &ro); err != nil {
			return p, fmt.Errorf("reading finished rollout %s: %w", k, err)
		} else if found {
			p.Rollouts = append(p.Rollouts, ro)
		}
	}
	return p, nil
}
