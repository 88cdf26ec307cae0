package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/flotilla-cd/flotilla/pkg/bus"
)

// Timers: an event due later (one carrying ExtDue with a time after
// now) is kept in the state file's timers bucket, not journaled, until
// FireDue journals it. A timer survives restarts; a timer fired twice (a
// crash between journaling and deleting it) is journaled once, the journal
// dropping the repeated id.
//
//	timers   big-endian due unix nanoseconds + event id -> event JSON

var bucketTimers = []byte("timers")

// ExtDue is the extension of an event due later (bus.ExtDue).
const ExtDue = bus.ExtDue

func due(e cloudevents.Event) (time.Time, bool) { return bus.Due(e) }

// timerState wakes the timer loop when a timer is scheduled.
type timerState struct {
	mu      sync.Mutex
	changed chan struct{}
}

func (t *timerState) notify() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.changed != nil {
		close(t.changed)
	}
	t.changed = make(chan struct{})
}

// TimersChanged returns a channel closed at the next Schedule (or
// UpdateAndAppend that schedules a timer). Take it before NextDue.
func (s *Store) TimersChanged() <-chan struct{} {
	s.timers.mu.Lock()
	defer s.timers.mu.Unlock()
	if s.timers.changed == nil {
		s.timers.changed = make(chan struct{})
	}
	return s.timers.changed
}

// SplitDue separates the events due after now (timers) from the others.
func SplitDue(evs []cloudevents.Event, now time.Time) (journal, later []cloudevents.Event) {
	return bus.SplitDue(evs, now)
}

func timerKey(due time.Time, id string) []byte {
	k := make([]byte, 8, 8+len(id))
	binary.BigEndian.PutUint64(k, uint64(due.UnixNano()))
	return append(k, id...)
}

// putTimers writes evs (each carrying a due time) into the timers bucket.
func putTimers(tx *bolt.Tx, evs []cloudevents.Event) error {
	if len(evs) == 0 {
		return nil
	}
	b, err := tx.CreateBucketIfNotExists(bucketTimers)
	if err != nil {
		return err
	}
	raw, err := bus.Encode(evs)
	if err != nil {
		return err
	}
	for i, e := range evs {
		at, _ := due(e)
		if err := b.Put(timerKey(at, e.ID()), raw[i]); err != nil {
			return err
		}
	}
	return nil
}

// Schedule keeps events due later as timers; events due now or without a
// due time are journaled at once. Scheduling the same event (id and due
// time) again changes nothing.
func (s *Store) Schedule(ctx context.Context, evs ...cloudevents.Event) error {
	now, later := SplitDue(evs, s.now())
	if len(now) > 0 {
		if _, err := s.Append(ctx, now...); err != nil {
			return err
		}
	}
	if len(later) == 0 {
		return nil
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return putTimers(tx, later) }); err != nil {
		return fmt.Errorf("scheduling %d timers: %w", len(later), err)
	}
	s.timers.notify()
	return nil
}

// NextDue returns when the earliest timer is due; ok is false when there is
// none.
func (s *Store) NextDue(ctx context.Context) (due time.Time, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, false, err
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTimers)
		if b == nil {
			return nil
		}
		k, _ := b.Cursor().First()
		if len(k) < 8 {
			return nil
		}
		due, ok = time.Unix(0, int64(binary.BigEndian.Uint64(k))), true
		return nil
	})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("reading timers: %w", err)
	}
	return due, ok, nil
}

// Timers returns how many timers wait.
func (s *Store) Timers(ctx context.Context) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n := 0
	err := s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketTimers); b != nil {
			n = b.Stats().KeyN
		}
		return nil
	})
	return n, err
}

// FireDue journals up to limit timers due at or before now, then deletes
// them; it returns how many it fired.
func (s *Store) FireDue(ctx context.Context, now time.Time, limit int) (int, error) {
	var (
		keys [][]byte
		evs  []cloudevents.Event
	)
	end := timerKey(now, "")
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTimers)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.First(); k != nil && len(keys) < limit; k, v = c.Next() {
			if bytes.Compare(k[:min(8, len(k))], end) > 0 {
				break
			}
			keys = append(keys, bytes.Clone(k))
			e, err := bus.Decode(v)
			if err != nil {
				// Written by this version, so it read back when written.
				return fmt.Errorf("timer %q does not read back: %w", k[8:], err)
			}
			evs = append(evs, e)
		}
		return nil
	})
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	if _, err := s.Append(ctx, evs...); err != nil {
		return 0, fmt.Errorf("journaling due timers: %w", err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTimers)
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("deleting fired timers: %w", err)
	}
	return len(evs), nil
}
