package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// Journal is the part of the store the runtime uses (pkg/store implements it).
type Journal interface {
	Append(ctx context.Context, evs ...cloudevents.Event) ([]store.Record, error)
	Read(ctx context.Context, after uint64, limit int) ([]store.Record, error)
	Changed() <-chan struct{}
	Cursor(ctx context.Context, consumer string) (uint64, error)
	SetCursor(ctx context.Context, consumer string, seq uint64) error
}

// Options tune the runtime. Zero values take the defaults in brackets.
type Options struct {
	Logger   *slog.Logger          // [discard]
	Metrics  prometheus.Registerer // [none]
	Attempts int                   // tries per function and event before giving up [6]
	Backoff  time.Duration         // first retry delay, doubled each time [100ms]
	Batch    int                   // events read per batch [256]
	// StallBackoff is the first wait after the journal failed (a read, an
	// append of a function's events, a cursor save), doubled each time up
	// to a minute [1s]. The runtime never exits for such a failure: it
	// reports it through Err, so that health checks fail, and retries.
	StallBackoff time.Duration
	// Observe, when set, sees every event the runtime journals (tests, live views).
	Observe func(store.Record)
}

// Runtime routes journaled events to functions.
type Runtime struct {
	j      Journal
	byType map[string][]Function
	o      Options
	m      *metrics
	// stalled is why the runtime is not making progress, nil while it is.
	stalled atomic.Pointer[error]
}

const cursorName = "runtime"

// New returns a runtime for the functions.
func New(j Journal, fns []Function, o Options) (*Runtime, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Attempts <= 0 {
		o.Attempts = 6
	}
	if o.Backoff <= 0 {
		o.Backoff = 100 * time.Millisecond
	}
	if o.Batch <= 0 {
		o.Batch = 256
	}
	if o.StallBackoff <= 0 {
		o.StallBackoff = time.Second
	}
	rt := &Runtime{j: j, byType: map[string][]Function{}, o: o}
	for _, f := range fns {
		for _, t := range f.Consumes() {
			rt.byType[t] = append(rt.byType[t], f)
		}
	}
	m, err := newMetrics(o.Metrics)
	if err != nil {
		return nil, err
	}
	rt.m = m
	return rt, nil
}

// Run processes the journal until ctx ends.
//
// The cursor is saved in the background, after each batch, by a saver that
// always writes the latest position: a cursor save (a state-file commit)
// is off the path from one function's events to the next function, and a
// crash replays at most the batches handled since the last save, which
// delivery at least once allows (functions are idempotent, their events'
// ids derived). When Run returns, the cursor of the last handled event is
// saved.
func (rt *Runtime) Run(ctx context.Context) error {
	cursor, err := rt.j.Cursor(ctx, cursorName)
	if err != nil {
		return fmt.Errorf("reading runtime cursor: %w", err)
	}
	saver := newCursorSaver(rt, cursor)
	go saver.run(ctx)
	err = rt.process(ctx, &cursor, saver)
	saver.stop()
	if serr := rt.saveCursor(ctx, cursor); serr != nil {
		return errors.Join(err, serr)
	}
	return err
}

// process handles the journal from *cursor on, advancing it, until ctx
// ends. A journal that fails (a read, an append, a cursor save: a full or
// failing disk) stalls it, visibly (Err), without losing its place: it waits
// and retries from the event it was at, since the events a function returned
// were not journaled and the function is idempotent.
func (rt *Runtime) process(ctx context.Context, cursor *uint64, saver *cursorSaver) error {
	stall := newStaller(rt)
	for {
		changed := rt.j.Changed()
		recs, err := rt.j.Read(ctx, *cursor, rt.o.Batch)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			stall.wait(ctx, fmt.Errorf("reading journal: %w", err))
			continue
		}
		if len(recs) == 0 {
			stall.clear() // the journal reads, and nothing is pending
			select {
			case <-ctx.Done():
				return nil
			case <-changed:
				continue
			}
		}
		if err := rt.handleBatch(ctx, recs, cursor); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			stall.wait(ctx, err)
			continue
		}
		if err := saver.set(*cursor); err != nil {
			// Saves run in the background; after one failed, handle no
			// more until one works, so a restart replays a bounded window.
			for err != nil && ctx.Err() == nil {
				stall.wait(ctx, err)
				err = rt.saveCursor(ctx, *cursor)
			}
		}
		stall.clear()
	}
}

// handleBatch dispatches recs in order, advancing *cursor past each one
// handled. Only a journal failure (or ctx) stops it.
func (rt *Runtime) handleBatch(ctx context.Context, recs []store.Record, cursor *uint64) error {
	for _, rec := range recs {
		if rec.Err != nil {
			if err := rt.quarantine(ctx, rec); err != nil {
				return err
			}
			*cursor = rec.Seq
			continue
		}
		if err := rt.dispatch(ctx, rec.Event); err != nil {
			// The cursor stays before the event that was interrupted.
			return err
		}
		*cursor = rec.Seq
	}
	return nil
}

// quarantine sets aside a record that is intact on disk but not a readable
// event (one written before the journal checked that events read back):
// it is recorded as an event.quarantined event and the runtime goes on.
// One such record once stopped the engine on every start.
func (rt *Runtime) quarantine(ctx context.Context, rec store.Record) error {
	rt.m.quarantined.Inc()
	rt.o.Logger.Error("journal record is not a readable event; quarantined", "seq", rec.Seq, "error", rec.Err)
	e, err := events.New(fmt.Sprintf("quarantined-%d", rec.Seq), "/flotilla/runtime", events.TypeEventQuarantined,
		events.EventQuarantined{Seq: rec.Seq, Error: rec.Err.Error()})
	if err != nil {
		return fmt.Errorf("recording quarantined record %d: %w", rec.Seq, err)
	}
	recs, err := rt.j.Append(context.WithoutCancel(ctx), e)
	if err != nil {
		return fmt.Errorf("recording quarantined record %d: %w", rec.Seq, err)
	}
	if rt.o.Observe != nil {
		for _, r := range recs {
			rt.o.Observe(r)
		}
	}
	return nil
}

// Err returns why the runtime is stalled (the journal failed to read,
// append or save its cursor; it retries), nil while it makes progress.
// Health checks report it.
func (rt *Runtime) Err() error {
	if p := rt.stalled.Load(); p != nil {
		return *p
	}
	return nil
}

// staller waits, with a growing backoff, while the journal fails.
type staller struct {
	rt    *Runtime
	delay time.Duration
}

func newStaller(rt *Runtime) *staller { return &staller{rt: rt, delay: rt.o.StallBackoff} }

func (s *staller) wait(ctx context.Context, err error) {
	s.rt.stalled.Store(&err)
	s.rt.m.stalls.Inc()
	s.rt.o.Logger.Error("runtime stalled: the journal failed; retrying (nothing acknowledged is lost)",
		"error", err, "retry_in", s.delay)
	select {
	case <-ctx.Done():
	case <-time.After(s.delay):
	}
	s.delay = min(2*s.delay, time.Minute)
}

func (s *staller) clear() {
	if s.rt.stalled.Load() != nil {
		s.rt.stalled.Store(nil)
		s.rt.o.Logger.Info("runtime resumed")
	}
	s.delay = s.rt.o.StallBackoff
}

// saveCursor records cursor so that a restart does not replay what was
// handled already.
func (rt *Runtime) saveCursor(ctx context.Context, cursor uint64) error {
	if err := rt.j.SetCursor(context.WithoutCancel(ctx), cursorName, cursor); err != nil {
		return fmt.Errorf("saving runtime cursor: %w", err)
	}
	return nil
}

// dispatch hands one event to every function that consumes it.
func (rt *Runtime) dispatch(ctx context.Context, e cloudevents.Event) error {
	rt.m.processed.WithLabelValues(e.Type()).Inc()
	for _, f := range rt.byType[e.Type()] {
		out, err := rt.call(ctx, f, e)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			out, err = rt.failed(f, e, err)
			if err != nil {
				return err
			}
		}
		if len(out) == 0 {
			continue
		}
		recs, err := rt.j.Append(context.WithoutCancel(ctx), out...)
		if events.IsPermanent(err) {
			// The journal refuses these events (one would not read back):
			// retrying cannot help; the function failed.
			if out, err = rt.failed(f, e, fmt.Errorf("journaling its events: %w", err)); err == nil {
				recs, err = rt.j.Append(context.WithoutCancel(ctx), out...)
			}
		}
		if err != nil {
			return fmt.Errorf("journaling events of %s: %w", f.Name(), err)
		}
		if rt.o.Observe != nil {
			for _, r := range recs {
				rt.o.Observe(r)
			}
		}
	}
	return nil
}

// call runs f on e, retrying errors that are not permanent.
func (rt *Runtime) call(ctx context.Context, f Function, e cloudevents.Event) ([]cloudevents.Event, error) {
	log := rt.o.Logger.With("function", f.Name(), "event_id", e.ID(), "event_type", e.Type(), "rollout_id", events.RolloutID(e))
	delay := rt.o.Backoff
	var err error
	for attempt := 1; attempt <= rt.o.Attempts; attempt++ {
		start := time.Now()
		var out []cloudevents.Event
		out, err = f.Handle(ctx, e)
		rt.m.observe(f.Name(), err, time.Since(start))
		if err == nil {
			log.Debug("handled", "emitted", len(out), "took", time.Since(start))
			return out, nil
		}
		if events.IsPermanent(err) || ctx.Err() != nil || attempt == rt.o.Attempts {
			return nil, err
		}
		log.Warn("handler failed, retrying", "attempt", attempt, "error", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
	return nil, err // not reached: the last attempt returns above
}

// failed records that f gave up on e, as an event in the journal.
func (rt *Runtime) failed(f Function, e cloudevents.Event, cause error) ([]cloudevents.Event, error) {
	rt.o.Logger.Error("function gave up on event", "function", f.Name(), "event_id", e.ID(),
		"event_type", e.Type(), "rollout_id", events.RolloutID(e), "error", cause)
	ev, err := events.Derive(e, events.TypeFunctionFailed, f.Name(), events.FunctionFailed{
		Function: f.Name(), EventID: e.ID(), EventType: e.Type(), Error: cause.Error(), Permanent: events.IsPermanent(cause),
	})
	if err != nil {
		return nil, errors.Join(cause, err)
	}
	return []cloudevents.Event{ev}, nil
}
