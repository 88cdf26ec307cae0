package rollout

import (
	cloudevents "github.com/cloudevents/sdk-go/v2"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/flotilla-cd/flotilla/pkg/store"
	"sort"
	"time"
)

// Documents is the part of the store the Repo needs (pkg/store implements it).
type Documents interface {
	Get(ctx context.Context, collection, key string, v any) (bool, error)
	Update(ctx context.Context, collection, key string, v any, fn func(found bool) error) error
	UpdateAndAppend(ctx context.Context, collection, key string, v any, fn func(found bool) ([]cloudevents.Event, error)) ([]store.Record, error)
	List(ctx context.Context, collection string, fn func(key string, raw []byte) error) error
}

const (
	rolloutsCollection = "rollouts"
	appsCollection     = "applications"
)

// ErrNotFound is returned for an unknown rollout.
var ErrNotFound = errors.New("rollout not found")

// Repo keeps rollouts and application state.
type Repo struct {
	docs Documents
	now  func() time.Time
}

// NewRepo returns a Repo over docs; now defaults to time.Now.
func NewRepo(docs Documents, now func() time.Time) *Repo {
	if now == nil {
		now = time.Now
	}
	return &Repo{docs: docs, now: now}
}

// Get returns a rollout by id, or ErrNotFound.
func (r *Repo) Get(ctx context.Context, id string) (Rollout, error) {
	var ro Rollout
	found, err := r.docs.Get(ctx, rolloutsCollection, id, &ro)
	if err != nil {
		return ro, fmt.Errorf("reading rollout %s: %w", id, err)
	}
	if !found {
		return ro, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return ro, nil
}

// Create stores a new rollout unless one with its id exists; it reports
// whether it created it (a redelivered event finds it already there).
func (r *Repo) Create(ctx context.Context, ro Rollout) (created bool, err error) {
	var cur Rollout
	err = r.docs.Update(ctx, rolloutsCollection, ro.ID, &cur, func(found bool) error {
		if found {
			return errExists
		}
		now := r.now().UTC()
		ro.Created, ro.Updated = now, now
		cur = ro
		return nil
	})
	if errors.Is(err, errExists) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("creating rollout %s: %w", ro.ID, err)
	}
	return true, nil
}

var errExists = errors.New("exists")

// Update changes a rollout in one transaction and returns the result.
func (r *Repo) Update(ctx context.Context, id string, fn func(*Rollout) error) (Rollout, error) {
	var ro Rollout
	err := r.docs.Update(ctx, rolloutsCollection, id, &ro, func(found bool) error {
		if !found {
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		if err := fn(&ro); err != nil {
			return err
		}
		ro.Updated = r.now().UTC()
		return nil
	})
	if err != nil {
		return ro, fmt.Errorf("updating rollout %s: %w", id, err)
	}
	return ro, nil
}

// UpdateEmit changes a rollout and journals the events fn returns in the same
// transaction, so a transition and the events that announce it survive a
// crash together: a redelivered input finds the state moved on and must not
// have to announce the move again.
func (r *Repo) UpdateEmit(ctx context.Context, id string, fn func(*Rollout) ([]cloudevents.Event, error)) (Rollout, []cloudevents.Event, error) {
	var (
		ro  Rollout
		out []cloudevents.Event
	)
	_, err := r.docs.UpdateAndAppend(ctx, rolloutsCollection, id, &ro, func(found bool) ([]cloudevents.Event, error) {
		if !found {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		var err error
		if out, err = fn(&ro); err != nil {
			return nil, err
		}
		ro.Updated = r.now().UTC()
		return out, nil
	})
	if err != nil {
		return ro, nil, fmt.Errorf("updating rollout %s: %w", id, err)
	}
	return ro, out, nil
}

// List returns every rollout, newest first.
func (r *Repo) List(ctx context.Context) ([]Rollout, error) {
	var out []Rollout
	err := r.docs.List(ctx, rolloutsCollection, func(_ string, raw []byte) error {
		var ro Rollout
		if err := json.Unmarshal(raw, &ro); err != nil {
			return fmt.Errorf("decoding rollout: %w", err)
		}
		out = append(out, ro)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing rollouts: %w", err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out, nil
}

// App returns an application's state (zero if none yet).
func (r *Repo) App(ctx context.Context, name string) (AppState, error) {
	st := AppState{Name: name}
	if _, err := r.docs.Get(ctx, appsCollection, name, &st); err != nil {
		return st, fmt.Errorf("reading application %s: %w", name, err)
	}
	return st, nil
}

// UpdateApp changes an application's state in one transaction.
func (r *Repo) UpdateApp(ctx context.Context, name string, fn func(*AppState) error) error {
	var st AppState
	err := r.docs.Update(ctx, appsCollection, name, &st, func(bool) error {
		st.Name = name
		return fn(&st)
	})
	if err != nil {
		return fmt.Errorf("updating application %s: %w", name, err)
	}
	return nil
}
