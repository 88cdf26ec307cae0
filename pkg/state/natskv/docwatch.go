package natskv

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// List calls fn with every document of collection (its key, as given to
// Put, and its JSON).
func (d *Docs) List(ctx context.Context, collection string, fn func(key string, raw []byte) error) error {
	entries, err := readAll(ctx, d.kv, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("listing %s: %w", collection, err)
	}
	prefix := idKey(collection) + "."
	for _, e := range entries {
		if k, ok := strings.CutPrefix(e.Key(), prefix); ok {
			key, err := base64.RawURLEncoding.DecodeString(k)
			if err != nil {
				continue // not a document's key (docKey)
			}
			if err := fn(string(key), e.Value()); err != nil {
				return err
			}
		}
	}
	return nil
}

// Watch calls fn with every document of collection, then with each one
// written, until ctx ends (pkg/tokens' cache: every replica sees another's
// writes within the watch's latency). It returns once the documents there
// were are delivered; a watch that ends (a NATS node lost) is made again,
// a second later, and delivers every document again.
func (d *Docs) Watch(ctx context.Context, collection string, fn func(raw []byte)) error {
	w, err := d.kv.Watch(ctx, idKey(collection)+".*", jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("watching %s: %w", collection, err)
	}
	loaded := make(chan struct{})
	go func() {
		for {
			drain(ctx, w, fn, loaded)
			_ = w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
				if w, err = d.kv.Watch(ctx, idKey(collection)+".*", jetstream.IgnoreDeletes()); err == nil {
					break
				}
			}
		}
	}()
	select {
	case <-loaded:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("watching %s: %w", collection, ctx.Err())
	}
}

// drain delivers w's entries to fn until it ends, closing loaded (once)
// at its end of the initial values.
func drain(ctx context.Context, w jetstream.KeyWatcher, fn func([]byte), loaded chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				select {
				case <-loaded:
				default:
					close(loaded)
				}
				continue
			}
			fn(e.Value())
		}
	}
}
