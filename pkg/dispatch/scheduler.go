package dispatch

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// item is one journaled event on its way through the functions that
// consume it.
type item struct {
	rec     bus.Record
	fns     []Function
	next    int           // the function to call next
	attempt int           // failed calls of fns[next]
	stalled time.Duration // the journal's backoff, while it fails
}

// partition is the queue of one key. busy means a worker owns it: it is in
// the ready queue, running, or waiting for a retry, and no other worker
// may take it, which keeps the key's events in order.
type partition struct {
	key   string
	lane  *lane
	queue []*item
	busy  bool
}

// scheduler reads the journal into partitions and runs them on workers.
type scheduler struct {
	d     *Dispatcher
	saver *cursorSaver
	// lanes: each lane's ready queue holds the partitions a worker of the
	// lane should run; at most one entry per busy partition, so it never
	// fills (capacity MaxInFlight+1).
	lanes []*lane

	mu       sync.Mutex
	parts    map[string]*partition
	win      *window
	readSeq  uint64        // the last seq read
	inflight int           // events read and not yet handled
	space    chan struct{} // closed when inflight drops below MaxInFlight
	// draining: no worker starts another key's events; running counts the
	// workers running some; idle is closed (once) when, draining, none
	// does. Atomics, not mu: a wave of 1,000 runs wakes a worker each at
	// once, and under mu they queued for it (BENCHMARKS.md, "One wave of
	// 1,000 clusters": 44 s summed in begin's Lock in one B window).
	draining atomic.Bool
	running  atomic.Int64
	idle     chan struct{}
	idleOnce sync.Once
	// parked are the partitions waiting for a retry off the workers, and
	// the instant (on the dispatcher's clock) each is tried again.
	parked map[*partition]time.Time
}

func newScheduler(d *Dispatcher, cursor uint64, saver *cursorSaver) *scheduler {
	lanes := []*lane{d.lane}
	for _, l := range d.laneOf {
		if !slices.Contains(lanes, l) {
			lanes = append(lanes, l)
		}
	}
	for _, l := range lanes {
		l.ready = make(chan *partition, d.o.MaxInFlight+1)
		// Added to, not set: the dispatchers of a replica's partitions
		// (Shards) share the gauge.
		d.m.inflight.WithLabelValues(l.metricName()).Add(0)
	}
	return &scheduler{
		d:       d,
		saver:   saver,
		lanes:   lanes,
		parts:   map[string]*partition{},
		win:     newWindow(cursor),
		readSeq: cursor,
		space:   make(chan struct{}),
		idle:    make(chan struct{}),
		parked:  map[*partition]time.Time{},
	}
}

// watermark is the highest seq at or below which everything was handled.
func (s *scheduler) watermark() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.win.last
}

// run reads and dispatches until ctx ends, then waits for the workers.
func (s *scheduler) run(ctx context.Context) {
	var wg sync.WaitGroup
	if s.d.o.Sequential {
		wg.Go(func() { s.sequential(ctx) }) // one worker for all lanes
	} else {
		for _, l := range s.lanes {
			for range l.Workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s.work(ctx, l)
				}()
			}
		}
	}
	s.read(ctx)
	wg.Wait()
	// What was in flight is replayed at the next run, by this dispatcher
	// or by the replica that takes its partition over.
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lanes {
		s.d.m.inflight.WithLabelValues(l.metricName()).Sub(float64(l.inflight))
		l.inflight = 0
	}
}

// read admits journaled events until ctx ends, at most MaxInFlight at once.
func (s *scheduler) read(ctx context.Context) {
	f := bus.Follower{
		Batch:   s.d.o.Batch,
		Backoff: s.d.o.StallBackoff,
		Ready: func(ctx context.Context, after uint64) (uint64, int, bool) {
			for {
				room := s.waitForRoom(ctx)
				if room == 0 {
					return after, 0, false
				}
				if s.saver.healthy() {
					return after, room, true
				}
				// The watermark cannot be saved: read nothing new, so that a
				// restart replays a bounded window. The saver retries.
				if !sleep(ctx, s.d.o.StallBackoff) {
					return after, 0, false
				}
			}
		},
		Stalled: func(err error, retryIn time.Duration) { s.d.stall(fmt.Errorf("reading journal: %w", err), retryIn) },
		Resumed: s.d.unstall,
	}
	s.mu.Lock()
	from := s.readSeq
	s.mu.Unlock()
	_ = f.Run(ctx, s.d.j, from, func(_ context.Context, recs []bus.Record) (uint64, error) {
		for _, rec := range recs {
			s.admit(rec)
		}
		return recs[len(recs)-1].Seq, nil
	})
}

// waitForRoom waits until fewer than MaxInFlight events are in flight and
// returns how many more may be read; 0 when ctx ended.
func (s *scheduler) waitForRoom(ctx context.Context) int {
	for {
		s.mu.Lock()
		room, space := s.d.o.MaxInFlight-s.inflight, s.space
		s.mu.Unlock()
		if room > 0 {
			return room
		}
		select {
		case <-ctx.Done():
			return 0
		case <-space:
		}
	}
}

// admit queues rec on its key's partition, or, when no function consumes
// it, counts it handled at once.
func (s *scheduler) admit(rec bus.Record) {
	var fns []Function
	key, l := fmt.Sprintf("record/%d", rec.Seq), s.d.lane
	if rec.Err == nil {
		s.d.m.processed.WithLabelValues(rec.Event.Type()).Inc()
		fns = s.d.consumers(rec.Event)
		key = Key(rec.Event)
		if tl := s.d.laneOf[rec.Event.Type()]; tl != nil && tl != s.d.lane {
			// A laned event is its own key: runs never wait for each other.
			l, key = tl, "lane/"+tl.Name+"/"+rec.Event.ID()
		}
	}
	s.mu.Lock()
	s.readSeq = rec.Seq
	s.win.add(rec.Seq)
	if rec.Err == nil && len(fns) == 0 {
		wm := s.win.finish(rec.Seq)
		s.mu.Unlock()
		s.saver.set(wm)
		s.d.act.bump()
		return
	}
	p := s.parts[key]
	if p == nil {
		p = &partition{key: key, lane: l}
		s.parts[key] = p
	}
	p.queue = append(p.queue, &item{rec: rec, fns: fns})
	s.inflight++
	p.lane.inflight++
	s.d.m.inflight.WithLabelValues(p.lane.metricName()).Inc()
	if !p.busy {
		p.busy = true
		p.lane.ready <- p // never blocks: see lanes
	}
	s.mu.Unlock()
	s.d.act.bump()
}

// work runs ready partitions of lane l until ctx ends.
func (s *scheduler) work(ctx context.Context, l *lane) {
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-l.ready:
			if !s.begin() {
				return // draining: left for the next run
			}
			if !s.d.o.slots.acquire(ctx, l) {
				s.end()
				return // not handled: the watermark stays below it
			}
			s.runHead(ctx, p)
			s.d.o.slots.release(l)
			s.end()
		}
	}
}

// begin counts a worker running a key's events, false when draining.
// It counts first and then looks, drain sets first and then counts: one
// of them sees the other (the atomics are sequentially consistent).
func (s *scheduler) begin() bool {
	s.running.Add(1)
	if s.draining.Load() {
		s.end()
		return false
	}
	return true
}

// end counts a worker done with a key's events.
func (s *scheduler) end() {
	if s.running.Add(-1) == 0 && s.draining.Load() {
		s.idleOnce.Do(func() { close(s.idle) })
	}
}

// drain stops the workers from starting anything more and waits until
// those running something are done, or ctx ends.
func (s *scheduler) drain(ctx context.Context) error {
	s.draining.Store(true)
	if s.running.Load() == 0 {
		s.idleOnce.Do(func() { close(s.idle) })
	}
	select {
	case <-s.idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("draining: calls still under way: %w", ctx.Err())
	}
}

// runHead handles the first event of p (the worker owns p). When it is
// done, the next event of p is queued behind the other ready partitions;
// when a call must be retried, p waits for its backoff off the workers.
func (s *scheduler) runHead(ctx context.Context, p *partition) {
	s.mu.Lock()
	it := p.queue[0]
	fold := foldable(p.queue)
	if s.d.o.Sequential {
		// Not a later event of the key before an earlier one of another
		// (sequential.go).
		fold = s.foldBefore(p, fold)
	}
	s.mu.Unlock()
	if len(fold) > 1 {
		if n := s.handleFolded(ctx, p.lane, fold); n > 0 {
			s.finish(p, n)
			return
		}
	}
	switch outcome, delay := s.handle(ctx, p.lane, it); outcome {
	case interrupted:
		return // not handled: the watermark stays below it
	case retry:
		s.park(ctx, p, delay)
		return
	}
	s.finish(p, 1)
}

// finish takes the first n events of p off its queue, handled, and hands
// p back to the lane when more wait (the worker owns p).
func (s *scheduler) finish(p *partition, n int) {
	s.mu.Lock()
	var wm uint64
	for _, it := range p.queue[:n] {
		wm = s.win.finish(it.rec.Seq)
	}
	clear(p.queue[:n])
	p.queue = p.queue[n:]
	if s.inflight >= s.d.o.MaxInFlight && s.inflight-n < s.d.o.MaxInFlight {
		close(s.space)
		s.space = make(chan struct{})
	}
	s.inflight -= n
	p.lane.inflight -= n
	s.d.m.inflight.WithLabelValues(p.lane.metricName()).Sub(float64(n))
	if len(p.queue) == 0 {
		p.busy = false
		delete(s.parts, p.key)
	} else {
		p.lane.ready <- p
	}
	s.mu.Unlock()
	s.saver.set(wm)
	s.d.act.bump()
}

// park has p wait delay on the dispatcher's clock, off the workers, then
// hands it back to its lane (a virtual clock: once it is set past the
// retry's instant). Meanwhile p is not work in flight for WaitIdle but a
// retry due at that instant. When ctx ends first, p is left: dispatch is
// stopping, and its event is replayed at the next run.
func (s *scheduler) park(ctx context.Context, p *partition, delay time.Duration) {
	at := s.d.o.Clock.Now().Add(delay)
	wake := s.d.until(at)
	s.mu.Lock()
	s.parked[p] = at
	s.mu.Unlock()
	s.d.act.bump()
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
		s.mu.Lock()
		delete(s.parked, p)
		p.lane.ready <- p // never blocks: see lanes
		s.mu.Unlock()
		s.d.act.bump()
	}()
}

// foldable is the run of events at the head of q that one Folder may
// take at once: each untried, read whole, and for that function alone.
func foldable(q []*item) []*item {
	var f Folder
	for i, it := range q {
		if i == MaxFold || it.rec.Err != nil || it.next != 0 || it.attempt != 0 || it.stalled != 0 || len(it.fns) != 1 {
			return q[:i]
		}
		g, ok := it.fns[0].(Folder)
		if !ok || (f != nil && g != f) {
			return q[:i]
		}
		f = g
	}
	return q
}

// handleFolded hands the events of items, all for one Folder, to it at
// once, and journals what it derived from the prefix it handled: the
// number of items handled, 0 when none was (each is then handled alone).
func (s *scheduler) handleFolded(ctx context.Context, l *lane, items []*item) int {
	f := items[0].fns[0].(Folder)
	es := make([]cloudevents.Event, len(items))
	for i, it := range items {
		es[i] = it.rec.Event
	}
	fctx := s.d.logContext(ctx, f, es[0])
	outs, err := s.d.callFolded(fctx, l, f, es)
	if err != nil || len(outs) == 0 || len(outs) > len(es) {
		if err != nil && ctx.Err() == nil {
			s.d.o.Logger.DebugContext(fctx, "folded events failed, handling them one at a time", "events", len(es), "error", err)
		}
		return 0
	}
	var all []cloudevents.Event
	for _, out := range outs {
		all = append(all, out...)
	}
	if err := s.d.append(fctx, f, all); err != nil {
		// Handled one at a time, each journals its own (or stalls).
		return 0
	}
	for _, it := range items[:len(outs)] {
		it.next = len(it.fns)
	}
	return len(outs)
}

// outcome is what became of an event a worker ran.
type outcome int

const (
	done        outcome = iota // every function handled it
	retry                      // a call, or journaling its events, is retried after a delay
	interrupted                // dispatch is stopping: not handled
)

// handle calls the functions of it from the next one on.
func (s *scheduler) handle(ctx context.Context, l *lane, it *item) (outcome, time.Duration) {
	if it.rec.Err != nil {
		if err := s.d.quarantine(ctx, it.rec); err != nil {
			return s.journalFailed(ctx, it, err)
		}
		return done, 0
	}
	e := it.rec.Event
	for it.next < len(it.fns) {
		f := it.fns[it.next]
		fctx := s.d.logContext(ctx, f, e)
		out, err := s.d.call(fctx, l, f, e)
		if err != nil && ctx.Err() != nil {
			return interrupted, 0
		}
		if err != nil {
			it.attempt++
			if !fault.IsPermanent(err) && it.attempt < l.Attempts {
				delay := min(s.d.o.Backoff<<min(it.attempt-1, 20), l.MaxBackoff)
				s.d.o.Logger.WarnContext(fctx, "handler failed, retrying", "attempt", it.attempt, "retry_in", delay, "error", err)
				return retry, delay
			}
			if out, err = s.d.failed(fctx, f, e, err); err != nil {
				s.d.o.Logger.ErrorContext(fctx, "recording a function's failure", "error", err)
			}
		}
		if err := s.d.journal(fctx, f, e, out); err != nil {
			return s.journalFailed(ctx, it, err)
		}
		if it.stalled > 0 {
			it.stalled = 0
			s.d.unstall()
		}
		it.next++
		it.attempt = 0
	}
	return done, 0
}

// journalFailed stalls it on a journal that cannot take its events: it is
// retried (the function called again: it is idempotent) with a growing
// backoff, for as long as the journal fails.
func (s *scheduler) journalFailed(ctx context.Context, it *item, err error) (outcome, time.Duration) {
	if ctx.Err() != nil {
		return interrupted, 0
	}
	it.stalled = max(min(2*it.stalled, time.Minute), s.d.o.StallBackoff)
	s.d.stall(err, it.stalled)
	return retry, it.stalled
}

// sleep waits d or until ctx ends; it reports whether ctx is still alive.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
