package store

import (
	"bytes"
	"context"
	"fmt"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/flotilla-cd/flotilla/pkg/bus"
)

// UpdateAndAppend is Update whose fn also returns events: the document and the
// events (or timers, for events due later: see Schedule) (those whose id is not journaled yet) are never separated by a
// crash (a transactional outbox). The document and the events commit
// together in the state file; the events then go into the journal, in the
// order their documents committed, and the call returns the records it
// added. Events that a crash keeps from the journal are journaled at the
// next open.
func (s *Store) UpdateAndAppend(ctx context.Context, collection, key string, v any, fn func(found bool) ([]cloudevents.Event, error)) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("updating %s/%s: %w", collection, key, err)
	}
	req, keys, err := s.commitWithOutbox(collection, key, v, fn)
	if err != nil {
		return nil, fmt.Errorf("updating %s/%s: %w", collection, key, err)
	}
	if req == nil {
		return nil, nil
	}
	res := <-req.done // the writer answers every request it took
	if res.err != nil {
		return nil, fmt.Errorf("updating %s/%s: saved, but its events wait in the outbox for the next start: %w", collection, key, res.err)
	}
	s.outboxMu.Lock()
	s.delivered = append(s.delivered, keys...)
	s.outboxMu.Unlock()
	return res.recs, nil
}

// commitWithOutbox commits the document and its events to the state file and
// hands the events to the writer, both under outboxMu so that the writer
// gets them in commit order. It returns the writer's request (nil if there
// are no events) and the events' outbox keys.
func (s *Store) commitWithOutbox(collection, key string, v any, fn func(found bool) ([]cloudevents.Event, error)) (*appendReq, [][]byte, error) {
	s.outboxMu.Lock()
	defer s.outboxMu.Unlock()
	var (
		evs  []cloudevents.Event
		enc  [][]byte
		keys [][]byte
		// timed: some events went to the timers bucket.
		timed bool
	)
	err := s.db.Update(func(tx *bolt.Tx) error {
		evs, enc, keys = nil, nil, nil
		err := updateDoc(tx, collection, key, v, func(found bool) error {
			var err error
			if evs, err = fn(found); err != nil {
				return err
			}
			var later []cloudevents.Event
			evs, later = SplitDue(evs, s.now())
			if err := putTimers(tx, later); err != nil {
				return err
			}
			timed = len(later) > 0
			enc, err = bus.Encode(evs)
			return err
		})
		if err != nil {
			return err
		}
		out := tx.Bucket(bucketOutbox)
		for _, k := range s.delivered {
			if err := out.Delete(k); err != nil {
				return err
			}
		}
		for _, raw := range enc {
			seq, err := out.NextSequence()
			if err != nil {
				return err
			}
			keys = append(keys, seqKey(seq))
			if err := out.Put(keys[len(keys)-1], raw); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	s.delivered = nil
	if timed {
		s.timers.notify()
	}
	if len(evs) == 0 {
		return nil, nil, nil
	}
	req, err := s.enqueue(evs, enc)
	if err != nil {
		return nil, nil, fmt.Errorf("saved, but its events wait in the outbox for the next start: %w", err)
	}
	return req, keys, nil
}

// enqueue hands encoded events to the writer; it fails only if the store is
// closing.
func (s *Store) enqueue(evs []cloudevents.Event, raw [][]byte) (*appendReq, error) {
	req := &appendReq{evs: evs, raw: raw, done: make(chan appendResult, 1)}
	select {
	case s.appends <- req:
		return req, nil
	case <-s.closing:
		return nil, ErrClosed
	}
}

// replayOutbox journals the events an UpdateAndAppend committed but a crash
// kept from the journal (those already journaled are skipped by id), then
// empties the outbox. An event that does not read back is logged and
// dropped.
func (s *Store) replayOutbox() error {
	var (
		evs []cloudevents.Event
		raw [][]byte
	)
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOutbox).ForEach(func(k, v []byte) error {
			e, err := bus.Decode(v)
			if err == nil {
				err = e.Validate()
			}
			if err != nil {
				// Put there by a version that let such events in: it
				// cannot be journaled (no reader could read it), and
				// failing here would fail every start.
				s.logger.Error("dropping an outbox event that does not read back", "key", keySeq(k), "bytes", len(v), "error", err)
				return nil
			}
			evs, raw = append(evs, e), append(raw, bytes.Clone(v))
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("reading the outbox: %w", err)
	}
	if len(evs) == 0 {
		return nil
	}
	req, err := s.enqueue(evs, raw)
	if err != nil {
		return fmt.Errorf("journaling the outbox: %w", err)
	}
	res := <-req.done
	if res.err != nil {
		return fmt.Errorf("journaling the outbox: %w", res.err)
	}
	s.logger.Info("journaled events left in the outbox", "events", len(evs), "new", len(res.recs))
	err = s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketOutbox); err != nil {
			return err
		}
		_, err := tx.CreateBucket(bucketOutbox)
		return err
	})
	if err != nil {
		return fmt.Errorf("emptying the outbox: %w", err)
	}
	return nil
}

// clearOutbox deletes the outbox entries whose events are journaled.
func (s *Store) clearOutbox() error {
	s.outboxMu.Lock()
	defer s.outboxMu.Unlock()
	if len(s.delivered) == 0 {
		return nil
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		out := tx.Bucket(bucketOutbox)
		for _, k := range s.delivered {
			if err := out.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("emptying the outbox: %w", err)
	}
	s.delivered = nil
	return nil
}
