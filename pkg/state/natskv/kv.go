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

// readAll reads every current entry of kv once, as of the read: a watch
// drained until it has delivered the bucket's last write. Its end marker
// is not enough: the watch is an ephemeral consumer the server places on
// any replica of the bucket, and a replica need not have applied yet a
// write the leader acknowledged (a quorum stored it; the others apply it
// when the leader tells them it is committed). Such a watch reports the
// replica's values, without the write (a List right after two Puts once
// listed nothing). So the leader's last revision is read first (the
// stream's info, which only the leader answers), and the watch is drained
// on past its marker until it has delivered that revision: a write the
// replica applies late comes as an update, and a key's last entry wins.
// Deleted keys are left out by readAll itself (their markers count
// towards the last revision): opts must not hold IgnoreDeletes
// (MetaOnly is the one a caller passes).
//
// Neither reading the revision, creating the watch nor draining it may
// hang: a request sent while the bucket elects a leader can go
// unanswered, and nats.go would wait for the caller's deadline (a plan
// once waited 3 minutes for the consumer of a watch, after a NATS node
// was lost). An attempt that makes no progress for attemptFor (no
// answer, or no entry) is cut short and made again, as a read is
// (retryElection); one that progresses may take as long as the bucket
// needs.
func readAll(ctx context.Context, kv jetstream.KeyValue, opts ...jetstream.WatchOpt) ([]jetstream.KeyValueEntry, error) {
	return readAllIdle(ctx, kv, attemptFor, opts...)
}

// readAllIdle is readAll cutting an attempt short after idle without
// progress.
func readAllIdle(ctx context.Context, kv jetstream.KeyValue, idleFor time.Duration, opts ...jetstream.WatchOpt) ([]jetstream.KeyValueEntry, error) {
	var out []jetstream.KeyValueEntry
	err := retryElection(ctx, func(context.Context) error {
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
		last, err := lastRevision(wctx, kv)
		if err != nil {
			if wctx.Err() != nil {
				return stalled(err)
			}
			return err
		}
		idle.Reset(idleFor)
		w, err := kv.WatchAll(wctx, opts...)
		if err != nil {
			if wctx.Err() != nil {
				return stalled(err)
			}
			return err
		}
		defer func() { _ = w.Stop() }()
		var (
			seen   uint64 // the highest revision delivered
			marked bool   // the replica's values are delivered
			order  []string
			latest = map[string]jetstream.KeyValueEntry{}
		)
		for !marked || seen < last {
			select {
			case e, ok := <-w.Updates():
				if !ok {
					return stalled(errors.New("the watch ended"))
				}
				idle.Reset(idleFor)
				if e == nil {
					marked = true
					continue
				}
				seen = max(seen, e.Revision())
				if _, ok := latest[e.Key()]; !ok {
					order = append(order, e.Key())
				}
				latest[e.Key()] = e
			case <-wctx.Done():
				return stalled(fmt.Errorf("revision %d of %d delivered: %w", seen, last, wctx.Err()))
			}
		}
		out = make([]jetstream.KeyValueEntry, 0, len(order))
		for _, k := range order {
			if e := latest[k]; e.Operation() == jetstream.KeyValuePut {
				out = append(out, e)
			}
		}
		return nil
	})
	return out, err
}

// lastRevision is the revision of kv's last write (0 when it holds no
// entry), as its stream's leader knows it. The entry of that revision is
// kept until a newer write: a key's newest entry stays (History 1), and
// Delete and Purge write a marker. (Were it removed otherwise, by purging
// the bucket's stream by subject, a readAll would fail, no watch
// delivering it, until the next write.)
func lastRevision(ctx context.Context, kv jetstream.KeyValue) (uint64, error) {
	st, err := kv.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the bucket's status: %w", err)
	}
	bs, ok := st.(streamStatus) // *jetstream.KeyValueBucketStatus
	if !ok || bs.StreamInfo() == nil {
		return 0, errors.New("the bucket's status has no stream info")
	}
	if bs.StreamInfo().State.Msgs == 0 {
		return 0, nil
	}
	return bs.StreamInfo().State.LastSeq, nil
}

// streamStatus is a bucket's status with its stream's info.
type streamStatus interface {
	StreamInfo() *jetstream.StreamInfo
}
