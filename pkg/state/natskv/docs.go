package natskv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/bus/natsjs"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Docs are small documents by collection and key in one KV bucket
// (<Prefix>_docs), for the stores the engine keeps beside the rollouts
// (pkg/gates' approvals and first sightings): the methods of pkg/store's
// documents those packages declare, on JetStream.
type Docs struct {
	kv      jetstream.KeyValue
	attempt time.Duration // one attempt of Watch; 0: attemptFor
}

// OpenDocs creates or updates the documents' bucket.
func OpenDocs(ctx context.Context, nc *nats.Conn, o Options) (*Docs, error) {
	o = o.withDefaults()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	kv, err := natsjs.EnsureKeyValue(ctx, js, jetstream.KeyValueConfig{
		Bucket: o.Prefix + "_docs", Storage: jetstream.FileStorage, Replicas: o.Replicas, History: 1, Compression: true,
	})
	if err != nil {
		return nil, fmt.Errorf("creating bucket %s_docs: %w", o.Prefix, err)
	}
	if err := answers(ctx, kv); err != nil {
		return nil, fmt.Errorf("bucket %s_docs: %w", o.Prefix, err)
	}
	return &Docs{kv: patient{kv}}, nil
}

func docKey(collection, key string) string { return idKey(collection) + "." + idKey(key) }

// Get reads a document into v; found is false when there is none.
func (d *Docs) Get(ctx context.Context, collection, key string, v any) (bool, error) {
	_, found, err := getJSON(ctx, d.kv, docKey(collection, key), v)
	if err != nil {
		return false, fmt.Errorf("reading %s/%s: %w", collection, key, err)
	}
	return found, nil
}

// Put writes a document.
func (d *Docs) Put(ctx context.Context, collection, key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %s/%s: %w", collection, key, err)
	}
	if _, err := d.kv.Put(ctx, docKey(collection, key), raw); err != nil {
		return fmt.Errorf("writing %s/%s: %w", collection, key, err)
	}
	return nil
}

// Delete removes a document; there being none is no error.
func (d *Docs) Delete(ctx context.Context, collection, key string) error {
	if err := d.kv.Delete(ctx, docKey(collection, key)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("deleting %s/%s: %w", collection, key, err)
	}
	return nil
}

// Update reads a document into v (zero when there is none), runs fn and
// writes v under the document's revision; on a conflict, again with the
// newer document.
func (d *Docs) Update(ctx context.Context, collection, key string, v any, fn func(found bool) error) error {
	k := docKey(collection, key)
	for {
		reflect.ValueOf(v).Elem().SetZero()
		rev, found, err := getJSON(ctx, d.kv, k, v)
		if err != nil {
			return fmt.Errorf("reading %s/%s: %w", collection, key, err)
		}
		if err := fn(found); err != nil {
			return err
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encoding %s/%s: %w", collection, key, err)
		}
		if found {
			_, err = d.kv.Update(ctx, k, raw, rev)
		} else {
			_, err = d.kv.Create(ctx, k, raw)
		}
		if isConflict(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("writing %s/%s: %w", collection, key, err)
		}
		return nil
	}
}
