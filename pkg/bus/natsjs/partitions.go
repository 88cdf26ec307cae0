package natsjs

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Partitions share the engine's work among the live replicas, without a
// leader: each partition is held by one replica at a time, under a lease in
// a KV bucket (<Stream>_leases), and handed over when its holder goes away.
//
// Every replica heartbeats a member key and watches the bucket. The live
// members are those whose key changed within LeaseDuration, as this
// replica's clock saw it (Kubernetes' leader election judges a lease the
// same way: by when it was last seen to change, not by comparing clocks).
// Each partition belongs to the live member that rendezvous hashing picks
// for it, so a member's arrival or departure moves only its share. The
// picked member claims the partition's lease (created, or taken over once
// it has not changed for LeaseDuration) and renews it every Renew; a
// holder no longer picked releases it, after it has stopped the
// partition's work. A holder that cannot renew within RenewDeadline
// (shorter than LeaseDuration) stops the work of all it holds, before
// any other replica may take them over: two replicas never work one
// partition at once.
type Partitions struct {
	kv     jetstream.KeyValue
	o      PartitionOptions
	onSet  func(owned []int)
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	seen map[string]seenKey // key -> what this replica last saw of it
	held map[int]uint64     // partition -> revision of our lease
	// renewed is when every lease we hold was last renewed together.
	renewed time.Time
}

type seenKey struct {
	value string
	rev   uint64
	at    time.Time // local time the revision was first seen
}

// PartitionOptions size the partitions and their leases.
type PartitionOptions struct {
	// Replica names this replica (unique among the live ones: the pod's
	// name).
	Replica string
	// Count of partitions (default 16): more than replicas, so work
	// spreads, and fixed for a stream's life.
	Count int
	// LeaseDuration: a lease unchanged that long is free (default 4s);
	// RenewDeadline: a holder that could not renew that long stops
	// (default 3s); Renew: how often leases are renewed (default 1s).
	LeaseDuration, RenewDeadline, Renew time.Duration
}

// Defaults of PartitionOptions: a replica's partitions are taken over
// within LeaseDuration + Renew of its loss (DESIGN: 5 s).
const (
	DefaultPartitions    = 16
	DefaultLeaseDuration = 4 * time.Second
	DefaultRenewDeadline = 3 * time.Second
	DefaultRenew         = time.Second
)

func (o PartitionOptions) withDefaults() (PartitionOptions, error) {
	if o.Replica == "" {
		return o, errors.New("partitions: the replica needs a name")
	}
	if o.Count <= 0 {
		o.Count = DefaultPartitions
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewDeadline <= 0 {
		o.RenewDeadline = DefaultRenewDeadline
	}
	if o.Renew <= 0 {
		o.Renew = DefaultRenew
	}
	if o.RenewDeadline >= o.LeaseDuration || o.Renew >= o.RenewDeadline {
		return o, fmt.Errorf("partitions: need renew (%v) < renew deadline (%v) < lease duration (%v)", o.Renew, o.RenewDeadline, o.LeaseDuration)
	}
	return o, nil
}

func memberKey(replica string) string {
	return "member." + base64.RawURLEncoding.EncodeToString([]byte(replica))
}

func partitionKey(p int) string { return "partition." + strconv.Itoa(p) }

// JoinPartitions has this replica take its share of the partitions until
// Leave. onSet is called with the partitions it holds whenever that
// changes: before a lease is released, without the partition; after one
// is claimed, with it. onSet must start and stop the partitions' work
// before it returns.
func (b *Bus) JoinPartitions(ctx context.Context, o PartitionOptions, onSet func(owned []int), log *slog.Logger) (*Partitions, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	kv, err := EnsureKeyValue(ctx, b.js, jetstream.KeyValueConfig{
		Bucket: b.o.Stream + "_leases", Storage: jetstream.FileStorage, Replicas: b.o.Replicas, History: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the leases' bucket: %w", err)
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &Partitions{kv: kv, o: o, onSet: onSet, log: log.With("replica", o.Replica), cancel: cancel, done: make(chan struct{}),
		seen: map[string]seenKey{}, held: map[int]uint64{}}
	// A watch that cannot start now (a NATS node going away) is started
	// again at the next round, as one that ends.
	w, err := kv.WatchAll(wctx)
	if err != nil {
		p.log.Warn("watching the leases; trying again at the next round", "error", err)
		w = nil
	}
	go p.run(wctx, w)
	return p, nil
}

// run heartbeats, follows the bucket and balances the leases until Leave.
// A watch that ends (the connection lost) is started again at the next
// round; meanwhile rounds go on, so a holder cut off stops its work at the
// renew deadline.
func (p *Partitions) run(ctx context.Context, w jetstream.KeyWatcher) {
	defer close(p.done)
	defer func() {
		if w != nil {
			_ = w.Stop()
		}
	}()
	var updates <-chan jetstream.KeyValueEntry
	if w != nil {
		updates = w.Updates()
	}
	tick := time.NewTicker(p.o.Renew)
	defer tick.Stop()
	p.round(ctx)
	for {
		select {
		case e, ok := <-updates:
			if !ok {
				updates, w = nil, nil
				continue
			}
			if e != nil {
				p.saw(e)
			}
		case <-tick.C:
			if w == nil {
				if nw, err := p.kv.WatchAll(ctx); err == nil {
					w, updates = nw, nw.Updates()
				}
			}
			p.round(ctx)
		case <-ctx.Done():
			return
		}
	}
}

// saw records a change of the bucket.
func (p *Partitions) saw(e jetstream.KeyValueEntry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Operation() != jetstream.KeyValuePut {
		delete(p.seen, e.Key())
		return
	}
	if cur, ok := p.seen[e.Key()]; ok && cur.rev >= e.Revision() {
		return
	}
	p.seen[e.Key()] = seenKey{value: string(e.Value()), rev: e.Revision(), at: time.Now()}
}

// round heartbeats, renews what it holds, releases what it should not
// hold and claims what it should.
func (p *Partitions) round(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, p.o.Renew)
	defer cancel()
	now := time.Now()
	if _, err := p.kv.Put(ctx, memberKey(p.o.Replica), []byte(p.o.Replica)); err != nil {
		p.log.Warn("heartbeat failed", "error", err)
	}
	want := p.assignment(now)
	p.mu.Lock()
	held := cloneHeld(p.held)
	renewedAt := p.renewed
	p.mu.Unlock()

	// Release first what another member should hold, after stopping it.
	var release []int
	for part := range held {
		if !want[part] {
			release = append(release, part)
		}
	}
	if len(release) > 0 {
		p.set(without(held, release))
		for _, part := range release {
			if err := p.kv.Delete(ctx, partitionKey(part), jetstream.LastRevision(held[part])); err != nil && !isConflict(err) {
				p.log.Warn("releasing a partition", "partition", part, "error", err)
			}
			delete(held, part)
		}
	}
	// Renew the rest; a lease someone else took is lost at once.
	ok := true
	for part, rev := range held {
		next, err := p.kv.Update(ctx, partitionKey(part), []byte(p.o.Replica), rev)
		switch {
		case err == nil:
			held[part] = next
		case isConflict(err) || errors.Is(err, jetstream.ErrKeyNotFound):
			p.log.Warn("a partition's lease was taken over", "partition", part)
			delete(held, part)
		default:
			ok = false
		}
	}
	// The deadline is judged on the clock after the renewals failed, not
	// at the round's start: they may take up to Renew, and the others
	// judge the lease by when they last saw it change.
	if ok {
		renewedAt = now
	} else if time.Since(renewedAt) >= p.o.RenewDeadline {
		p.log.Warn("leases not renewed within the deadline: stopping every partition", "held", len(held))
		held = map[int]uint64{}
	}
	// Claim what is ours and free.
	for part := range want {
		if _, mine := held[part]; mine {
			continue
		}
		if rev, ok := p.claim(ctx, part, now); ok {
			held[part] = rev
		}
	}
	p.mu.Lock()
	p.renewed = renewedAt
	p.mu.Unlock()
	p.set(held)
}

// claim takes partition part's lease when it is absent, or unchanged for
// LeaseDuration.
func (p *Partitions) claim(ctx context.Context, part int, now time.Time) (uint64, bool) {
	key := partitionKey(part)
	p.mu.Lock()
	cur, exists := p.seen[key]
	p.mu.Unlock()
	var rev uint64
	var err error
	switch {
	case !exists:
		rev, err = p.kv.Create(ctx, key, []byte(p.o.Replica))
	case cur.value == p.o.Replica || now.Sub(cur.at) >= p.o.LeaseDuration:
		rev, err = p.kv.Update(ctx, key, []byte(p.o.Replica), cur.rev)
	default:
		return 0, false // held, and alive
	}
	if err != nil {
		if !isConflict(err) {
			p.log.Warn("claiming a partition", "partition", part, "error", err)
		}
		return 0, false
	}
	return rev, true
}

// assignment is the partitions rendezvous hashing gives this replica
// among the members alive at now.
func (p *Partitions) assignment(now time.Time) map[int]bool {
	p.mu.Lock()
	members := []string{p.o.Replica}
	for k, s := range p.seen {
		if strings.HasPrefix(k, "member.") && s.value != p.o.Replica && now.Sub(s.at) < p.o.LeaseDuration {
			members = append(members, s.value)
		}
	}
	p.mu.Unlock()
	want := map[int]bool{}
	for part := range p.o.Count {
		if pick(members, part) == p.o.Replica {
			want[part] = true
		}
	}
	return want
}

// pick is the member with the highest hash of (member, partition).
func pick(members []string, part int) string {
	var best string
	var bestScore uint64
	for _, m := range members {
		sum := sha256.Sum256([]byte(m + "\x00" + strconv.Itoa(part)))
		if s := binary.BigEndian.Uint64(sum[:8]); best == "" || s > bestScore || (s == bestScore && m < best) {
			best, bestScore = m, s
		}
	}
	return best
}

// set records held and tells onSet when the set changed.
func (p *Partitions) set(held map[int]uint64) {
	p.mu.Lock()
	before := sortedKeys(p.held)
	p.held = cloneHeld(held)
	after := sortedKeys(p.held)
	p.mu.Unlock()
	if !slices.Equal(before, after) {
		p.log.Info("partitions held", "partitions", after)
		p.onSet(after)
	}
}

// Owned returns the partitions this replica holds.
func (p *Partitions) Owned() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return sortedKeys(p.held)
}

// Leave stops the partitions' work, releases their leases and the
// member key, so the others take them over at once.
func (p *Partitions) Leave(ctx context.Context) error {
	p.cancel()
	<-p.done
	p.mu.Lock()
	held := cloneHeld(p.held)
	p.mu.Unlock()
	p.set(map[int]uint64{})
	var errs []error
	for part, rev := range held {
		if err := p.kv.Delete(ctx, partitionKey(part), jetstream.LastRevision(rev)); err != nil && !isConflict(err) {
			errs = append(errs, err)
		}
	}
	if err := p.kv.Delete(ctx, memberKey(p.o.Replica)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Crash stops the partitions' work and this replica's heartbeats without
// releasing anything, as a killed replica would (for tests).
func (p *Partitions) Crash() {
	p.cancel()
	<-p.done
	p.set(map[int]uint64{})
}

func isConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}

func cloneHeld(m map[int]uint64) map[int]uint64 {
	out := make(map[int]uint64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func without(m map[int]uint64, drop []int) map[int]uint64 {
	out := cloneHeld(m)
	for _, k := range drop {
		delete(out, k)
	}
	return out
}

func sortedKeys(m map[int]uint64) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
