package store

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Get unmarshals the JSON document collection/key into v and reports whether
// it exists. v is left untouched if it does not.
func (s *Store) Get(ctx context.Context, collection, key string, v any) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("getting %s/%s: %w", collection, key, err)
	}
	var found bool
	err := s.db.View(func(tx *bolt.Tx) error {
		raw := docBucket(tx, collection).get(key)
		if raw == nil {
			return nil
		}
		found = true
		return decode(raw, v)
	})
	if err != nil {
		return false, fmt.Errorf("getting %s/%s: %w", collection, key, err)
	}
	return found, nil
}

// Put stores v, marshalled to JSON, as collection/key. It is durable on return.
func (s *Store) Put(ctx context.Context, collection, key string, v any) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("putting %s/%s: %w", collection, key, err)
	}
	raw, err := encode(v)
	if err != nil {
		return fmt.Errorf("putting %s/%s: %w", collection, key, err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		b, err := createDocBucket(tx, collection)
		if err != nil {
			return err
		}
		return b.Put([]byte(key), raw)
	})
	if err != nil {
		return fmt.Errorf("putting %s/%s: %w", collection, key, err)
	}
	return nil
}

// Update reads, modifies and writes collection/key in one transaction, so
// concurrent Updates of the same key never lose each other's changes. It
// unmarshals the current document into v (pass a pointer to a zero value) if
// there is one, calls fn with whether there was, then marshals v and stores it.
// If fn returns an error nothing is written and Update returns that error,
// wrapped. Durable on return.
func (s *Store) Update(ctx context.Context, collection, key string, v any, fn func(found bool) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("updating %s/%s: %w", collection, key, err)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		return updateDoc(tx, collection, key, v, fn)
	})
	if err != nil {
		return fmt.Errorf("updating %s/%s: %w", collection, key, err)
	}
	return nil
}

// updateDoc is the read-modify-write of Update in tx.
func updateDoc(tx *bolt.Tx, collection, key string, v any, fn func(found bool) error) error {
	b, err := createDocBucket(tx, collection)
	if err != nil {
		return err
	}
	raw := b.Get([]byte(key))
	found := raw != nil
	if found {
		if err := decode(raw, v); err != nil {
			return fmt.Errorf("decoding current document: %w", err)
		}
	}
	if err := fn(found); err != nil {
		return err
	}
	raw, err = encode(v)
	if err != nil {
		return fmt.Errorf("encoding document: %w", err)
	}
	return b.Put([]byte(key), raw)
}

// Delete removes collection/key; there being none is no error. Durable on
// return.
func (s *Store) Delete(ctx context.Context, collection, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("deleting %s/%s: %w", collection, key, err)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		if b := docBucket(tx, collection); b.Bucket != nil {
			return b.Delete([]byte(key))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("deleting %s/%s: %w", collection, key, err)
	}
	return nil
}

// List calls fn for every document of collection in key order. raw is only
// valid during the call; copy it to keep it. An error from fn stops the
// listing and is returned, wrapped.
func (s *Store) List(ctx context.Context, collection string, fn func(key string, raw []byte) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("listing %s: %w", collection, err)
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := docBucket(tx, collection)
		if b.Bucket == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return fn(string(k), v)
		})
	})
	if err != nil {
		return fmt.Errorf("listing %s: %w", collection, err)
	}
	return nil
}

// nilableBucket is a bucket that may not exist yet.
type nilableBucket struct{ *bolt.Bucket }

func (b nilableBucket) get(key string) []byte {
	if b.Bucket == nil {
		return nil
	}
	return b.Get([]byte(key))
}

func docBucket(tx *bolt.Tx, collection string) nilableBucket {
	return nilableBucket{tx.Bucket(bucketDocs).Bucket([]byte(collection))}
}

func createDocBucket(tx *bolt.Tx, collection string) (*bolt.Bucket, error) {
	b, err := tx.Bucket(bucketDocs).CreateBucketIfNotExists([]byte(collection))
	if err != nil {
		return nil, fmt.Errorf("creating collection: %w", err)
	}
	return b, nil
}
