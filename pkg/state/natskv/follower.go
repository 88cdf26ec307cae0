package natskv

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// follower keeps what a watch of a bucket delivers, for an index that
// answers reads from memory once the watch has seen the bucket's last
// write (the leader's last revision: a watch runs on any replica, which
// may lag). It is started by the first read and made again when it ends;
// one that stays behind is stopped, so the next read starts another.
//
// load takes the bucket's entries as the watch delivered them at its
// start (puts, deletes and purges, a key's last first-seen order), apply
// each later change; both run under mu, which the index's own fields
// share.
type follower struct {
	kv    jetstream.KeyValue
	what  string // "the archive": for errors
	opts  []jetstream.WatchOpt
	load  func(entries []jetstream.KeyValueEntry)
	apply func(e jetstream.KeyValueEntry)

	mu   sync.Mutex
	seen uint64 // the highest revision the watch delivered
	live bool   // the watch runs and delivered the bucket's entries
	w    jetstream.KeyWatcher
}

// catchUpFor bounds how long a read waits for the watch to have seen the
// bucket's last write before its caller reads the bucket itself.
const catchUpFor = 2 * time.Second

// upToDate tells whether the follower holds every write acknowledged
// before the call, starting its watch if it is not running; false when it
// could not be brought up to date within catchUpFor (the caller reads the
// bucket itself).
func (f *follower) upToDate(ctx context.Context) bool {
	last, err := lastRevision(ctx, f.kv)
	if err != nil {
		return false
	}
	deadline := time.Now().Add(catchUpFor)
	for {
		f.mu.Lock()
		live, seen := f.live, f.seen
		f.mu.Unlock()
		if live && seen >= last {
			return true
		}
		if !live {
			if err := f.watch(ctx); err != nil {
				return false
			}
			continue
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			f.restart()
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// restart stops a watch that stays behind: the next read starts another,
// and what this one still delivers is ignored.
func (f *follower) restart() {
	f.mu.Lock()
	w := f.w
	f.w, f.live = nil, false
	f.mu.Unlock()
	if w != nil {
		_ = w.Stop()
	}
}

// watch starts the watch and returns once it delivered the bucket's
// entries.
func (f *follower) watch(ctx context.Context) error {
	// The watch outlives the read that started it: it ends with the
	// connection (or the bucket), or restart.
	w, err := f.kv.WatchAll(context.WithoutCancel(ctx), f.opts...)
	if err != nil {
		return fmt.Errorf("watching %s: %w", f.what, err)
	}
	f.mu.Lock()
	// Revisions count again from this watch's: an earlier watch may have
	// run on a replica ahead of this one's.
	f.w, f.seen = w, 0
	f.mu.Unlock()
	loaded := make(chan struct{})
	go func() {
		defer func() {
			f.mu.Lock()
			if f.w == w {
				f.w, f.live = nil, false
			}
			f.mu.Unlock()
		}()
		var initial []jetstream.KeyValueEntry
		first := true
		for e := range w.Updates() {
			f.mu.Lock()
			switch {
			case f.w != w: // stopped by restart
			case e == nil: // the bucket's entries are delivered
				f.load(initial)
				f.live, initial, first = true, nil, false
				close(loaded)
			case first:
				initial = append(initial, e)
				f.seen = max(f.seen, e.Revision())
			default:
				f.seen = max(f.seen, e.Revision())
				f.apply(e)
			}
			f.mu.Unlock()
		}
		if first {
			close(loaded)
		}
	}()
	// A watch made but silent (its consumer placed on a replica that does
	// not answer) is given up within catchUpFor, as a read waits no more.
	wait := time.NewTimer(catchUpFor)
	defer wait.Stop()
	select {
	case <-loaded:
	case <-wait.C:
		f.restart()
		return fmt.Errorf("watching %s: nothing delivered within %s", f.what, catchUpFor)
	case <-ctx.Done():
		_ = w.Stop()
		return ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.live || f.w != w {
		return fmt.Errorf("watching %s: %w", f.what, errors.New("the watch ended"))
	}
	return nil
}
