package natsjs

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// kvTimeout bounds one read or write of the bus's buckets (cursors,
// timers, ids), as publishTimeout bounds a publish: a request sent while
// a bucket's leader is elected can go unanswered, and nats.go then waits
// for the caller's deadline, which may be minutes away. The caller
// retries what failed.
const kvTimeout = 10 * time.Second

// bounded is a bucket whose every read and write waits at most kvTimeout.
type bounded struct{ jetstream.KeyValue }

func (b bounded) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	return b.KeyValue.Get(ctx, key)
}

func (b bounded) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	return b.KeyValue.Put(ctx, key, value)
}

func (b bounded) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	return b.KeyValue.Create(ctx, key, value, opts...)
}

func (b bounded) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	return b.KeyValue.Update(ctx, key, value, last)
}

func (b bounded) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	return b.KeyValue.Delete(ctx, key, opts...)
}

func (b bounded) Purge(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	ctx, cancel := context.WithTimeout(ctx, kvTimeout)
	defer cancel()
	return b.KeyValue.Purge(ctx, key, opts...)
}
