package state

import (
	"context"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Rollouts is the rollout state.
//
// Update and UpdateEmit are optimistic: fn gets the current rollout and
// may be called again (with a newer one) when another writer changed it
// meanwhile, so fn must depend on nothing but its argument and what it
// captured. A rollout's Version grows with every update. A finished rollout
// (Succeeded, RolledBack) is archived: Get finds it, updates leave it as it
// is, ListInFlight no longer has it.
type Rollouts interface {
	// Get returns a rollout, or an error wrapping rollout.ErrNotFound.
	Get(ctx context.Context, id string) (rollout.Rollout, error)
	// Phase returns a rollout's phase, or an error wrapping
	// rollout.ErrNotFound, without copying the rollout: a question every
	// pipeline run asks (has its rollout ended?), 1,000 times in a wave of
	// 1,000 clusters, of a document of 1,001.
	Phase(ctx context.Context, id string) (rollout.Phase, error)
	// Create stores a new rollout unless one with its id exists (in flight
	// or archived); it reports whether it did.
	Create(ctx context.Context, ro rollout.Rollout) (bool, error)
	// Update changes a rollout and returns it.
	Update(ctx context.Context, id string, fn func(*rollout.Rollout) error) (rollout.Rollout, error)
	// UpdateEmit changes a rollout and puts the events fn returns on the
	// bus, both or (a crash) neither: a transactional outbox.
	UpdateEmit(ctx context.Context, id string, fn func(*rollout.Rollout) ([]cloudevents.Event, error)) (rollout.Rollout, []cloudevents.Event, error)
	// ListInFlight returns the rollouts not finished, newest first.
	ListInFlight(ctx context.Context) ([]rollout.Rollout, error)
	// List returns a page: on the first (before "") every rollout in
	// flight, then up to limit finished ones, newest first.
	List(ctx context.Context, before string, limit int) (rollout.Page, error)

	// App returns what flotilla knows of an application (zero if nothing
	// yet); UpdateApp changes it.
	App(ctx context.Context, name string) (rollout.AppState, error)
	UpdateApp(ctx context.Context, name string, fn func(*rollout.AppState) error) error

	// Fleet returns the fleet's state (zero if nothing yet); UpdateFleet
	// changes it.
	Fleet(ctx context.Context) (rollout.FleetState, error)
	UpdateFleet(ctx context.Context, fn func(*rollout.FleetState) error) error
}
