package store

import (
	"bytes"
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Txn is one read-write transaction over documents (see Transact).
type Txn struct{ tx *bolt.Tx }

// Get unmarshals collection/key into v and reports whether it exists.
func (t Txn) Get(collection, key string, v any) (bool, error) {
	raw := docBucket(t.tx, collection).get(key)
	if raw == nil {
		return false, nil
	}
	if err := decode(raw, v); err != nil {
		return true, fmt.Errorf("decoding %s/%s: %w", collection, key, err)
	}
	return true, nil
}

// Put stores v as collection/key.
func (t Txn) Put(collection, key string, v any) error {
	raw, err := encode(v)
	if err != nil {
		return fmt.Errorf("encoding %s/%s: %w", collection, key, err)
	}
	b, err := createDocBucket(t.tx, collection)
	if err != nil {
		return err
	}
	return b.Put([]byte(key), raw)
}

// Delete removes collection/key; a key that does not exist is no error.
func (t Txn) Delete(collection, key string) error {
	b := docBucket(t.tx, collection)
	if b.Bucket == nil {
		return nil
	}
	return b.Delete([]byte(key))
}

// Transact runs fn in one transaction: every Put and Delete of fn commits
// together, durably, or (fn failed) none does.
func (s *Store) Transact(ctx context.Context, fn func(Txn) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("transaction: %w", err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return fn(Txn{tx}) }); err != nil {
		return fmt.Errorf("transaction: %w", err)
	}
	return nil
}

// ListBefore calls fn for up to limit documents of collection in reverse
// key order, starting with the last key below before ("": the last key).
func (s *Store) ListBefore(ctx context.Context, collection, before string, limit int, fn func(key string, raw []byte) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("listing %s: %w", collection, err)
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := docBucket(tx, collection)
		if b.Bucket == nil {
			return nil
		}
		c := b.Cursor()
		var k, v []byte
		if before == "" {
			k, v = c.Last()
		} else {
			k, v = c.Seek([]byte(before))
			if k == nil {
				k, v = c.Last()
			}
			for k != nil && bytes.Compare(k, []byte(before)) >= 0 {
				k, v = c.Prev()
			}
		}
		for n := 0; k != nil && n < limit; k, v = c.Prev() {
			if err := fn(string(k), v); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing %s: %w", collection, err)
	}
	return nil
}
