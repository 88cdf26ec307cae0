package store

import (
	"bytes"
	"encoding/json"
	"fmt"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	bolt "go.etcd.io/bbolt"
)

// migrateBatch is how many events one write of the migration carries.
const migrateBatch = 4096

// migrateJournal moves the journal of a store written by an older version
// (the events bucket of the state file) into the event log, keeping every
// sequence number, then drops the old buckets. A crash in between is
// harmless: the next open copies only what the log does not have yet.
func (s *Store) migrateJournal() error {
	var recs []logRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketEvents)
		if b == nil {
			return nil
		}
		idLog := tx.Bucket(bucketEventIDLog)
		c := b.Cursor()
		for k, v := c.Seek(seqKey(s.journal.lastSeq() + 1)); k != nil; k, v = c.Next() {
			id, err := legacyID(idLog, k, v)
			if err != nil {
				return fmt.Errorf("event %d: %w", keySeq(k), err)
			}
			recs = append(recs, logRecord{seq: keySeq(k), id: id, raw: bytes.Clone(v)})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the journal of an older version: %w", err)
	}
	next := s.journal.lastSeq() + 1
	for i, r := range recs {
		if r.seq != next+uint64(i) {
			return fmt.Errorf("%w: the older journal skips from %d to %d", errCorrupt, next+uint64(i)-1, r.seq)
		}
	}
	for start := 0; start < len(recs); start += migrateBatch {
		chunk := recs[start:min(start+migrateBatch, len(recs))]
		if err := s.journal.append(chunk); err != nil {
			return fmt.Errorf("moving the older journal: %w", err)
		}
		for _, r := range chunk {
			s.ids.add(s.journal.lastSegment(), s.clock(), keyOf(r.id))
		}
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketEvents, bucketEventIDLog, bucketEventIDs} {
			if tx.Bucket(name) == nil {
				continue
			}
			if err := tx.DeleteBucket(name); err != nil {
				return fmt.Errorf("dropping bucket %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("moving the older journal: %w", err)
	}
	if len(recs) > 0 {
		s.logger.Info("moved the journal of an older version into the event log", "events", len(recs), "dir", s.journal.dir)
	}
	return nil
}

// legacyID is the id of an event of an older journal: from its id log if
// it had one, else from the event.
func legacyID(idLog *bolt.Bucket, k, v []byte) (string, error) {
	if idLog != nil {
		if id := idLog.Get(k); len(id) > 0 {
			return string(id), nil
		}
	}
	var e cloudevents.Event
	if err := json.Unmarshal(v, &e); err != nil {
		return "", fmt.Errorf("decoding: %w", err)
	}
	return e.ID(), nil
}
