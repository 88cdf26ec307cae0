package app

import (
	"context"
	"errors"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
	"github.com/flotilla-cd/flotilla/pkg/state"
)

// What `flotilla simulate` (pkg/simulate) drives the engine through: it
// journals what the world sends (pushes, people's approvals and controls),
// reads the journal and the rollouts, and advances its virtual clock
// (Options.Clock) only while the engine is idle.

// Journal appends events to the bus, as the intake does once a webhook is
// authenticated and parsed.
func (s *Server) Journal(ctx context.Context, evs ...cloudevents.Event) error {
	_, err := s.bus.Append(ctx, evs...)
	return err
}

// ReadJournal reads up to limit records after seq.
func (s *Server) ReadJournal(ctx context.Context, after uint64, limit int) ([]bus.Record, error) {
	return s.bus.Read(ctx, after, limit)
}

// Rollouts is the rollout state.
func (s *Server) Rollouts() state.Rollouts { return s.repo }

// NextTimer is when the engine's earliest timer is due (ok false: none).
func (s *Server) NextTimer(ctx context.Context) (time.Time, bool, error) {
	return s.bus.NextDue(ctx)
}

// errNotEmbedded: the idleness of the engine is known in embedded mode only.
var errNotEmbedded = errors.New("simulation needs the embedded store (no server.bus)")

// Idle tells whether the engine has nothing to do at now: every journaled
// event handled by the dispatcher (its functions' events journaled), and no
// timer due at or before now.
func (s *Server) Idle(ctx context.Context, now time.Time) (bool, error) {
	d, ok := s.dispatch.(*dispatch.Dispatcher)
	if !ok || s.store == nil {
		return false, errNotEmbedded
	}
	if d.Handled() < s.store.LastSeq() {
		return false, nil
	}
	due, ok, err := s.store.NextDue(ctx)
	if err != nil {
		return false, err
	}
	return !ok || due.After(now), nil
}
