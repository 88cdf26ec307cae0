package store

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bounds are what keeps the journal and the dedupe index from growing with
// history: retention deletes old segments every consumer has passed, the
// dedupe window forgets old ids. Both go a segment at a time, and the log
// rolls to a new segment on age as well as size (options.rollAfter), so a
// quiet journal retires segments too.
type bounds struct {
	retention time.Duration // 0: keep every event
	window    time.Duration
	maxIDs    int // 0: no bound by number
	every     time.Duration
}

// CompactReport says what one [Store.Compact] did.
type CompactReport struct {
	// SegmentsDeleted and EventsDeleted count what retention removed.
	SegmentsDeleted int
	EventsDeleted   uint64
	// IDsForgotten counts the ids that left the dedupe window.
	IDsForgotten int
	// First is the seq of the first event the journal keeps now.
	First uint64
	// HeldBy names the consumer whose cursor kept a segment older than the
	// retention period, "" if none did. HeldAt is its cursor.
	HeldBy string
	HeldAt uint64
}

// Compact applies the dedupe window and retention once (the store does it
// in the background, see [WithCompactInterval]): it forgets the ids of
// segments written before the window (or beyond its number of events),
// then deletes the oldest segments whose records every consumer's cursor
// has passed and that were last written before the retention period. It
// never deletes the segment being written, nor anything while no consumer
// has saved a cursor. The new start of the journal is made durable before
// any file goes.
func (s *Store) Compact(ctx context.Context) (CompactReport, error) {
	if err := ctx.Err(); err != nil {
		return CompactReport{}, fmt.Errorf("compacting the journal: %w", err)
	}
	return s.compact()
}

// compact is Compact, for the background compactor.
func (s *Store) compact() (CompactReport, error) {
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	var r CompactReport
	now := s.clock()
	s.idsMu.Lock()
	r.IDsForgotten = s.ids.evict(now.Add(-s.bounds.window), s.bounds.maxIDs)
	s.idsMu.Unlock()

	segs := s.journal.segments()
	if s.bounds.retention > 0 && len(segs) > 1 {
		if err := s.retire(now, segs, &r); err != nil {
			return r, fmt.Errorf("compacting the journal: %w", err)
		}
	}
	r.First = s.journal.first()
	s.metrics.compacted(r)
	if r.SegmentsDeleted > 0 || r.IDsForgotten > 0 {
		s.logger.Info("compacted the journal", "segments_deleted", r.SegmentsDeleted, "events_deleted", r.EventsDeleted,
			"ids_forgotten", r.IDsForgotten, "first", r.First)
	}
	return r, nil
}

// retire deletes the oldest segments that retention allows.
func (s *Store) retire(now time.Time, segs []segmentInfo, r *CompactReport) error {
	minCursor, consumer, any, err := s.minCursor()
	if err != nil || !any {
		return err
	}
	cutoff := now.Add(-s.bounds.retention)
	n := 0
	for ; n < len(segs)-1; n++ {
		seg := segs[n]
		if !seg.written.Before(cutoff) {
			break
		}
		if seg.last > minCursor {
			r.HeldBy, r.HeldAt = consumer, minCursor
			break
		}
		r.EventsDeleted += seg.last + 1 - seg.first
	}
	if n == 0 {
		return nil
	}
	start := segs[n].first
	err = s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyJournalStart, seqKey(start))
	})
	if err != nil {
		return fmt.Errorf("recording the journal's new start: %w", err)
	}
	s.idsMu.Lock()
	r.IDsForgotten += s.ids.dropBefore(start)
	s.idsMu.Unlock()
	if err := s.journal.removeFront(n); err != nil {
		return err
	}
	r.SegmentsDeleted = n
	return nil
}

// minCursor returns the lowest cursor of any consumer, and whose it is;
// any is false if no consumer has saved one.
func (s *Store) minCursor() (cursor uint64, consumer string, any bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCursors).ForEach(func(k, v []byte) error {
			if len(v) == 8 && (!any || keySeq(v) < cursor) {
				cursor, consumer, any = keySeq(v), string(k), true
			}
			return nil
		})
	})
	if err != nil {
		return 0, "", false, fmt.Errorf("reading cursors: %w", err)
	}
	return cursor, consumer, any, nil
}

// compactor runs Compact every bounds.every until the store closes. A
// consumer holding retention back is logged once per hour.
func (s *Store) compactor() {
	defer s.writerWG.Done()
	t := time.NewTicker(s.bounds.every)
	defer t.Stop()
	var warned time.Time
	for {
		select {
		case <-s.closing:
			return
		case <-t.C:
		}
		r, err := s.compact()
		if err != nil {
			s.logger.Error("compacting the journal failed", "error", err)
			continue
		}
		if r.HeldBy != "" && time.Since(warned) > time.Hour {
			warned = time.Now()
			s.logger.Warn("a consumer's cursor keeps journal segments past their retention", "consumer", r.HeldBy, "cursor", r.HeldAt,
				"last_seq", s.LastSeq(), "retention", s.bounds.retention)
		}
	}
}

// DedupeIDs returns how many event ids the dedupe index holds.
func (s *Store) DedupeIDs() int {
	s.idsMu.RLock()
	defer s.idsMu.RUnlock()
	return s.ids.count
}

// FirstSeq returns the sequence number of the first event the journal
// keeps (LastSeq()+1 if it keeps none).
func (s *Store) FirstSeq() uint64 { return s.journal.first() }
