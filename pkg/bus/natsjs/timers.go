package natsjs

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-cd/flotilla/pkg/bus"
)

// Timers are a KV bucket of due times, <Stream>_timers, rather than
// JetStream's scheduled messages: the engine fires timers itself
// (FireDue(now), its clock, per partition) and asks when the next one is
// due, which a schedule the server fires on its own cannot answer. A key
// is the event's partition, the due time in unix nanoseconds and the event
// id in base64url, dot-separated, so one id scheduled twice for one time is
// one key; the value is the event. A partition's timers are fired by the
// replica that holds it (View). Every replica watches the bucket into an index in memory: NextDue
// reads it, Schedule by any replica wakes every replica's timer loop. Two
// replicas firing one timer append it once, the stream dropping the
// repeated id.

type timer struct {
	part int
	due  time.Time
	rev  uint64
	raw  []byte
}

type timerIndex struct {
	kv     jetstream.KeyValue
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	byKey   map[string]timer
	gone    map[string]uint64 // key -> revision this process deleted
	changed chan struct{}
}

func timerKey(part int, due time.Time, id string) string {
	return strconv.Itoa(part) + "." + strconv.FormatInt(due.UnixNano(), 10) + "." + base64.RawURLEncoding.EncodeToString([]byte(id))
}

// parseTimerKey returns a timer key's partition and due time.
func parseTimerKey(key string) (int, time.Time, bool) {
	ps, rest, ok1 := strings.Cut(key, ".")
	ns, _, ok2 := strings.Cut(rest, ".")
	part, err1 := strconv.Atoi(ps)
	n, err2 := strconv.ParseInt(ns, 10, 64)
	return part, time.Unix(0, n), ok1 && ok2 && err1 == nil && err2 == nil
}

// watchTimers indexes the bucket's timers and follows it; it returns once
// the index holds every timer the bucket had. A watch that ends (its
// server gone for longer than it retries) is started again, and its first
// snapshot replaces the index.
func watchTimers(ctx context.Context, kv jetstream.KeyValue) (*timerIndex, error) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t := &timerIndex{kv: kv, cancel: cancel, done: make(chan struct{}), byKey: map[string]timer{}, gone: map[string]uint64{}, changed: make(chan struct{})}
	w, err := retried(ctx, func(ctx context.Context) (jetstream.KeyWatcher, error) { return t.snapshot(ctx, wctx) })
	if err != nil {
		cancel()
		return nil, err
	}
	go func() {
		defer close(t.done)
		for {
			t.follow(wctx, w)
			_ = w.Stop()
			for {
				select {
				case <-wctx.Done():
					return
				case <-time.After(time.Second):
				}
				if w, err = t.snapshot(wctx, wctx); err == nil {
					break
				}
			}
		}
	}()
	return t, nil
}

// snapshot starts a watch of every timer and replaces the index with the
// bucket's timers; the watch runs until wctx ends.
func (t *timerIndex) snapshot(ctx, wctx context.Context) (jetstream.KeyWatcher, error) {
	w, err := t.kv.WatchAll(wctx)
	if err != nil {
		return nil, fmt.Errorf("watching the timers: %w", err)
	}
	var initial []jetstream.KeyValueEntry
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				_ = w.Stop()
				return nil, errors.New("watching the timers: the watch ended")
			}
			if e != nil {
				initial = append(initial, e)
				continue
			}
			t.mu.Lock()
			t.byKey = map[string]timer{}
			for _, e := range initial {
				if e.Operation() == jetstream.KeyValuePut {
					t.put(e.Key(), e.Revision(), e.Value())
				}
			}
			close(t.changed) // a timer may have gone: NextDue again
			t.changed = make(chan struct{})
			t.mu.Unlock()
			return w, nil
		case <-ctx.Done():
			_ = w.Stop()
			return nil, fmt.Errorf("reading the timers: %w", ctx.Err())
		}
	}
}

// follow applies the watch's changes until it ends or ctx does.
func (t *timerIndex) follow(ctx context.Context, w jetstream.KeyWatcher) {
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e != nil {
				t.apply(e)
			}
		case <-ctx.Done():
			return
		}
	}
}

func (t *timerIndex) stop() {
	t.cancel()
	<-t.done
}

// apply takes a change of the bucket into the index.
func (t *timerIndex) apply(e jetstream.KeyValueEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.Operation() != jetstream.KeyValuePut {
		delete(t.byKey, e.Key())
		delete(t.gone, e.Key()) // no older put of it can follow
		return
	}
	t.put(e.Key(), e.Revision(), e.Value())
}

// put indexes a timer, unless this process deleted it at a later revision
// (the watch delivers the put after the delete went through). Holds mu.
func (t *timerIndex) put(key string, rev uint64, raw []byte) {
	if rev <= t.gone[key] {
		return
	}
	if cur, ok := t.byKey[key]; ok && cur.rev >= rev {
		return
	}
	part, due, ok := parseTimerKey(key)
	if !ok {
		return // not a timer of this format
	}
	t.byKey[key] = timer{part: part, due: due, rev: rev, raw: raw}
	close(t.changed)
	t.changed = make(chan struct{})
}

// TimersChanged returns a channel closed at the next Schedule of a timer,
// by any replica.
func (b *Bus) TimersChanged() <-chan struct{} {
	b.timers.mu.Lock()
	defer b.timers.mu.Unlock()
	return b.timers.changed
}

// Schedule keeps the events due later than the engine's clock
// (Options.Now) as timers, replicated before it returns, and appends the
// others.
func (b *Bus) Schedule(ctx context.Context, evs ...cloudevents.Event) error {
	now, later := bus.SplitDue(evs, b.o.Now())
	if len(now) > 0 {
		if _, err := b.Append(ctx, now...); err != nil {
			return err
		}
	}
	if len(later) == 0 {
		return nil
	}
	raw, err := bus.Encode(later)
	if err != nil {
		return fmt.Errorf("scheduling %d timers: %w", len(later), err)
	}
	for i, e := range later {
		due, _ := bus.Due(e)
		key := timerKey(partition(b.o.PartitionKey(e), b.o.Partitions), due, e.ID())
		rev, err := b.timers.kv.Put(ctx, key, raw[i])
		if err != nil {
			return fmt.Errorf("scheduling timer %s: %w", bus.ShortID(e.ID()), err)
		}
		b.timers.mu.Lock()
		b.timers.put(key, rev, raw[i])
		b.timers.mu.Unlock()
	}
	return nil
}

// NextDue returns when the earliest timer is due.
func (b *Bus) NextDue(ctx context.Context) (time.Time, bool, error) {
	return b.nextDue(ctx, allPartitions)
}

// allPartitions selects the timers of every partition.
const allPartitions = -1

func (b *Bus) nextDue(ctx context.Context, part int) (time.Time, bool, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, false, err
	}
	b.timers.mu.Lock()
	defer b.timers.mu.Unlock()
	var next time.Time
	for _, t := range b.timers.byKey {
		if part != allPartitions && t.part != part {
			continue
		}
		if next.IsZero() || t.due.Before(next) {
			next = t.due
		}
	}
	return next, !next.IsZero(), nil
}

// FireDue appends up to limit timers due at or before now, earliest first,
// then deletes them.
func (b *Bus) FireDue(ctx context.Context, now time.Time, limit int) (int, error) {
	return b.fireDue(ctx, now, limit, allPartitions)
}

func (b *Bus) fireDue(ctx context.Context, now time.Time, limit, part int) (int, error) {
	type due struct {
		key string
		timer
	}
	b.timers.mu.Lock()
	var ready []due
	for k, t := range b.timers.byKey {
		if !t.due.After(now) && (part == allPartitions || t.part == part) {
			ready = append(ready, due{k, t})
		}
	}
	b.timers.mu.Unlock()
	slices.SortFunc(ready, func(a, b due) int {
		if c := a.due.Compare(b.due); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	if limit > 0 && len(ready) > limit {
		ready = ready[:limit]
	}
	if len(ready) == 0 {
		return 0, nil
	}
	evs := make([]cloudevents.Event, 0, len(ready))
	for _, d := range ready {
		e, err := bus.Decode(d.raw)
		if err != nil {
			return 0, fmt.Errorf("timer %s does not read back: %w", d.key, err)
		}
		evs = append(evs, e)
	}
	if _, err := b.Append(ctx, evs...); err != nil {
		return 0, fmt.Errorf("appending due timers: %w", err)
	}
	for _, d := range ready {
		if err := b.timers.kv.Delete(ctx, d.key, jetstream.LastRevision(d.rev)); err != nil && !isWrongRevision(err) {
			return 0, fmt.Errorf("deleting fired timer %s: %w", d.key, err)
		}
		b.timers.mu.Lock()
		b.timers.gone[d.key] = max(b.timers.gone[d.key], d.rev)
		delete(b.timers.byKey, d.key)
		b.timers.mu.Unlock()
	}
	return len(ready), nil
}

// isWrongRevision tells that a timer was deleted (or scheduled again)
// meanwhile: by another replica firing it too.
func isWrongRevision(err error) bool { return errors.Is(err, jetstream.ErrKeyRevisionMismatch) }
