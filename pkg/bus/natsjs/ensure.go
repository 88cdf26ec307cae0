package natsjs

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Replicas start together: a stream or bucket that exists as configured is
// taken as it is, and only a missing or changed one is created or updated;
// two creations at once (JetStream lets one of them wait out its request
// timeout) are resolved by taking the one the other made.

// ensureTimeout bounds creating a stream or bucket.
const ensureTimeout = 30 * time.Second

// EnsureKeyValue opens a KV bucket as cfg says, creating or updating it
// when it is missing or configured otherwise. Its Get asks the bucket's
// leader (leaderReads: it reads the writes acknowledged before it).
func EnsureKeyValue(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := ensureKeyValue(ctx, js, cfg)
	if err != nil {
		return nil, err
	}
	return withLeaderReads(js, kv), nil
}

func ensureKeyValue(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	return ensure(ctx, "bucket "+cfg.Bucket, func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, cfg)
	}, func(ctx context.Context) (jetstream.KeyValue, bool, error) {
		kv, err := js.KeyValue(ctx, cfg.Bucket)
		if err != nil {
			return nil, false, err
		}
		st, err := js.Stream(ctx, "KV_"+cfg.Bucket)
		if err != nil {
			return nil, false, err
		}
		c := st.CachedInfo().Config
		same := c.Replicas == max(cfg.Replicas, 1) && c.MaxAge == cfg.TTL && c.MaxMsgsPerSubject == int64(max(cfg.History, 1)) &&
			(c.Compression == jetstream.S2Compression) == cfg.Compression
		return kv, same, nil
	})
}

// ensureStream is EnsureKeyValue for a stream.
func ensureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	return ensure(ctx, "stream "+cfg.Name, func(ctx context.Context) (jetstream.Stream, error) {
		return js.CreateOrUpdateStream(ctx, cfg)
	}, func(ctx context.Context) (jetstream.Stream, bool, error) {
		st, err := js.Stream(ctx, cfg.Name)
		if err != nil {
			return nil, false, err
		}
		c := st.CachedInfo().Config
		same := slices.Equal(c.Subjects, cfg.Subjects) && c.Replicas == max(cfg.Replicas, 1) && c.Duplicates == cfg.Duplicates &&
			c.MaxAge == cfg.MaxAge && c.AllowDirect == cfg.AllowDirect && c.AllowAtomicPublish == cfg.AllowAtomicPublish &&
			maps.Equal(withoutServerMeta(c.Metadata), cfg.Metadata)
		return st, same, nil
	})
}

// withoutServerMeta drops the metadata the server adds (_nats.*).
func withoutServerMeta(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if len(k) < 6 || k[:6] != "_nats." {
			out[k] = v
		}
	}
	return out
}

// ensure looks up what exists; a match is taken, anything else is created
// or updated, retried (looking it up again) until ensureTimeout.
func ensure[T any](ctx context.Context, what string, create func(context.Context) (T, error), lookup func(context.Context) (T, bool, error)) (T, error) {
	deadline := time.Now().Add(ensureTimeout)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		v, same, lerr := lookup(lctx)
		cancel()
		if lerr == nil && same {
			return v, nil
		}
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		v, err := create(actx)
		cancel()
		if err == nil {
			return v, nil
		}
		// Retried, 400s too: a placement finds no peers while a node
		// restarts. A stream the server refuses as configured fails at
		// the deadline, with the server's reason.
		if ctx.Err() != nil || time.Now().After(deadline) {
			var zero T
			return zero, fmt.Errorf("creating %s: %w", what, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// retried runs a step of opening the bus (a watch, a consumer) until it
// succeeds, for up to ensureTimeout: while a NATS node restarts or a
// stream's leader is elected, creating a consumer can time out, and one
// replica starting then should wait for its bus, not exit.
func retried[T any](ctx context.Context, step func(context.Context) (T, error)) (T, error) {
	deadline := time.Now().Add(ensureTimeout)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		v, err := step(ctx)
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return v, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}
