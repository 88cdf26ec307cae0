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
// (Options.Clock) only once the engine is idle (WaitIdle).

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

// errScaleOut: the idleness of the engine is known with one dispatcher
// only, not in scale-out mode.
var errScaleOut = errors.New("simulation needs one dispatcher (no server.bus)")

// WaitIdle waits until the engine has nothing to do at its clock's now
// (dispatch.Dispatcher.WaitIdle: every journaled event handled by the
// functions, in every lane, or waiting for a retry due later; no timer
// due), and returns when something falls due next: a timer or a retry (ok
// false: nothing waits).
func (s *Server) WaitIdle(ctx context.Context) (time.Time, bool, error) {
	d, ok := s.dispatch.(*dispatch.Dispatcher)
	if !ok {
		return time.Time{}, false, errScaleOut
	}
	return d.WaitIdle(ctx)
}

// Hold keeps the engine from starting another event until Release
// (dispatch.Dispatcher.Hold, under Options.Sequential): `flotilla
// simulate`'s Flagger journals a wave's webhooks due at one virtual instant
// whole, and the dispatcher then folds them as a real burst is folded.
func (s *Server) Hold() error {
	d, ok := s.dispatch.(*dispatch.Dispatcher)
	if !ok {
		return errScaleOut
	}
	d.Hold()
	return nil
}

// Release lets a held engine go on.
func (s *Server) Release() {
	if d, ok := s.dispatch.(*dispatch.Dispatcher); ok {
		d.Release()
	}
}
