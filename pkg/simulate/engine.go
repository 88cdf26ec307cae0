package simulate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/app"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
	"github.com/flotilla-cd/flotilla/pkg/resync"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// settleTimeout bounds the wall time the engine may take to become idle
// at one virtual instant: past it the scenario fails (an engine that never
// settles is a bug the simulation shows).
const settleTimeout = 60 * time.Second

// maxVirtual bounds how far in virtual time a scenario may run waiting for
// its rollout to end.
const maxVirtual = 90 * 24 * time.Hour

// entry is one journaled event at its virtual time.
type entry struct {
	at time.Time
	e  cloudevents.Event
}

// engine is one scenario's flotilla: the real engine on a virtual clock
// and a simulated fleet.
type engine struct {
	cfg      *config.Config
	clock    *dispatch.ManualClock
	fleet    *Fleet
	srv      *app.Server
	cancel   context.CancelFunc
	stopped  chan struct{} // closed when the engine's Run returned
	runErr   error         // what Run returned, once stopped is closed
	dir      string
	seq      uint64
	timeline []entry
	start    time.Time
	// next is when something happens next, as of the last settle: the
	// engine's earliest timer or retry, or the simulated Flagger's next
	// step (nextOK false: nothing).
	next   time.Time
	nextOK bool
}

// startEngine builds and runs flotilla for cfg (loaded into dir) at
// virtual time start.
func startEngine(ctx context.Context, cfg *config.Config, dir string, clock *dispatch.ManualClock, fleet *Fleet) (*engine, error) {
	en := &engine{cfg: cfg, clock: clock, fleet: fleet, dir: dir, stopped: make(chan struct{}), start: clock.Now()}
	srv, err := app.New(ctx, cfg, app.Options{
		Listen:   "127.0.0.1:0",
		DataDir:  filepath.Join(dir, "data"),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registry: prometheus.NewRegistry(),
		Resolver: fleet,
		Executor: fleet,
		Canaries: fleet,
		GitRepos: fleet,
		Clock:    clock,
		NoPrune:  true,
		// One event at a time in journal order: the same scenario
		// journals the same events in the same order every run.
		Sequential: true,
		// The state is thrown away at exit: no sync of each write.
		NoSync: true,
		// Resync reads the clusters, which the simulation does not reach.
		Resync: resync.Options{Interval: 365 * 24 * time.Hour},
	})
	if err != nil {
		return nil, err
	}
	en.srv = srv
	recv, ok := flaggerReceiver(cfg)
	if !ok {
		_ = srv.Close()
		return nil, errors.New("the config has no receiver of type flagger")
	}
	fleet.hookURL = app.FlaggerHookURL("http://"+srv.Addr(), recv.Name, recv.SecretValue)
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	en.cancel = cancel
	go func() {
		en.runErr = srv.Run(rctx)
		close(en.stopped)
	}()
	return en, nil
}

func flaggerReceiver(cfg *config.Config) (config.Receiver, bool) {
	for _, r := range cfg.Receivers {
		if r.Type == "flagger" {
			return r, true
		}
	}
	return config.Receiver{}, false
}

// stop ends the engine and removes its state.
func (en *engine) stop() error {
	en.cancel()
	var err error
	select {
	case <-en.stopped:
		err = en.runErr
	case <-time.After(10 * time.Second):
		err = errors.New("the engine did not stop within 10s")
	}
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return errors.Join(err, en.srv.Close(), os.RemoveAll(en.dir))
}

// journal appends what the world sends, then lets the engine settle.
func (en *engine) journal(ctx context.Context, evs ...cloudevents.Event) error {
	if err := en.srv.Journal(ctx, evs...); err != nil {
		return err
	}
	return en.settle(ctx)
}

// settle waits until nothing is left to do at the current virtual time,
// exactly: the engine idle (every event handled in every lane, no timer
// or retry due: app.Server.WaitIdle), then the simulated Flagger's actions
// due now done as bursts (fireDue), the engine idle again after each. It then
// stamps the new journal records with the virtual time and notes what is
// due next. No sleep, no heuristic: how long a goroutine waited for a CPU
// changes no virtual time.
func (en *engine) settle(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	go func() {
		select {
		case <-en.stopped:
			cancel()
		case <-wctx.Done():
		}
	}()
	for {
		next, ok, err := en.srv.WaitIdle(wctx)
		if err != nil {
			select {
			case <-en.stopped:
				return fmt.Errorf("the engine stopped: %v", en.runErr)
			default:
			}
			if ctx.Err() == nil && wctx.Err() != nil {
				return fmt.Errorf("the engine did not settle within %s of wall time at virtual %s", settleTimeout, en.clock.Now().Format(time.RFC3339))
			}
			return err
		}
		acted, err := en.fireDue(wctx)
		if err != nil {
			return err
		}
		if acted {
			continue
		}
		if f, fok := en.fleet.nextAction(); fok && (!ok || f.Before(next)) {
			next, ok = f, true
		}
		en.next, en.nextOK = next, ok
		return en.record(ctx)
	}
}

// fireDue has the simulated Flagger do what is due now as one burst
// (Fleet.fireDue), journaled whole while the engine is held: the engine
// then folds it as it folds a real wave's burst (dispatch's sequential
// fold), in the journal's order.
func (en *engine) fireDue(ctx context.Context) (bool, error) {
	if err := en.srv.Hold(); err != nil {
		return false, err
	}
	defer en.srv.Release()
	return en.fleet.fireDue(ctx)
}

// record reads the journal's new records into the timeline.
func (en *engine) record(ctx context.Context) error {
	now := en.clock.Now()
	for {
		recs, err := en.srv.ReadJournal(ctx, en.seq, 1024)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		for _, r := range recs {
			en.timeline = append(en.timeline, entry{at: now, e: r.Event})
			en.seq = r.Seq
		}
	}
}

// advance lets virtual time pass until `until`, jumping from one timer to
// the next while the engine is idle; stop, when set, ends it earlier.
func (en *engine) advance(ctx context.Context, until time.Time, stop func() (bool, error)) error {
	for {
		if err := en.settle(ctx); err != nil {
			return err
		}
		if stop != nil {
			done, err := stop()
			if err != nil || done {
				return err
			}
		}
		if !en.nextOK || en.next.After(until) {
			en.clock.Set(until)
			return en.settle(ctx)
		}
		en.clock.Set(en.next)
	}
}

// runUntilEnded lets time pass until no rollout is in flight (or nothing
// more can happen: the rollout waits for a person).
func (en *engine) runUntilEnded(ctx context.Context) error {
	limit := en.clock.Now().Add(maxVirtual)
	stuck := false
	err := en.advance(ctx, limit, func() (bool, error) {
		ros, err := en.srv.Rollouts().ListInFlight(ctx)
		if err != nil {
			return false, err
		}
		if len(ros) == 0 {
			return true, nil
		}
		stuck = !en.nextOK
		return stuck, nil
	})
	return err
}

// rollouts lists the scenario's rollouts, oldest first: by creation, then
// (two pushes at one virtual instant) by the journal's order of their
// rollout.started (or queued).
func (en *engine) rollouts(ctx context.Context) ([]rollout.Rollout, error) {
	var out []rollout.Rollout
	before := ""
	for {
		page, err := en.srv.Rollouts().List(ctx, before, 100)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Rollouts...)
		if page.Next == "" {
			break
		}
		before = page.Next
	}
	started := map[string]int{}
	for i, x := range en.timeline {
		if t := x.e.Type(); t == events.TypeRolloutStarted || t == events.TypeRolloutQueued {
			if id := events.RolloutID(x.e); id != "" {
				if _, ok := started[id]; !ok {
					started[id] = i
				}
			}
		}
	}
	slices.SortStableFunc(out, func(a, b rollout.Rollout) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return started[a.ID] - started[b.ID]
	})
	return out, nil
}

// latest is the newest rollout.
func (en *engine) latest(ctx context.Context) (rollout.Rollout, error) {
	ros, err := en.rollouts(ctx)
	if err != nil {
		return rollout.Rollout{}, err
	}
	if len(ros) == 0 {
		return rollout.Rollout{}, errors.New("no rollout was started")
	}
	return en.srv.Rollouts().Get(ctx, ros[len(ros)-1].ID)
}

// eventsOf are the timeline's entries of type typ.
func (en *engine) eventsOf(typ string) []entry {
	var out []entry
	for _, x := range en.timeline {
		if x.e.Type() == typ {
			out = append(out, x)
		}
	}
	return out
}

// newEvent makes an event the world sends.
func newEvent(id, typ string, payload any) (cloudevents.Event, error) {
	return events.New(id, "/flotilla/simulate", typ, payload)
}

// reverted are the clusters rolled back, in the order their reverts were
// asked for (pipeline runs of purpose revert), each once.
func (en *engine) reverted() []string {
	var out []string
	for _, x := range en.eventsOf(events.TypePipelineRunRequested) {
		r, err := events.Decode[events.PipelineRunRequested](x.e)
		if err == nil && r.Purpose == events.PurposeRevert && !slices.Contains(out, r.Cluster) {
			out = append(out, r.Cluster)
		}
	}
	return out
}
