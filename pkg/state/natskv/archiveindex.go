package natskv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// archiveIndex is the archive's page keys (created.id), sorted, kept by a
// watch of the bucket's keys (metadata only): a page of List reads its own
// rollouts, not every key of the archive. The watch is started by the
// first List and made again when it ends.
type archiveIndex struct {
	kv jetstream.KeyValue

	mu   sync.Mutex
	keys []string // ascending
	seen uint64   // the highest revision the watch delivered
	live bool     // the watch runs and delivered the bucket's keys
}

// catchUpFor bounds how long a List waits for the watch to have seen the
// archive's last write before it lists the keys itself.
const catchUpFor = 2 * time.Second

// page returns the keys of a page (newest first, before before: "" from
// the newest; at most limit, <= 0: all) and whether more remain. ok is
// false when the index could not be brought up to date: the caller lists
// the keys itself.
func (x *archiveIndex) page(ctx context.Context, before string, limit int) (keys []string, more, ok bool) {
	last, err := lastRevision(ctx, x.kv)
	if err != nil || !x.caughtUp(ctx, last) {
		return nil, false, false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	end := len(x.keys)
	if before != "" {
		end, _ = slices.BinarySearch(x.keys, before)
	}
	start := 0
	if limit > 0 && end > limit {
		start, more = end-limit, true
	}
	keys = slices.Clone(x.keys[start:end])
	slices.Reverse(keys)
	return keys, more, true
}

// caughtUp starts the watch if it is not running and waits until it has
// delivered revision last, within catchUpFor.
func (x *archiveIndex) caughtUp(ctx context.Context, last uint64) bool {
	deadline := time.Now().Add(catchUpFor)
	for {
		x.mu.Lock()
		live, seen := x.live, x.seen
		x.mu.Unlock()
		if live && seen >= last {
			return true
		}
		if !live {
			if err := x.watch(ctx); err != nil {
				return false
			}
			continue
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// watch starts the watch and returns once it delivered the bucket's keys.
func (x *archiveIndex) watch(ctx context.Context) error {
	// The watch outlives the List that started it: it ends with the
	// connection (or the bucket).
	w, err := x.kv.WatchAll(context.WithoutCancel(ctx), jetstream.MetaOnly())
	if err != nil {
		return fmt.Errorf("watching the archive: %w", err)
	}
	loaded := make(chan struct{})
	go func() {
		defer func() {
			x.mu.Lock()
			x.live = false
			x.mu.Unlock()
		}()
		var initial []string
		first := true
		for e := range w.Updates() {
			if e == nil { // the bucket's keys are delivered
				slices.Sort(initial)
				x.mu.Lock()
				x.keys, x.live = slices.Compact(initial), true
				x.mu.Unlock()
				initial, first = nil, false
				close(loaded)
				continue
			}
			if first {
				if isPageKey(e.Key()) && e.Operation() == jetstream.KeyValuePut {
					initial = append(initial, e.Key())
				}
				x.mu.Lock()
				x.seen = max(x.seen, e.Revision())
				x.mu.Unlock()
				continue
			}
			x.apply(e)
		}
		if first {
			close(loaded)
		}
	}()
	select {
	case <-loaded:
	case <-ctx.Done():
		_ = w.Stop()
		return ctx.Err()
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.live {
		return errors.New("watching the archive: the watch ended")
	}
	return nil
}

// apply records one change the watch delivered.
func (x *archiveIndex) apply(e jetstream.KeyValueEntry) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.seen = max(x.seen, e.Revision())
	if !isPageKey(e.Key()) {
		return
	}
	i, found := slices.BinarySearch(x.keys, e.Key())
	switch {
	case e.Operation() == jetstream.KeyValuePut && !found:
		x.keys = slices.Insert(x.keys, i, e.Key())
	case e.Operation() != jetstream.KeyValuePut && found:
		x.keys = slices.Delete(x.keys, i, i+1)
	}
}

// isPageKey tells a finished rollout's key from its id's index entry.
func isPageKey(key string) bool { return !strings.HasPrefix(key, "id.") }
