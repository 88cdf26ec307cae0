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
	s.mu.Unlock()
	if first < 0 {
		return -1
	}
	// A journal that cannot tell is the timers loop's to report (Err):
	// the worker goes on rather than wait for it.
	if due, ok, err := s.d.j.NextDue(ctx); err == nil && ok && !due.After(now) {
		return -1
	}
	return first
}
