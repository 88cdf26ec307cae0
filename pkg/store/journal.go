package store

import (
	"context"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/pkg/bus"
)

// maxBatch bounds how many Append calls share one commit, so one commit's
// latency stays bounded under a flood.
const maxBatch = 1024

// Record is a journaled event and its sequence number (the bus port's
// record: the store is the embedded adapter of pkg/bus).
type Record = bus.Record

// appendReq is one Append call waiting for the writer.
type appendReq struct {
	evs  []cloudevents.Event
	raw  [][]byte
	done chan appendResult // buffered, so the writer never blocks on it
}

type appendResult struct {
	recs []Record
	err  error
}

// Append journals evs and returns the records it added, in order. It returns
// only after they are committed and fsync'd. An event whose id is already
// journaled, or repeated earlier in evs, is skipped and not returned. Every
// event is validated first, and must read back as it was (its time within
// years 0000-9999 in UTC, its data what its content type says, ...); if
// one does not, the call fails with a permanent error (see
// [fault.IsPermanent]) and nothing is written.
//
// Concurrent calls share commits. If ctx ends while the call waits for its
// commit, Append returns ctx's error, but the events may still be journaled:
// a retry is de-duplicated by id.
func (s *Store) Append(ctx context.Context, evs ...cloudevents.Event) ([]Record, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	start := s.now()
	raw, err := bus.Encode(evs)
	if err != nil {
		return nil, fmt.Errorf("appending events: %w", err)
	}
	req := &appendReq{evs: evs, raw: raw, done: make(chan appendResult, 1)}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("appending events: %w", err)
	}
	select {
	case s.appends <- req:
	case <-s.closing:
		return nil, fmt.Errorf("appending events: %w", ErrClosed)
	case <-ctx.Done():
		return nil, fmt.Errorf("appending events: %w", ctx.Err())
	}
	select {
	case res := <-req.done:
		if res.err != nil {
			return nil, fmt.Errorf("appending events: %w", res.err)
		}
		s.metrics.appendTook(s.now().Sub(start).Seconds())
		return res.recs, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("appending events (they may still be journaled): %w", ctx.Err())
	}
}

// writer is the single goroutine that journals events: it owns the event
// log, the sequence and the id index. It takes every Append waiting at the
// time into one commit (group commit) of one write and one fdatasync; while
// a commit syncs, the next batch queues up. Under contention (the last commit
// carried more than one request) it also waits up to the commit delay for
// more requests before committing, as databases do (PostgreSQL's
// commit_delay): every sync costs the kernel time, so fewer, fuller syncs
// serve more webhooks. An idle store commits at once.
func (s *Store) writer() {
	defer s.writerWG.Done()
	batch := make([]*appendReq, 0, maxBatch)
	var timer *time.Timer
	prev := 0
	for {
		select {
		case <-s.closing:
			return
		case req := <-s.appends:
			batch = append(batch[:0], req)
		}
		batch = s.drain(batch)
		if s.commitDelay > 0 && prev > 1 && len(batch) < maxBatch {
			if timer == nil {
				timer = time.NewTimer(s.commitDelay)
			} else {
				timer.Reset(s.commitDelay)
			}
			batch = s.gather(batch, timer.C, lingerTarget(prev))
			timer.Stop()
		}
		s.commit(batch)
		prev = len(batch)
		clear(batch)
	}
}

// drain adds the requests already waiting to batch.
func (s *Store) drain(batch []*appendReq) []*appendReq {
	for len(batch) < maxBatch {
		select {
		case req := <-s.appends:
			batch = append(batch, req)
		default:
			return batch
		}
	}
	return batch
}

// gather adds requests to batch until it has target of them or deadline
// fires.
func (s *Store) gather(batch []*appendReq, deadline <-chan time.Time, target int) []*appendReq {
	for len(batch) < target {
		select {
		case req := <-s.appends:
			batch = append(batch, req)
		case <-deadline:
			return batch
		case <-s.closing:
			return batch
		}
	}
	return batch
}

// lingerTarget is how many requests the writer waits for after a commit of
// prev requests.
func lingerTarget(prev int) int { return min(2*prev, maxBatch) }

// commit numbers the batch's new events, writes and syncs them, and answers
// every request in it.
func (s *Store) commit(batch []*appendReq) {
	if err := s.Err(); err != nil {
		s.fail(batch, err)
		return
	}
	results := make([]appendResult, len(batch))
	clear(s.pending)
	recs := s.recs[:0]
	seq := s.journal.lastSeq()
	dups := 0
	keys := s.keys[:0]
	s.idsMu.RLock()
	for i, req := range batch {
		for j, e := range req.evs {
			id := e.ID()
			k := keyOf(id)
			if _, dup := s.pending[k]; dup {
				dups++
				continue
			}
			if s.ids.has(k) {
				dups++
				continue
			}
			seq++
			s.pending[k] = struct{}{}
			keys = append(keys, k)
			recs = append(recs, logRecord{seq: seq, id: id, raw: req.raw[j]})
			results[i].recs = append(results[i].recs, Record{Seq: seq, Event: e})
		}
	}
	s.idsMu.RUnlock()
	s.keys = keys
	s.recs = recs
	start := time.Now()
	if err := s.journal.append(recs); err != nil {
		// What reached the disk is unknown (a failed fsync may have dropped
		// pages): stop journaling rather than acknowledge on top of it.
		stopped := fmt.Errorf("journal stopped after a write failure, restart flotilla: %w", err)
		s.broken.Store(&stopped)
		s.logger.Error("journal write failed", "requests", len(batch), "error", err)
		s.fail(batch, err)
		return
	}
	s.logger.Debug("committed journal batch", "requests", len(batch), "events", len(recs), "duration", time.Since(start))
	s.metrics.committed(len(recs), dups)
	if len(recs) > 0 {
		first, now := s.journal.lastSegment(), s.clock()
		s.idsMu.Lock()
		for _, k := range keys {
			s.ids.add(first, now, k)
		}
		s.idsMu.Unlock()
		s.notify()
	}
	for i, req := range batch {
		req.done <- results[i]
	}
}

func (s *Store) fail(batch []*appendReq, err error) {
	for _, req := range batch {
		req.done <- appendResult{err: err}
	}
}

func (s *Store) notify() {
	s.changedMu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.changedMu.Unlock()
}

// Changed returns a channel that is closed at the next Append that adds
// records. Take the channel before reading, then wait on it, so no append
// falls in between:
//
//	ch := s.Changed()
//	recs, err := s.Read(ctx, cursor, 100)
//	if len(recs) == 0 { <-ch }
func (s *Store) Changed() <-chan struct{} {
	s.changedMu.Lock()
	defer s.changedMu.Unlock()
	return s.changed
}

// Err returns why the journal stopped taking appends (a write or sync
// failed; reopening the store recovers it), or nil while it works. Health
// checks report it, so that a supervisor restarts flotilla.
func (s *Store) Err() error {
	if p := s.broken.Load(); p != nil {
		return *p
	}
	return nil
}

// LastSeq returns the sequence number of the last journaled event, 0 if none.
func (s *Store) LastSeq() uint64 { return s.journal.lastSeq() }

// Read returns up to limit records with Seq > after, in ascending order. A
// limit <= 0 means no limit. A record that is intact on disk but not a
// readable event is returned with its Err set rather than failing the call;
// a record damaged on disk fails it.
func (s *Store) Read(ctx context.Context, after uint64, limit int) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("reading journal: %w", err)
	}
	var recs []Record
	err := s.journal.read(after, limit, func(seq uint64, raw []byte) error {
		e, err := bus.Decode(raw)
		if err == nil {
			err = e.Validate()
		}
		if err != nil {
			// Intact on disk but not an event: the reader quarantines it.
			recs = append(recs, Record{Seq: seq, Err: fmt.Errorf("event %d does not read back: %w", seq, err)})
			return nil
		}
		recs = append(recs, Record{Seq: seq, Event: e})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading journal: %w", err)
	}
	return recs, nil
}

// Has reports whether an event with id is journaled, within the dedupe
// window (see [WithDedupeWindow]).
func (s *Store) Has(ctx context.Context, id string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("looking up event %q: %w", id, err)
	}
	k := keyOf(id)
	s.idsMu.RLock()
	found := s.ids.has(k)
	s.idsMu.RUnlock()
	return found, nil
}
