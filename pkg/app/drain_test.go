package app

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// drainProbe is an engine that records what runDrained asks of it and in
// which order (a probe of the orchestration: the dispatchers' drain is
// tested in pkg/dispatch, on a real store).
type drainProbe struct {
	mu  sync.Mutex
	log []string
	run context.Context
	ran chan struct{} // closed once Run runs
}

func (p *drainProbe) note(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, s)
}

func (p *drainProbe) Run(ctx context.Context) error {
	p.mu.Lock()
	p.run = ctx
	p.mu.Unlock()
	p.note("run")
	close(p.ran)
	<-ctx.Done()
	p.note("run stopped")
	return nil
}

func (p *drainProbe) Drain(ctx context.Context) error {
	p.mu.Lock()
	alive := p.run.Err() == nil
	p.mu.Unlock()
	if alive {
		p.note("drain, running")
	} else {
		p.note("drain, stopped already")
	}
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("a drain without a deadline")
	}
	return nil
}

func (*drainProbe) Err() error { return nil }

// A graceful stop drains the engine while it still runs, then stops it.
func TestRunDrainedDrainsBeforeStopping(t *testing.T) {
	p := &drainProbe{ran: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- runDrained(ctx, p, slog.New(slog.DiscardHandler)) }()
	<-p.ran
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"run", "drain, running", "run stopped"}, p.log); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}
