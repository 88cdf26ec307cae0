package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/logctx"
)

// Journal is the bus the dispatcher reads and appends to (pkg/store is the
// embedded adapter).
type Journal = bus.Bus

// Options tune the dispatcher. Zero values take the defaults in brackets.
type Options struct {
	Logger  *slog.Logger          // [discard]
	Metrics prometheus.Registerer // [none]
	// Workers bounds the functions running at once, across keys
	// [DefaultWorkers].
	Workers int
	// CallTimeout is the deadline of one function call; a call that
	// passes it is retried like any other failure [DefaultCallTimeout].
	CallTimeout time.Duration
	Attempts    int           // tries per function and event before giving up [6]
	Backoff     time.Duration // first retry delay, doubled each time up to 5s [100ms]
	Batch       int           // events read per batch [256]
	// MaxInFlight bounds the events read but not yet handled; the reader
	// waits while that many are [4096].
	MaxInFlight int
	// StallBackoff is the first wait after the journal failed (a read, an
	// append of a function's events, a cursor save), doubled each time up
	// to a minute [1s]. The dispatcher never exits for such a failure: it
	// reports it through Err, so that health checks fail, and retries.
	StallBackoff time.Duration
	// WriteTimeout is the deadline of each of the dispatcher's own journal
	// writes (a function's events and timers, a quarantine record, a
	// cursor save), so that a hung disk stalls it visibly (Err) instead of
	// hanging its workers and its shutdown [DefaultWriteTimeout].
	WriteTimeout time.Duration
	// Observe, when set, sees every event the dispatcher journals (tests,
	// live views).
	Observe func(bus.Record)
	// Clock is the time timers follow [WallClock].
	Clock Clock
	// Sequential handles one event at a time, in journal order across
	// keys and lanes (a retry in its place once due, a burst not folded),
	// on one worker instead of Workers and the lanes' own: the same events
	// in make the same journal every run, whatever the machine's load.
	// For `flotilla simulate`, whose reports must not differ between two
	// runs; a server never sets it, as it gives up the parallelism that
	// keeps one slow cluster or pipeline from holding up another rollout.
	Sequential bool

	// slots, when set (by Shards), bounds the calls of each lane across
	// the dispatchers sharing it, so that Workers (and each lane's
	// workers) bound a replica's calls however many partitions it holds.
	slots *slots
}

// Defaults of [Options].
const (
	DefaultWorkers     = 16
	DefaultCallTimeout = 10 * time.Minute
	// DefaultWriteTimeout is far beyond a healthy fsync (milliseconds)
	// and a loaded disk's (seconds).
	DefaultWriteTimeout = time.Minute
)

// Dispatcher routes journaled events to the functions that consume them:
// the events of one key (see [Key]) in journal order, one at a time;
// different keys in parallel on a bounded pool of workers.
type Dispatcher struct {
	j      Journal
	byType map[string][]Function
	// selective: the types some consumer of takes only in part
	// (Selective).
	selective map[string]bool
	// lanes: the default lane, and the lane of each consumed type.
	lane   *lane
	laneOf map[string]*lane
	o      Options
	m      *metrics
	// stalled is why the dispatcher is not making progress, nil while it is.
	stalled atomic.Pointer[error]
	// sched is Run's scheduler, nil before Run; started is closed once
	// it is set.
	sched     atomic.Pointer[scheduler]
	started   chan struct{}
	startOnce sync.Once
	// act signals every change of the work in flight (WaitIdle).
	act activity
	// held keeps a Sequential dispatcher from starting another event
	// (Hold).
	held atomic.Bool
}

// consumers are the functions e is handed to: those consuming its type,
// less a Selective one that does not want it.
func (d *Dispatcher) consumers(e cloudevents.Event) []Function {
	fns := d.byType[e.Type()]
	if !d.selective[e.Type()] {
		return fns
	}
	out := make([]Function, 0, len(fns))
	for _, f := range fns {
		if s, ok := f.(Selective); ok && !s.Wants(e) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// cursorName is the dispatcher's cursor in the journal (named when it was
// the runtime's: stores keep it).
const cursorName = "runtime"

// New returns a dispatcher for the functions.
func New(j Journal, fns []Function, o Options) (*Dispatcher, error) {
	// Every line logged with a call's ctx carries the event's rollout id
	// (logctx), through this logger or any other wrapped likewise.
	o.Logger = logctx.Wrap(o.Logger)
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
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
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 4096
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.StallBackoff <= 0 {
		o.StallBackoff = time.Second
	}
	if o.Clock == nil {
		o.Clock = WallClock
	}
	def, laneOf, err := buildLanes(o, fns)
	if err != nil {
		return nil, err
	}
	d := &Dispatcher{j: j, byType: map[string][]Function{}, selective: map[string]bool{}, lane: def, laneOf: laneOf, o: o, started: make(chan struct{})}
	for _, f := range fns {
		_, sel := f.(Selective)
		for _, t := range f.Consumes() {
			d.byType[t] = append(d.byType[t], f)
			d.selective[t] = d.selective[t] || sel
		}
	}
	m, err := newMetrics(o.Metrics)
	if err != nil {
		return nil, err
	}
	d.m = m
	return d, nil
}

// Run dispatches the journal from the saved cursor until ctx ends.
//
// The cursor is a watermark: every event at or below it was handled, so a
// crash replays only events that were in flight or handled after it
// (delivery at least once; functions are idempotent, their events' ids
// derived). A background saver writes it as it moves. When Run returns,
// the last watermark is saved.
func (d *Dispatcher) Run(ctx context.Context) error {
	cursor, err := d.readCursor(ctx)
	if err != nil {
		return err
	}
	saver := newCursorSaver(d, cursor)
	go saver.run(ctx)
	timers := make(chan struct{})
	go func() {
		defer close(timers)
		d.runTimers(ctx)
	}()
	defer func() { <-timers }()
	s := newScheduler(d, cursor, saver)
	d.sched.Store(s)
	d.startOnce.Do(func() { close(d.started) })
	s.run(ctx)
	saver.stop()
	return d.saveCursor(ctx, s.watermark())
}

// Drain prepares a graceful stop: the dispatcher starts no more events
// and Drain waits until the calls under way ended (their events handled
// and journaled), or ctx ends. Then cancel Run's context: what is queued
// and was not started is replayed at the next run, by this replica or the
// one its partition goes to, as after any stop; what ended is not. After
// Drain, the dispatcher only stops.
func (d *Dispatcher) Drain(ctx context.Context) error {
	if s := d.sched.Load(); s != nil {
		return s.drain(ctx)
	}
	return nil
}

// readCursor reads where the dispatcher stopped, retrying a journal that
// fails (it stalls, as a failing read or append does) until ctx ends: a
// dispatcher that gave up here would leave its partition unhandled.
func (d *Dispatcher) readCursor(ctx context.Context) (uint64, error) {
	delay := d.o.StallBackoff
	for {
		cursor, err := d.j.Cursor(ctx, cursorName)
		if err == nil {
			if delay != d.o.StallBackoff {
				d.unstall()
			}
			return cursor, nil
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("reading dispatch cursor: %w", err)
		}
		err = fmt.Errorf("reading dispatch cursor: %w", err)
		d.stall(err, delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, err
		case <-t.C:
		}
		delay = min(2*delay, time.Minute)
	}
}

// saveCursor records cursor so that a restart does not replay what was
// handled already.
func (d *Dispatcher) saveCursor(ctx context.Context, cursor uint64) error {
	wctx, cancel := d.writing(ctx)
	defer cancel()
	// A save stuck in the disk does not see its context: stop waiting
	// for it at the deadline (it ends on its own; a later save covers it).
	done := make(chan error, 1)
	go func() { done <- d.j.SetCursor(wctx, cursorName, cursor) }()
	var err error
	select {
	case err = <-done:
	case <-wctx.Done():
		err = wctx.Err()
	}
	if err != nil {
		return fmt.Errorf("saving dispatch cursor: %w", err)
	}
	return nil
}

// writing is the context of one of the dispatcher's own journal writes:
// not cancelled with ctx (what a handled event emitted must be journaled
// even as the dispatcher stops), but bounded by WriteTimeout.
func (d *Dispatcher) writing(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d.o.WriteTimeout)
}

// Err returns why the dispatcher is stalled (the journal failed to read,
// append or save its cursor; it retries), nil while it makes progress.
// Health checks report it.
func (d *Dispatcher) Err() error {
	if p := d.stalled.Load(); p != nil {
		return *p
	}
	return nil
}

func (d *Dispatcher) stall(err error, retryIn time.Duration) {
	d.stalled.Store(&err)
	d.m.stalls.Inc()
	d.o.Logger.Error("dispatch stalled: the journal failed; retrying (nothing acknowledged is lost)",
		"error", err, "retry_in", retryIn)
}

func (d *Dispatcher) unstall() {
	if d.stalled.Load() != nil && d.stalled.Swap(nil) != nil {
		d.o.Logger.Info("dispatch resumed")
	}
}

// logContext is ctx for handling e with f: every line logged with it
// carries the event's rollout id, id and type and the function's name
// (logctx), and it carries the dispatcher's logger (logctx.From) for
// functions that have none of their own.
func (d *Dispatcher) logContext(ctx context.Context, f Function, e cloudevents.Event) context.Context {
	ctx = logctx.With(ctx, logctx.RolloutID, events.RolloutID(e), "event_id", e.ID(), "event_type", e.Type(), "function", f.Name())
	return logctx.WithLogger(ctx, d.o.Logger)
}

// call runs f on e once, under the call deadline of f's lane.
func (d *Dispatcher) call(ctx context.Context, l *lane, f Function, e cloudevents.Event) ([]cloudevents.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, l.CallTimeout)
	defer cancel()
	start := time.Now()
	out, err := f.Handle(ctx, e)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		err = fmt.Errorf("%s did not finish within %s: %w", f.Name(), l.CallTimeout, err)
	}
	took := time.Since(start)
	d.m.observe(f.Name(), err, took)
	if err == nil && d.o.Logger.Enabled(ctx, slog.LevelDebug) {
		emitted := make([]string, len(out))
		for i, o := range out {
			emitted[i] = o.Type()
		}
		d.o.Logger.DebugContext(ctx, "event handled", "emitted", emitted, "took", took)
	}
	return out, err
}

// journal appends a function's events. Events the journal refuses for good
// (one would not read back) fail the function instead.
// callFolded calls f with events es of one key, under one deadline of l.
func (d *Dispatcher) callFolded(ctx context.Context, l *lane, f Folder, es []cloudevents.Event) ([][]cloudevents.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, l.CallTimeout)
	defer cancel()
	start := time.Now()
	out, err := f.HandleFolded(ctx, es)
	took := time.Since(start)
	d.m.folded.WithLabelValues(f.Name()).Observe(float64(len(out)))
	if err == nil && len(out) > 0 {
		// Each event handled counts as a call of its share of the time.
		for range out {
			d.m.observe(f.Name(), nil, took/time.Duration(len(out)))
		}
	}
	if d.o.Logger.Enabled(ctx, slog.LevelDebug) {
		d.o.Logger.DebugContext(ctx, "events folded", "events", len(es), "handled", len(out), "took", took, "error", err)
	}
	return out, err
}

func (d *Dispatcher) journal(ctx context.Context, f Function, e cloudevents.Event, out []cloudevents.Event) error {
	err := d.append(ctx, f, out)
	if fault.IsPermanent(err) {
		if out, err = d.failed(ctx, f, e, fmt.Errorf("journaling its events: %w", err)); err == nil {
			err = d.append(ctx, f, out)
		}
	}
	return err
}

// append journals the events f returned (and schedules its timers).
func (d *Dispatcher) append(ctx context.Context, f Function, out []cloudevents.Event) error {
	if len(out) == 0 {
		return nil
	}
	wctx, cancel := d.writing(ctx)
	defer cancel()
	out, later := splitDue(out, d.o.Clock.Now())
	if len(later) > 0 {
		if err := d.j.Schedule(wctx, later...); err != nil {
			return fmt.Errorf("scheduling timers of %s: %w", f.Name(), err)
		}
	}
	if len(out) == 0 {
		return nil
	}
	recs, err := d.j.Append(wctx, out...)
	if err != nil {
		return fmt.Errorf("journaling events of %s: %w", f.Name(), err)
	}
	d.observe(recs)
	return nil
}

func (d *Dispatcher) observe(recs []bus.Record) {
	if d.o.Observe != nil {
		for _, r := range recs {
			d.o.Observe(r)
		}
	}
}

// failed records that f gave up on e, as an event in the journal.
func (d *Dispatcher) failed(ctx context.Context, f Function, e cloudevents.Event, cause error) ([]cloudevents.Event, error) {
	d.o.Logger.ErrorContext(ctx, "function gave up on event", "error", cause)
	raw, err := json.Marshal(e)
	if err != nil {
		return nil, errors.Join(cause, fmt.Errorf("encoding the event given up on: %w", err))
	}
	ev, err := events.Derive(e, events.TypeFunctionFailed, f.Name(), events.FunctionFailed{
		Function: f.Name(), EventID: e.ID(), EventType: e.Type(), Error: cause.Error(), Permanent: fault.IsPermanent(cause),
		Event: raw, Subject: e.Subject(),
	})
	if err != nil {
		return nil, errors.Join(cause, err)
	}
	return []cloudevents.Event{ev}, nil
}

// quarantine sets aside a record that is intact on disk but not a readable
// event (one written before the journal checked that events read back):
// it is recorded as an event.quarantined event and dispatch goes on. One
// such record once stopped the engine on every start.
func (d *Dispatcher) quarantine(ctx context.Context, rec bus.Record) error {
	d.m.quarantined.Inc()
	d.o.Logger.Error("journal record is not a readable event; quarantined", "seq", rec.Seq, "error", rec.Err)
	e, err := events.New(fmt.Sprintf("quarantined-%d", rec.Seq), "/flotilla/dispatch", events.TypeEventQuarantined,
		events.EventQuarantined{Seq: rec.Seq, Error: rec.Err.Error()})
	if err != nil {
		return fmt.Errorf("recording quarantined record %d: %w", rec.Seq, err)
	}
	wctx, cancel := d.writing(ctx)
	defer cancel()
	recs, err := d.j.Append(wctx, e)
	if err != nil {
		return fmt.Errorf("recording quarantined record %d: %w", rec.Seq, err)
	}
	d.observe(recs)
	return nil
}
