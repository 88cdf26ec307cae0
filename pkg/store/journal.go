package store

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	bolt "go.etcd.io/bbolt"
)

// maxBatch bounds how many Append calls share one commit, so one commit's
// latency stays bounded under a flood.
const maxBatch = 1024

// Record is a journaled event and its sequence number.
type Record struct {
	Seq   uint64
	Event cloudevents.Event
}

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
// event is validated first; if one is invalid the call fails and nothing is
// written.
//
// Concurrent calls share commits. If ctx ends while the call waits for its
// commit, Append returns ctx's error, but the events may still be journaled:
// a retry is de-duplicated by id.
func (s *Store) Append(ctx context.Context, evs ...cloudevents.Event) ([]Record, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	start := s.now()
	raw, err := encodeEvents(evs)
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

// writer is the single goroutine that commits appends. It takes every Append
// waiting at the time into one transaction (group commit): while one commit
// is fsync'ing, the next batch queues up, so there is no timer and no added
// latency when the store is idle.
func (s *Store) writer() {
	defer s.writerWG.Done()
	batch := make([]*appendReq, 0, maxBatch)
	for {
		select {
		case <-s.closing:
			return
		case req := <-s.appends:
			batch = append(batch[:0], req)
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case req := <-s.appends:
				batch = append(batch, req)
			default:
				break drain
			}
		}
		s.commit(batch)
		clear(batch)
	}
}

// commit writes batch in one transaction and answers every request in it.
func (s *Store) commit(batch []*appendReq) {
	results := make([]appendResult, len(batch))
	start := time.Now()
	var last uint64
	added, dups := 0, 0
	err := s.update(func(tx *bolt.Tx, ids idSet) error {
		for i, req := range batch {
			res := &results[i]
			for j, e := range req.evs {
				rec, ok, err := ids.put(tx, e, req.raw[j])
				if err != nil {
					return err
				}
				if !ok {
					dups++
					continue
				}
				res.recs = append(res.recs, rec)
				last = rec.Seq
				added++
			}
		}
		return nil
	})
	if err != nil {
		s.log.Error("committing journal batch", "requests", len(batch), "error", err)
		for _, req := range batch {
			req.done <- appendResult{err: err}
		}
		return
	}
	s.log.Debug("committed journal batch", "requests", len(batch), "events", added, "duration", time.Since(start))
	s.metrics.committed(added, dups)
	if added > 0 {
		s.advanceLastSeq(last)
		s.notify()
	}
	for i, req := range batch {
		req.done <- results[i]
	}
}

// idSet is the journal's id index as one write transaction sees it: the
// committed ids (in memory) plus those the transaction added.
type idSet struct {
	committed map[string]uint64
	pending   map[string]uint64
}

// update runs fn in a write transaction with the id index; the ids fn adds
// join the index only once the transaction committed. Write transactions
// are serialized (bbolt allows one at a time anyway), so no two can add
// the same id.
func (s *Store) update(fn func(tx *bolt.Tx, ids idSet) error) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	ids := idSet{committed: s.ids}
	err := s.db.Update(func(tx *bolt.Tx) error {
		ids.pending = map[string]uint64{}
		return fn(tx, ids)
	})
	if err != nil {
		return err
	}
	if len(ids.pending) > 0 {
		s.idsMu.Lock()
		maps.Copy(s.ids, ids.pending)
		s.idsMu.Unlock()
	}
	return nil
}

// put writes one encoded event in tx unless its id is journaled already (ok
// false). The id index is an append-only log (sequence -> id) on disk and a
// map in memory: a random-key B-tree index would cost a page write per
// event at every commit.
func (ids idSet) put(tx *bolt.Tx, e cloudevents.Event, raw []byte) (rec Record, ok bool, err error) {
	id := e.ID()
	if _, dup := ids.pending[id]; dup {
		return Record{}, false, nil
	}
	if _, dup := ids.committed[id]; dup {
		return Record{}, false, nil
	}
	events, idLog := tx.Bucket(bucketEvents), tx.Bucket(bucketEventIDLog)
	// Both are keyed by a sequence that only grows: full pages, half as many
	// to write.
	events.FillPercent, idLog.FillPercent = 1.0, 1.0
	seq, err := events.NextSequence()
	if err != nil {
		return Record{}, false, fmt.Errorf("numbering event: %w", err)
	}
	key := seqKey(seq)
	if err := events.Put(key, raw); err != nil {
		return Record{}, false, fmt.Errorf("writing event %q: %w", id, err)
	}
	if err := idLog.Put(key, []byte(id)); err != nil {
		return Record{}, false, fmt.Errorf("indexing event %q: %w", id, err)
	}
	ids.pending[id] = seq
	return Record{Seq: seq, Event: e}, true, nil
}

// loadIDs reads the id index into memory: the id log, and the id -> seq
// bucket of stores written before the log existed.
func loadIDs(tx *bolt.Tx) (map[string]uint64, error) {
	ids := map[string]uint64{}
	err := tx.Bucket(bucketEventIDs).ForEach(func(k, v []byte) error {
		ids[string(k)] = keySeq(v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = tx.Bucket(bucketEventIDLog).ForEach(func(k, v []byte) error {
		ids[string(v)] = keySeq(k)
		return nil
	})
	return ids, err
}

// encodeEvents validates and encodes events for the journal.
func encodeEvents(evs []cloudevents.Event) ([][]byte, error) {
	raw := make([][]byte, len(evs))
	for i, e := range evs {
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("event %d (id %q): %w", i, e.ID(), err)
		}
		if len(e.ID()) > bolt.MaxKeySize {
			return nil, fmt.Errorf("event %d: id is longer than %d bytes", i, bolt.MaxKeySize)
		}
		b, err := e.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("encoding event %d (id %q): %w", i, e.ID(), err)
		}
		raw[i] = b
	}
	return raw, nil
}

// advanceLastSeq raises LastSeq to seq; commits of the writer and of
// UpdateAndAppend may finish in either order.
func (s *Store) advanceLastSeq(seq uint64) {
	for {
		cur := s.lastSeq.Load()
		if seq <= cur || s.lastSeq.CompareAndSwap(cur, seq) {
			return
		}
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

// LastSeq returns the sequence number of the last journaled event, 0 if none.
func (s *Store) LastSeq() uint64 { return s.lastSeq.Load() }

// Read returns up to limit records with Seq > after, in ascending order. A
// limit <= 0 means no limit.
func (s *Store) Read(ctx context.Context, after uint64, limit int) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("reading journal: %w", err)
	}
	if after == math.MaxUint64 {
		return nil, nil
	}
	var recs []Record
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketEvents).Cursor()
		for k, v := c.Seek(seqKey(after + 1)); k != nil; k, v = c.Next() {
			if limit > 0 && len(recs) >= limit {
				break
			}
			seq := keySeq(k)
			var e cloudevents.Event
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("decoding event %d: %w", seq, err)
			}
			recs = append(recs, Record{Seq: seq, Event: e})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading journal: %w", err)
	}
	return recs, nil
}

// Has reports whether an event with id is journaled.
func (s *Store) Has(ctx context.Context, id string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("looking up event %q: %w", id, err)
	}
	s.idsMu.RLock()
	_, found := s.ids[id]
	s.idsMu.RUnlock()
	return found, nil
}
