package natskv

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// List calls fn with every document of collection (its key, as given to
// Put, and its JSON): every one written before, through any replica
// (readAll).
func (d *Docs) List(ctx context.Context, collection string, fn func(key string, raw []byte) error) error {
	entries, err := readAll(ctx, d.kv)
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
// were are delivered. Neither making the watch nor its first delivery may
// hang or fail on a bucket that elects a leader (a NATS node restarted):
// an attempt that delivers nothing within attemptFor is made again, for up
// to electionFor. A watch that ends later (a NATS node lost) is made
// again, a second later, and delivers every document again.
func (d *Docs) Watch(ctx context.Context, collection string, fn func(raw []byte)) error {
	deadline := time.Now().Add(electionFor)
	for {
		w, done, err := d.watchLoaded(ctx, collection, fn)
		if err == nil {
			go d.keepWatching(ctx, collection, w, done, fn)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("watching %s: %w", collection, ctx.Err())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("watching %s: %w", collection, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("watching %s: %w", collection, ctx.Err())
		case <-time.After(d.retryEvery()):
		}
	}
}

// watchLoaded makes one watch of collection and waits, at most
// attemptFor, for its documents there were: done closes when the watch
// ends.
func (d *Docs) watchLoaded(ctx context.Context, collection string, fn func(raw []byte)) (jetstream.KeyWatcher, chan struct{}, error) {
	w, err := d.kv.Watch(ctx, idKey(collection)+".*", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, nil, err
	}
	loaded, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		drain(ctx, w, fn, loaded)
	}()
	select {
	case <-loaded:
		return w, done, nil
	case <-done:
		err = errors.New("the watch ended before it delivered the documents")
	case <-time.After(d.attemptFor()):
		err = fmt.Errorf("no documents delivered within %s: %w", d.attemptFor(), nats.ErrTimeout)
	}
	_ = w.Stop()
	select {
	case <-done:
	case <-time.After(time.Second): // drain ends with ctx, or when Stop closes the updates
	}
	return nil, nil, err
}

// attemptFor bounds one attempt of Watch (attemptFor but in tests).
func (d *Docs) attemptFor() time.Duration {
	if d.attempt > 0 {
		return d.attempt
	}
	return attemptFor
}

// retryEvery is how long Watch waits before it makes a watch again: a
// second, a tenth of an attempt in tests.
func (d *Docs) retryEvery() time.Duration { return min(time.Second, d.attemptFor()/10) }

// keepWatching makes the watch again, a second after it ended, until ctx
// ends.
func (d *Docs) keepWatching(ctx context.Context, collection string, w jetstream.KeyWatcher, done chan struct{}, fn func(raw []byte)) {
	for {
		select {
		case <-ctx.Done():
			_ = w.Stop()
			return
		case <-done:
		}
		_ = w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d.retryEvery()):
			}
			var err error
			if w, err = d.kv.Watch(ctx, idKey(collection)+".*", jetstream.IgnoreDeletes()); err == nil {
				break
			}
		}
		done = make(chan struct{})
		go func() {
			defer close(done)
			drain(ctx, w, fn, closed)
		}()
	}
}

// closed is a channel closed already: drain's loaded for a watch made
// again.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

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
