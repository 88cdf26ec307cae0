package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
)

// Shards run, in scale-out mode, one dispatcher per partition of the bus
// this replica holds (pkg/bus/natsjs's Partitions decide which): Set starts
// the dispatchers of partitions gained and stops those of partitions lost,
// each on its partition's view of the bus, with its own cursor and timers.
// A stopped dispatcher saves its watermark; what it had in flight is
// replayed by the partition's next holder (delivery at least once, as
// after a crash).
type Shards struct {
	view func(p int) (Journal, error)
	fns  []Function
	o    Options
	ctx  context.Context

	mu      sync.Mutex
	running map[int]*shard
	errs    map[int]error // a partition whose dispatcher could not start
}

type shard struct {
	d      *Dispatcher
	cancel context.CancelFunc
	done   chan struct{}
}

// NewShards returns shards that run fns on the views view opens, with
// options o, until ctx ends or Close.
func NewShards(ctx context.Context, view func(p int) (Journal, error), fns []Function, o Options) *Shards {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.slots = &slots{byLane: map[string]chan struct{}{}}
	return &Shards{view: view, fns: fns, o: o, ctx: ctx, running: map[int]*shard{}, errs: map[int]error{}}
}

// Set makes the running dispatchers those of owned: it returns once those
// of partitions no longer owned have stopped, so a partition's lease is
// released only after its work here ended.
func (s *Shards) Set(owned []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var stopping []*shard
	for p, sh := range s.running {
		if !slices.Contains(owned, p) {
			sh.cancel()
			stopping = append(stopping, sh)
			delete(s.running, p)
		}
	}
	for p := range s.errs {
		if !slices.Contains(owned, p) {
			delete(s.errs, p)
		}
	}
	for _, sh := range stopping {
		<-sh.done
	}
	for _, p := range owned {
		if _, ok := s.running[p]; ok {
			continue
		}
		if err := s.start(p); err != nil {
			s.errs[p] = err
			s.o.Logger.Error("starting the dispatcher of a partition", "partition", p, "error", err)
		}
	}
}

// start runs partition p's dispatcher. Holds mu.
func (s *Shards) start(p int) error {
	j, err := s.view(p)
	if err != nil {
		return err
	}
	d, err := New(j, s.fns, s.o)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(s.ctx)
	sh := &shard{d: d, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(sh.done)
		if err := d.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			s.o.Logger.Warn("the dispatcher of a partition stopped", "partition", p, "error", err)
		}
	}()
	s.running[p] = sh
	delete(s.errs, p)
	return nil
}

// Drain drains every running dispatcher at once (see [Dispatcher.Drain])
// and waits for them, or until ctx ends. The caller keeps the partitions'
// leases meanwhile, then stops the dispatchers (Set(nil), Close).
func (s *Shards) Drain(ctx context.Context) error {
	s.mu.Lock()
	running := make([]*shard, 0, len(s.running))
	for _, sh := range s.running {
		running = append(running, sh)
	}
	s.mu.Unlock()
	errs := make([]error, len(running))
	var wg sync.WaitGroup
	for i, sh := range running {
		wg.Go(func() { errs[i] = sh.d.Drain(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Running returns the partitions whose dispatchers run.
func (s *Shards) Running() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int, 0, len(s.running))
	for p := range s.running {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// Err reports a partition whose dispatcher is stalled or could not start.
func (s *Shards) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for p, err := range s.errs {
		errs = append(errs, fmt.Errorf("partition %d: %w", p, err))
	}
	for p, sh := range s.running {
		if err := sh.d.Err(); err != nil {
			errs = append(errs, fmt.Errorf("partition %d: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// Close stops every dispatcher.
func (s *Shards) Close() { s.Set(nil) }
