package dispatch

import (
	"context"
	"slices"
)

// Sequential dispatch (Options.Sequential): one worker handles the
// events of every key and lane one at a time, the earliest in the journal
// first. The journal is then the same every run of the same inputs:
//
//   - the event handled is the one of lowest seq among those admitted, and
//     an event not yet admitted was appended after every admitted one, so
//     the order is the journal's whatever the reader's pace;
//   - the clock moving makes timers and retries due at once: the worker
//     waits until every due timer is journaled (the timers loop) and every
//     due retry is back in its lane (its park) before it picks, so neither
//     goroutine's pace decides what comes first.
//
// A Folder's burst is folded as the parallel workers fold it (one call for
// a wave's canary events instead of one each, which rewrote a rollout of
// 1,000 clusters thousands of times), and the journal stays the same:
//
//   - the fold takes only the key's events that come before the head of
//     every other key waiting (foldBefore): they come out in the
//     journal's order, and the Folder derives from each what it would
//     alone (its contract), so the journal is the one of one at a time;
//   - the worker starts a head a Folder may fold only once the reader has
//     admitted every event journaled by then (caughtUp): the burst folded
//     is the whole one journaled, not what the reader's pace had
//     admitted, so the calls too are the same every run;
//   - Hold lets a driver journal a burst whole before any of it is handled
//     (`flotilla simulate`'s Flagger: a wave's verdicts at one virtual
//     instant), as a real burst queues up behind busy workers.

// sequential runs the ready partitions of every lane, one event at a
// time, until ctx ends.
func (s *scheduler) sequential(ctx context.Context) {
	var ready []*partition
	for {
		_, changed := s.d.act.watch()
		for _, l := range s.lanes {
			ready = s.collect(l, ready)
		}
		if i := s.pick(ctx, ready); i >= 0 {
			p := ready[i]
			ready = slices.Delete(ready, i, i+1)
			if !s.begin() {
				return // draining: left for the next run
			}
			s.runHead(ctx, p)
			s.end()
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// collect adds the partitions waiting in l's ready queue to ready.
func (s *scheduler) collect(l *lane, ready []*partition) []*partition {
	for {
		select {
		case p := <-l.ready:
			ready = append(ready, p)
		default:
			return ready
		}
	}
}

// pick is the index in ready of the partition whose head event came first
// in the journal, -1 when there is none or a timer or retry due at the
// clock's now is not back yet (the worker waits for it).
func (s *scheduler) pick(ctx context.Context, ready []*partition) int {
	if s.d.held.Load() {
		return -1 // Release bumps the activity
	}
	now := s.d.o.Clock.Now()
	s.mu.Lock()
	for _, at := range s.parked {
		if !at.After(now) {
			s.mu.Unlock()
			return -1
		}
	}
	first := -1
	for i, p := range ready {
		if first < 0 || p.queue[0].rec.Seq < ready[first].queue[0].rec.Seq {
			first = i
		}
	}
	folds := first >= 0 && len(foldable(ready[first].queue[:1])) == 1
	read, full := s.readSeq, s.inflight >= s.d.o.MaxInFlight
	s.mu.Unlock()
	if first < 0 {
		return -1
	}
	if folds && !full {
		// The reader admits the rest of the burst first (it bumps the
		// activity). Full: it waits for room, and the fold takes what is
		// admitted.
		if unread, err := s.d.j.Read(ctx, read, 1); err == nil && len(unread) > 0 {
			return -1
		}
	}
	// A journal that cannot tell is the timers loop's to report (Err):
	// the worker goes on rather than wait for it.
	if due, ok, err := s.d.j.NextDue(ctx); err == nil && ok && !due.After(now) {
		return -1
	}
	return first
}

// foldBefore is the part of fold, the head events of p a Folder may take
// at once, that comes before the head of every other key waiting to run
// (a key parked for a retry due later aside: the worker does not wait for
// it either). Holds s.mu.
func (s *scheduler) foldBefore(p *partition, fold []*item) []*item {
	var first uint64
	for _, o := range s.parts {
		if _, parked := s.parked[o]; o == p || parked || len(o.queue) == 0 {
			continue
		}
		if seq := o.queue[0].rec.Seq; first == 0 || seq < first {
			first = seq
		}
	}
	if first == 0 {
		return fold
	}
	for i, it := range fold {
		if it.rec.Seq > first {
			return fold[:i]
		}
	}
	return fold
}

// Hold keeps a Sequential dispatcher from starting another event until
// Release (the one under way ends): `flotilla simulate` journals a burst
// of webhooks whole before any is handled, and the dispatcher then folds
// it in the journal's order. A dispatcher that is not Sequential ignores
// it.
func (d *Dispatcher) Hold() { d.held.Store(true) }

// Release lets a held dispatcher go on.
func (d *Dispatcher) Release() {
	d.held.Store(false)
	d.act.bump()
}
