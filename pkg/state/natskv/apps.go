package natskv

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

const fleetKey = "fleet"

func appKey(name string) string { return "app." + idKey(name) }

// App returns what flotilla knows of an application (zero if nothing yet).
func (r *Repo) App(ctx context.Context, name string) (rollout.AppState, error) {
	st := rollout.AppState{Name: name}
	if _, _, err := getJSON(ctx, r.apps, appKey(name), &st); err != nil {
		return st, fmt.Errorf("reading application %s: %w", name, err)
	}
	return st, nil
}

// UpdateApp changes an application's state under its revision.
func (r *Repo) UpdateApp(ctx context.Context, name string, fn func(*rollout.AppState) error) error {
	err := r.update(ctx, appKey(name), func() any { return &rollout.AppState{Name: name} }, func(v any) error {
		st := v.(*rollout.AppState)
		st.Name = name
		return fn(st)
	})
	if err != nil {
		return fmt.Errorf("updating application %s: %w", name, err)
	}
	return nil
}

// Fleet returns the fleet's state (zero if nothing yet).
func (r *Repo) Fleet(ctx context.Context) (rollout.FleetState, error) {
	var st rollout.FleetState
	if _, _, err := getJSON(ctx, r.apps, fleetKey, &st); err != nil {
		return st, fmt.Errorf("reading the fleet's state: %w", err)
	}
	return st, nil
}

// UpdateFleet changes the fleet's state under its revision.
func (r *Repo) UpdateFleet(ctx context.Context, fn func(*rollout.FleetState) error) error {
	err := r.update(ctx, fleetKey, func() any { return &rollout.FleetState{} }, func(v any) error {
		return fn(v.(*rollout.FleetState))
	})
	if err != nil {
		return fmt.Errorf("updating the fleet's state: %w", err)
	}
	return nil
}

// update is a read-modify-write of key in the apps bucket under its
// revision (created when missing), retried on a conflict with fn run
// again on the newer value.
func (r *Repo) update(ctx context.Context, key string, zero func() any, fn func(any) error) error {
	for {
		v := zero()
		rev, found, err := getJSON(ctx, r.apps, key, v)
		if err != nil {
			return err
		}
		if err := fn(v); err != nil {
			return err
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if found {
			_, err = r.apps.Update(ctx, key, raw, rev)
		} else {
			_, err = r.apps.Create(ctx, key, raw)
		}
		if isConflict(err) {
			continue
		}
		return err
	}
}
