package natskv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// electionFor is how long a read or write of a bucket is retried while
// the bucket has no leader: a NATS node lost, its streams elect another
// in seconds. A function's state update that failed on that would
// otherwise use up its retries and be given up.
const electionFor = 20 * time.Second

// patient is a bucket whose reads and writes outlast a leader election.
// A write that went through without its answer and is sent again meets a
// revision conflict (Update, Create), which callers handle as they handle
// another writer's; Put and Purge are idempotent.
type patient struct{ jetstream.KeyValue }

func (p patient) Get(ctx context.Context, key string) (e jetstream.KeyValueEntry, err error) {
	err = retryElection(ctx, func(ctx context.Context) error { e, err = p.KeyValue.Get(ctx, key); return err })
	return e, err
}

func (p patient) Put(ctx context.Context, key string, value []byte) (rev uint64, err error) {
	err = retryElection(ctx, func(ctx context.Context) error { rev, err = p.KeyValue.Put(ctx, key, value); return err })
	return rev, err
}

func (p patient) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (rev uint64, err error) {
	err = retryElection(ctx, func(ctx context.Context) error { rev, err = p.KeyValue.Create(ctx, key, value, opts...); return err })
	return rev, err
}

func (p patient) Update(ctx context.Context, key string, value []byte, last uint64) (rev uint64, err error) {
	err = retryElection(ctx, func(ctx context.Context) error { rev, err = p.KeyValue.Update(ctx, key, value, last); return err })
	return rev, err
}

func (p patient) Purge(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	return retryElection(ctx, func(ctx context.Context) error { return p.KeyValue.Purge(ctx, key, opts...) })
}

// attemptFor bounds one read or write: a request sent while a bucket's
// leader is elected can go unanswered, and nats.go would wait for the
// caller's deadline (minutes) rather than its own 5 s default. An attempt
// cut short is retried like one answered "no leader".
const attemptFor = 10 * time.Second

// retryElection runs op until it succeeds, fails otherwise than for want
// of a leader, ctx ends or electionFor passed; each attempt gets at most
// attemptFor.
func retryElection(ctx context.Context, op func(context.Context) error) error {
	deadline := time.Now().Add(electionFor)
	wait := 100 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, attemptFor)
		err := op(actx)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %s: %w", attemptFor, nats.ErrTimeout)
		}
		if err == nil || !leaderless(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// leaderless tells whether err is what JetStream answers while a stream
// has no leader (or its leader's server just went away).
func leaderless(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout)
}

// readAll reads every entry of kv once: a watch drained to its end
// marker. Neither creating the watch nor draining it may hang: a request
// sent while the bucket elects a leader can go unanswered, and nats.go
// would wait for the caller's deadline (a plan once waited 3 minutes for
// the consumer of a watch, after a NATS node was lost). An attempt that
// makes no progress for attemptFor (no watch, or no entry) is cut short
// and made again, as a read is (retryElection); one that progresses may
// take as long as the bucket needs.
func readAll(ctx context.Context, kv jetstream.KeyValue, opts ...jetstream.WatchOpt) ([]jetstream.KeyValueEntry, error) {
	return readAllIdle(ctx, kv, attemptFor, opts...)
}

// readAllIdle is readAll cutting an attempt short after idle without
// progress.
func readAllIdle(ctx context.Context, kv jetstream.KeyValue, idleFor time.Duration, opts ...jetstream.WatchOpt) ([]jetstream.KeyValueEntry, error) {
	var out []jetstream.KeyValueEntry
	err := retryElection(ctx, func(context.Context) error {
		out = out[:0]
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		idle := time.AfterFunc(idleFor, cancel)
		defer idle.Stop()
		stalled := func(err error) error {
			if ctx.Err() != nil {
				return err
			}
			return fmt.Errorf("no progress within %s: %w", idleFor, nats.ErrTimeout)
		}
		w, err := kv.WatchAll(wctx, opts...)
		if err != nil {
			if wctx.Err() != nil {
				return stalled(err)
			}
			return err
		}
		defer func() { _ = w.Stop() }()
		for {
			select {
			case e, ok := <-w.Updates():
				if !ok {
					return stalled(errors.New("the watch ended"))
				}
				idle.Reset(idleFor)
				if e == nil {
					return nil
				}
				out = append(out, e)
			case <-wctx.Done():
				return stalled(wctx.Err())
			}
		}
	})
	return out, err
}
