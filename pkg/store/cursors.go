package store

import (
	"bytes"
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Cursor returns the sequence number consumer has recorded with SetCursor, or
// 0 if it has none.
func (s *Store) Cursor(ctx context.Context, consumer string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("reading cursor %q: %w", consumer, err)
	}
	var seq uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketCursors).Get([]byte(consumer)); len(v) == 8 {
			seq = keySeq(v)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("reading cursor %q: %w", consumer, err)
	}
	return seq, nil
}

// DeleteCursor forgets consumer's position: a consumer that is gone (a sink
// no longer configured) must not hold retention back. Deleting an unknown
// cursor is no error.
func (s *Store) DeleteCursor(ctx context.Context, consumer string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("deleting cursor %q: %w", consumer, err)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCursors).Delete([]byte(consumer))
	})
	if err != nil {
		return fmt.Errorf("deleting cursor %q: %w", consumer, err)
	}
	return nil
}

// SetCursor records seq as consumer's position. It is durable on return.
func (s *Store) SetCursor(ctx context.Context, consumer string, seq uint64) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("setting cursor %q: %w", consumer, err)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCursors).Put([]byte(consumer), seqKey(seq))
	})
	if err != nil {
		return fmt.Errorf("setting cursor %q: %w", consumer, err)
	}
	return nil
}

// CursorNames lists the consumers with a cursor whose names start with
// prefix, sorted.
func (s *Store) CursorNames(ctx context.Context, prefix string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("listing cursors: %w", err)
	}
	var names []string
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketCursors).Cursor()
		for k, _ := c.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, _ = c.Next() {
			names = append(names, string(k))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing cursors: %w", err)
	}
	return names, nil
}
