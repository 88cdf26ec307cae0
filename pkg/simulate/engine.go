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
// once: past it the scenario fails (an engine that never settles is a bug
// the simulation shows).
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
	done     chan error
	dir      string
	seq      uint64
	timeline []entry
	start    time.Time
}

// startEngine builds and runs flotilla for cfg (loaded into dir) at
// virtual time start.
func startEngine(ctx context.Context, cfg *config.Config, dir string, clock *dispatch.ManualClock, fleet *Fleet) (*engine, error) {
	en := &engine{cfg: cfg, clock: clock, fleet: fleet, dir: dir, done: make(chan error, 1), start: clock.Now()}
	srv, err := app.New(ctx, cfg, app.Options{
		Listen:   "127.0.0.1:0",
		DataDir:  filepath.Join(dir, "data"),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registry: prometheus.NewRegistry(),
		Resolver: fleet,
		Executor: fleet,
		Canaries: fleet,
		Clock:    clock,
		NoPrune:  true,
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
	go func() { en.done <- srv.Run(rctx) }()
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
	case err = <-en.done:
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

// settleQuiet is how many checks 1 ms apart must find the engine idle
// before the clock may move: a heuristic (a goroutine kept from a CPU for
// longer than that looks idle), so on a loaded machine a step can land one
// timer later (seen: a rollout ending 2h1m0s after the push, not 2h0m40s).
const settleQuiet = 10

// settle waits until the engine is idle at the current virtual time: every
// event handled, no timer due, nothing the simulated Flagger has due; it
// then stamps the new journal records with the virtual time.
func (en *engine) settle(ctx context.Context) error {
	deadline := time.Now().Add(settleTimeout)
	stable := 0
	for stable < settleQuiet {
		if time.Now().After(deadline) {
			return fmt.Errorf("the engine did not settle within %s of wall time at virtual %s", settleTimeout, en.clock.Now().Format(time.RFC3339))
		}
		select {
		case err := <-en.done:
			en.done <- err
			return fmt.Errorf("the engine stopped: %v", err)
		default:
		}
		acted, err := en.fleet.fireDue(ctx)
		if err != nil {
			return err
		}
		idle, err := en.srv.Idle(ctx, en.clock.Now())
		if err != nil {
			return err
		}
		if idle && !acted {
			stable++
		} else {
			stable = 0
		}
		if stable < settleQuiet {
			time.Sleep(time.Millisecond)
		}
	}
	return en.record(ctx)
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

// next is when something happens next: the engine's earliest timer or the
// simulated Flagger's next step.
func (en *engine) next(ctx context.Context) (time.Time, bool, error) {
	t, ok, err := en.srv.NextTimer(ctx)
	if err != nil {
		return time.Time{}, false, err
	}
	if f, fok := en.fleet.nextAction(); fok && (!ok || f.Before(t)) {
		t, ok = f, true
	}
	return t, ok, nil
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
		next, ok, err := en.next(ctx)
		if err != nil {
			return err
		}
		if !ok || next.After(until) {
			en.clock.Set(until)
			return en.settle(ctx)
		}
		en.clock.Set(next)
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
		_, ok, err := en.next(ctx)
		stuck = !ok
		return stuck, err
	})
	return err
}

// rollouts lists the scenario's rollouts, oldest first.
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
	slices.SortStableFunc(out, func(a, b rollout.Rollout) int { return a.Created.Compare(b.Created) })
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
