package api

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// The limit on failed bearer tokens, shared by the replicas of scale-out
// mode: an address that spent its failures on one replica is refused 429
// by every replica, rather than getting DefaultBearerFailureBurst more
// per replica. Each address's bucket is a document of the state
// (BearerFailureCollection), updated under its revision by the replica a
// failure reaches, and watched by every replica, which checks requests
// against what it watched: no read of the state per request.

// BearerFailureCollection is the state documents' collection of the
// shared buckets, one per client address.
const BearerFailureCollection = "bearer-failures"

// BearerFailureSweepEvery is how often the buckets full again are
// deleted (SweepFailures), on one replica.
const BearerFailureSweepEvery = 10 * time.Minute

// BearerFailures is where the replicas share the limit (natskv.Docs): a
// revision-checked update, a watch, and the sweep's list and delete.
type BearerFailures interface {
	Update(ctx context.Context, collection, key string, v any, fn func(found bool) error) error
	Watch(ctx context.Context, collection string, fn func(raw []byte)) error
	List(ctx context.Context, collection string, fn func(key string, raw []byte) error) error
	Delete(ctx context.Context, collection, key string) error
}

// SharedBearerFailures has the limit on failed bearer tokens kept in docs
// for every replica too (scale-out mode; default: this replica's only).
// StartSharedFailures must then run before serving.
func SharedBearerFailures(docs BearerFailures) AuthnOption {
	return func(a *Authn) { a.sharedFailures = docs }
}

// failureDoc is an address's shared bucket: Tokens left at At.
type failureDoc struct {
	Addr   string    `json:"addr"`
	Tokens float64   `json:"tokens"`
	At     time.Time `json:"at"`
}

// level is d's tokens now: refilled one per every since At, up to burst.
func (f *failureLimit) level(d failureDoc) float64 {
	return min(float64(f.burst), d.Tokens+float64(f.now().Sub(d.At))/float64(f.every))
}

// failedShared takes a token from addr's shared bucket, under its
// revision. A state that cannot be written leaves this replica's limit
// alone in force for that failure.
func (f *failureLimit) failedShared(ctx context.Context, addr string) {
	var d failureDoc
	err := f.shared.Update(ctx, BearerFailureCollection, addr, &d, func(found bool) error {
		if !found {
			d = failureDoc{Tokens: float64(f.burst), At: f.now()}
		}
		d.Addr, d.Tokens, d.At = addr, f.level(d), f.now()
		if d.Tokens >= 1 {
			d.Tokens--
		}
		return nil
	})
	if err == nil {
		f.observe(d)
	}
}

// observe keeps d, a bucket written here or watched, unless an older one.
func (f *failureLimit) observe(d failureDoc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if old, ok := f.remote[d.Addr]; ok && old.At.After(d.At) {
		return
	}
	if _, ok := f.remote[d.Addr]; !ok && len(f.remote) >= maxLimitedAddrs {
		for k, old := range f.remote {
			if f.level(old) >= float64(f.burst) {
				delete(f.remote, k)
			}
		}
	}
	f.remote[d.Addr] = d
}

// StartSharedFailures loads the shared buckets and keeps watching them
// until ctx ends (nothing without SharedBearerFailures).
func (a *Authn) StartSharedFailures(ctx context.Context) error {
	f := a.failures
	if f == nil || f.shared == nil {
		return nil
	}
	err := f.shared.Watch(ctx, BearerFailureCollection, func(raw []byte) {
		var d failureDoc
		if json.Unmarshal(raw, &d) == nil && d.Addr != "" {
			f.observe(d)
		}
	})
	if err != nil {
		return fmt.Errorf("watching the shared limit on failed API tokens: %w", err)
	}
	return nil
}

// SweepFailures deletes the shared buckets that are full again (their
// failures forgotten), so that the state keeps only the addresses still
// limited; it says how many it deleted.
func (a *Authn) SweepFailures(ctx context.Context) (int, error) {
	f := a.failures
	if f == nil || f.shared == nil {
		return 0, nil
	}
	var full []string
	err := f.shared.List(ctx, BearerFailureCollection, func(key string, raw []byte) error {
		var d failureDoc
		if json.Unmarshal(raw, &d) != nil || f.level(d) >= float64(f.burst) {
			full = append(full, key)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("listing the shared limit on failed API tokens: %w", err)
	}
	for i, key := range full {
		if err := f.shared.Delete(ctx, BearerFailureCollection, key); err != nil {
			return i, fmt.Errorf("deleting a full bucket of failed API tokens: %w", err)
		}
	}
	return len(full), nil
}
