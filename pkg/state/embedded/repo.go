package embedded

import (
	cloudevents "github.com/cloudevents/sdk-go/v2"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// Repo is the embedded adapter of the state port.
var _ state.Rollouts = (*Repo)(nil)

// Documents is the part of the store the Repo needs (pkg/store implements it).
type Documents interface {
	Get(ctx context.Context, collection, key string, v any) (bool, error)
	Update(ctx context.Context, collection, key string, v any, fn func(found bool) error) error
	UpdateAndAppend(ctx context.Context, collection, key string, v any, fn func(found bool) ([]cloudevents.Event, error)) ([]store.Record, error)
	List(ctx context.Context, collection string, fn func(key string, raw []byte) error) error
	ListBefore(ctx context.Context, collection, before string, limit int, fn func(key string, raw []byte) error) error
	Transact(ctx context.Context, fn func(store.Txn) error) error
}

// Collections. Rollouts in flight (and those whose rollback failed, which
// wait for a retry) are the hot set, keyed by id; finished ones move to the
// archive, keyed by creation time and id (newest last), with an index by
// id, so that what the engine reads and resync scans does not grow with
// history.
const (
	rolloutsCollection = "rollouts"
	archiveCollection  = "rollouts-archive"
	archiveIndex       = "rollouts-archive-ids"
	appsCollection     = "applications"
	fleetCollection    = "fleet"
	fleetKey           = "fleet"
)

// archiveKey orders the archive by creation time.
func archiveKey(ro rollout.Rollout) string {
	return fmt.Sprintf("%020d/%s", ro.Created.UnixNano(), ro.ID)
}

// Repo keeps rollouts and application state in the embedded store's
// documents.
type Repo struct {
	docs Documents
	now  func() time.Time
	hot  hotCache
	// decoded spares reads and updates of a rollout in flight decoding a
	// document they decoded or wrote before.
	decoded decodedCache
}

// NewRepo returns a Repo over docs; now defaults to time.Now.
func NewRepo(docs Documents, now func() time.Time) *Repo {
	if now == nil {
		now = time.Now
	}
	return &Repo{docs: docs, now: now, hot: hotCache{byID: map[string]rollout.Rollout{}}}
}

// hotCache keeps the rollouts in flight decoded, by id: every function
// reads the rollout of each event it handles (50 pipeline runs of a wave
// read it 50 times), and decoding a rollout of many clusters costs more
// than the rest of the read. The Repo is the only writer of its documents
// (one per process), so it puts what it commits; a version older than the
// one kept is never put back. Finished rollouts leave it as they leave the
// hot set: it holds at most the rollouts in flight.
type hotCache struct {
	mu   sync.Mutex
	byID map[string]rollout.Rollout
	// phases holds the phase of each rollout in byID and, while a commit
	// of it is under way, the phase it had before (what a read of the
	// store answers until the commit ends).
	phases map[string]rollout.Phase
	// drops counts drops: a read of the store that began before one may
	// have read what the drop was for, and is not kept.
	drops uint64
	// writing counts, by id, the commits under way (begin, end): their
	// events may be visible before the commit's end keeps the new version,
	// so the rollout is read from the store meanwhile, never kept.
	writing map[string]int
}

// begin marks a commit of id under way: until its end, reads of id go to
// the store (which has the old version until the commit, the new one
// with its events after) and keep nothing. A read that began before and
// keeps the old version after the end is refused by keep (an older
// version), so other rollouts' reads are not disturbed.
func (c *hotCache) begin(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writing == nil {
		c.writing = map[string]int{}
	}
	c.writing[id]++
	delete(c.byID, id)
}

// end ends a commit of id begin marked, keeping ro, what it committed
// (nil: it failed, or is not known).
func (c *hotCache) end(id string, ro *rollout.Rollout) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ro == nil {
		// Whether it was committed is not known: a read that began
		// before may hold either version, and is not kept.
		c.drops++
		delete(c.phases, id)
	} else {
		// Committed: its phase is the one a read of the store answers
		// now, even while another commit of it is under way.
		c.setPhase(*ro)
	}
	if c.writing[id]--; c.writing[id] <= 0 {
		delete(c.writing, id)
		if ro != nil {
			c.keep(*ro)
		}
	}
}

func (c *hotCache) get(id string) (rollout.Rollout, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writing[id] > 0 {
		return rollout.Rollout{}, false
	}
	ro, ok := c.byID[id]
	if !ok {
		return ro, false
	}
	return ro.Clone(), true
}

// phase is the phase of rollout id as kept, false if it is not.
func (c *hotCache) phase(id string) (rollout.Phase, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.phases[id]
	return p, ok
}

// since is the number of drops so far: a read of the store puts what it
// read only if no drop happened meanwhile (putRead).
func (c *hotCache) since() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.drops
}

// putRead keeps ro, read or committed after since() said drops, unless a
// drop happened since (it may have been for a newer version).
func (c *hotCache) putRead(ro rollout.Rollout, drops uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.drops == drops && c.writing[ro.ID] == 0 {
		c.keep(ro)
	}
}

// keep keeps ro unless a newer version of it is kept; a finished rollout
// is dropped. Holds mu.
func (c *hotCache) keep(ro rollout.Rollout) {
	if ro.Phase.Done() {
		delete(c.byID, ro.ID)
		c.setPhase(ro)
		return
	}
	if cur, ok := c.byID[ro.ID]; ok && cur.Version >= ro.Version {
		return
	}
	c.byID[ro.ID] = ro.Clone()
	c.setPhase(ro)
}

// setPhase keeps ro's phase; a finished rollout's is not kept (it is
// read from the archive). Holds mu.
func (c *hotCache) setPhase(ro rollout.Rollout) {
	if ro.Phase.Done() {
		delete(c.phases, ro.ID)
		return
	}
	if c.phases == nil {
		c.phases = map[string]rollout.Phase{}
	}
	c.phases[ro.ID] = ro.Phase
}

func (c *hotCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byID, id)
	delete(c.phases, id)
	c.drops++
}

// doc is rollout id's document, to be read or written into ro.
func (r *Repo) doc(id string, ro *rollout.Rollout) rolloutDoc {
	return rolloutDoc{id: id, ro: ro, cache: &r.decoded}
}

// Get returns a rollout by id, or rollout.ErrNotFound.
func (r *Repo) Get(ctx context.Context, id string) (rollout.Rollout, error) {
	if ro, ok := r.hot.get(id); ok {
		return ro, nil
	}
	drops := r.hot.since()
	var ro rollout.Rollout
	found, err := r.docs.Get(ctx, rolloutsCollection, id, r.doc(id, &ro))
	if err != nil {
		return ro, fmt.Errorf("reading rollout %s: %w", id, err)
	}
	if found {
		r.hot.putRead(ro, drops)
		return ro, nil
	}
	return r.archived(ctx, id)
}

// Phase returns a rollout's phase: the one kept, without a copy, while it
// is in flight; otherwise read as Get reads it.
func (r *Repo) Phase(ctx context.Context, id string) (rollout.Phase, error) {
	if p, ok := r.hot.phase(id); ok {
		return p, nil
	}
	ro, err := r.Get(ctx, id)
	return ro.Phase, err
}

// archived returns a finished rollout from the archive, or rollout.ErrNotFound.
func (r *Repo) archived(ctx context.Context, id string) (rollout.Rollout, error) {
	var key string
	found, err := r.docs.Get(ctx, archiveIndex, id, &key)
	if err == nil && found {
		var ro rollout.Rollout
		if found, err = r.docs.Get(ctx, archiveCollection, key, &ro); err == nil && found {
			return ro, nil
		}
	}
	if err != nil {
		return rollout.Rollout{}, fmt.Errorf("reading archived rollout %s: %w", id, err)
	}
	return rollout.Rollout{}, fmt.Errorf("%w: %s", rollout.ErrNotFound, id)
}

// archive moves a finished rollout out of the hot set, in one transaction.
func (r *Repo) archive(ctx context.Context, id string) error {
	err := r.docs.Transact(ctx, func(tx store.Txn) error {
		var ro rollout.Rollout
		found, err := tx.Get(rolloutsCollection, id, &ro)
		if err != nil || !found || !ro.Phase.Done() {
			return err
		}
		key := archiveKey(ro)
		if err := tx.Put(archiveCollection, key, ro); err != nil {
			return err
		}
		if err := tx.Put(archiveIndex, id, key); err != nil {
			return err
		}
		return tx.Delete(rolloutsCollection, id)
	})
	if err != nil {
		return fmt.Errorf("archiving rollout %s: %w", id, err)
	}
	r.hot.drop(id)
	r.decoded.drop(id)
	return nil
}

// Create stores a new rollout unless one with its id exists; it reports
// whether it created it (a redelivered event finds it already there).
func (r *Repo) Create(ctx context.Context, ro rollout.Rollout) (created bool, err error) {
	var cur rollout.Rollout
	if _, err := r.archived(ctx, ro.ID); err == nil {
		return false, nil // it ran, and finished
	} else if !errors.Is(err, rollout.ErrNotFound) {
		return false, err
	}
	drops := r.hot.since()
	err = r.docs.Update(ctx, rolloutsCollection, ro.ID, &cur, func(found bool) error {
		if found {
			return errExists
		}
		now := r.now().UTC()
		ro.Created, ro.Updated, ro.Version = now, now, 1
		cur = ro
		return nil
	})
	if errors.Is(err, errExists) {
		return false, nil
	}
	if err != nil {
		r.hot.drop(ro.ID)
		return false, fmt.Errorf("creating rollout %s: %w", ro.ID, err)
	}
	r.hot.putRead(cur, drops)
	return true, nil
}

var errExists = errors.New("exists")

// errArchived: the rollout is not in the hot set.
var errArchived = errors.New("archived")

// Update changes a rollout in one transaction and returns the result. A
// finished rollout is archived, and frozen: fn sees it, but what fn
// changes is not kept.
func (r *Repo) Update(ctx context.Context, id string, fn func(*rollout.Rollout) error) (rollout.Rollout, error) {
	ro, _, err := r.UpdateEmit(ctx, id, func(ro *rollout.Rollout) ([]cloudevents.Event, error) { return nil, fn(ro) })
	return ro, err
}

// UpdateEmit changes a rollout and journals the events fn returns in the same
// transaction, so a transition and the events that announce it survive a
// crash together: a redelivered input finds the state moved on and must not
// have to announce the move again.
func (r *Repo) UpdateEmit(ctx context.Context, id string, fn func(*rollout.Rollout) ([]cloudevents.Event, error)) (rollout.Rollout, []cloudevents.Event, error) {
	var (
		ro  rollout.Rollout
		out []cloudevents.Event
	)
	// The commit makes its events visible to every function at once: the
	// kept version must not be read as current meanwhile (a proposer read
	// wave 0 of a rollout whose wave.started of wave 1 it was handling).
	r.hot.begin(id)
	_, err := r.docs.UpdateAndAppend(ctx, rolloutsCollection, id, r.doc(id, &ro), func(found bool) ([]cloudevents.Event, error) {
		if !found {
			return nil, errArchived
		}
		var err error
		if out, err = fn(&ro); err != nil {
			return nil, err
		}
		ro.Updated = r.now().UTC()
		ro.Version++
		return out, nil
	})
	if err != nil {
		// Whether it was kept is not known: the next read asks the store.
		r.hot.end(id, nil)
	} else {
		r.hot.end(id, &ro)
	}
	if errors.Is(err, errArchived) {
		// A late event of a finished rollout: it no longer changes.
		if ro, err = r.archived(ctx, id); err != nil {
			return ro, nil, err
		}
		scratch := ro.Clone()
		if _, err := fn(&scratch); err != nil {
			return ro, nil, fmt.Errorf("updating rollout %s: %w", id, err)
		}
		return ro, nil, nil
	}
	if err != nil {
		return ro, nil, fmt.Errorf("updating rollout %s: %w", id, err)
	}
	if ro.Phase.Done() {
		// A crash before this leaves it in the hot set, where
		// ListInFlight finds and archives it.
		if err := r.archive(ctx, id); err != nil {
			return ro, out, err
		}
	}
	return ro, out, nil
}

// ListInFlight returns the rollouts not finished (in flight, or waiting
// for a retry of their rollback), newest first. A finished one a crash left
// in the hot set is archived on the way.
func (r *Repo) ListInFlight(ctx context.Context) ([]rollout.Rollout, error) {
	var out, done []rollout.Rollout
	drops := r.hot.since()
	err := r.docs.List(ctx, rolloutsCollection, func(id string, raw []byte) error {
		ro, ok := r.hot.get(id)
		if !ok {
			if err := r.doc(id, &ro).DecodeDocument(raw); err != nil {
				return fmt.Errorf("decoding rollout: %w", err)
			}
			r.hot.putRead(ro, drops)
		}
		if ro.Phase.Done() {
			done = append(done, ro)
			return nil
		}
		out = append(out, ro)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing rollouts: %w", err)
	}
	for _, ro := range done {
		if err := r.archive(ctx, ro.ID); err != nil {
			return nil, err
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out, nil
}

// List returns a page of rollouts, newest first: on the first page (before
// "") every rollout in flight, then up to limit finished ones; on the next,
// finished ones created before the cursor.
func (r *Repo) List(ctx context.Context, before string, limit int) (rollout.Page, error) {
	var p rollout.Page
	if before == "" {
		inFlight, err := r.ListInFlight(ctx)
		if err != nil {
			return p, err
		}
		p.Rollouts = inFlight
	}
	last := ""
	n := 0
	err := r.docs.ListBefore(ctx, archiveCollection, before, limit, func(key string, raw []byte) error {
		var ro rollout.Rollout
		if err := json.Unmarshal(raw, &ro); err != nil {
			return fmt.Errorf("decoding rollout: %w", err)
		}
		p.Rollouts = append(p.Rollouts, ro)
		last, n = key, n+1
		return nil
	})
	if err != nil {
		return p, fmt.Errorf("listing finished rollouts: %w", err)
	}
	if n == limit {
		p.Next = last
	}
	return p, nil
}

// App returns an application's state (zero if none yet).
func (r *Repo) App(ctx context.Context, name string) (rollout.AppState, error) {
	st := rollout.AppState{Name: name}
	if _, err := r.docs.Get(ctx, appsCollection, name, &st); err != nil {
		return st, fmt.Errorf("reading application %s: %w", name, err)
	}
	return st, nil
}

// UpdateApp changes an application's state in one transaction.
func (r *Repo) UpdateApp(ctx context.Context, name string, fn func(*rollout.AppState) error) error {
	var st rollout.AppState
	err := r.docs.Update(ctx, appsCollection, name, &st, func(bool) error {
		st.Name = name
		return fn(&st)
	})
	if err != nil {
		return fmt.Errorf("updating application %s: %w", name, err)
	}
	return nil
}

// Fleet returns the fleet's state.
func (r *Repo) Fleet(ctx context.Context) (rollout.FleetState, error) {
	var st rollout.FleetState
	if _, err := r.docs.Get(ctx, fleetCollection, fleetKey, &st); err != nil {
		return st, fmt.Errorf("reading the fleet's state: %w", err)
	}
	return st, nil
}

// UpdateFleet changes the fleet's state in one transaction.
func (r *Repo) UpdateFleet(ctx context.Context, fn func(*rollout.FleetState) error) error {
	var st rollout.FleetState
	if err := r.docs.Update(ctx, fleetCollection, fleetKey, &st, func(bool) error { return fn(&st) }); err != nil {
		return fmt.Errorf("updating the fleet's state: %w", err)
	}
	return nil
}
