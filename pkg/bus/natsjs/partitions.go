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
//
// Two loops do it. One heartbeats and renews every lease held, and
// nothing else, so that stopping a partition's work (which waits for its
// runs) never holds a renewal back: a lease is renewed until its work has
// stopped, then deleted. The other balances: it follows the bucket,
// stops and starts the work (onSet) and claims and releases leases. It
// runs every Renew, and at once when the first loop lost a lease.
type Partitions struct {
	kv    jetstream.KeyValue
	o     PartitionOptions
	onSet func(owned []int)
	log   *slog.Logger

	stopBalance, stopRenew context.CancelFunc
	balanced, renewing     chan struct{} // closed when each loop has ended
	kick                   chan struct{} // a lease was lost: balance now

	leases sync.Mutex // serialises the writes to the partitions' leases (a renewal round, or one claim or release)

	mu      sync.Mutex
	seen    map[string]seenKey // key -> what this replica last saw of it
	held    map[int]uint64     // partition -> revision of our lease
	working []int              // the partitions whose work runs (onSet's last)
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
// Leave. onSet is called with the partitions whose work should run
// whenever that changes: before a lease is released, without the
// partition; after one is claimed, with it. onSet must start and stop the
// partitions' work before it returns; its calls never overlap.
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
	base := context.WithoutCancel(ctx)
	bctx, stopBalance := context.WithCancel(base)
	rctx, stopRenew := context.WithCancel(base)
	p := &Partitions{kv: kv, o: o, onSet: onSet, log: log.With("replica", o.Replica),
		stopBalance: stopBalance, stopRenew: stopRenew,
		balanced: make(chan struct{}), renewing: make(chan struct{}), kick: make(chan struct{}, 1),
		seen: map[string]seenKey{}, held: map[int]uint64{}}
	// A watch that cannot start now (a NATS node going away) is started
	// again at the next round, as one that ends.
	w, err := kv.WatchAll(bctx)
	if err != nil {
		p.log.Warn("watching the leases; trying again at the next round", "error", err)
		w = nil
	}
	go p.renewLoop(rctx)
	go p.balanceLoop(bctx, w)
	return p, nil
}

// renewLoop heartbeats and renews every Renew until stopped.
func (p *Partitions) renewLoop(ctx context.Context) {
	defer close(p.renewing)
	tick := time.NewTicker(p.o.Renew)
	defer tick.Stop()
	for {
		p.renew(ctx)
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// renew heartbeats and renews every lease held. A lease someone else took
// is lost at once; past the renew deadline, every lease is: the balancing
// loop then stops their work.
func (p *Partitions) renew(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, p.o.Renew)
	defer cancel()
	if _, err := p.kv.Put(ctx, memberKey(p.o.Replica), []byte(p.o.Replica)); err != nil {
		p.log.Warn("heartbeat failed", "error", err)
	}
	p.leases.Lock()
	defer p.leases.Unlock()
	p.mu.Lock()
	held := cloneHeld(p.held)
	p.mu.Unlock()
	start := time.Now()
	ok, lost := true, false
	for part, rev := range held {
		next, err := p.kv.Update(ctx, partitionKey(part), []byte(p.o.Replica), rev)
		switch {
		case err == nil:
			held[part] = next
		case isConflict(err) || errors.Is(err, jetstream.ErrKeyNotFound):
			p.log.Warn("a partition's lease was taken over", "partition", part)
			delete(held, part)
			lost = true
		default:
			ok = false
		}
	}
	p.mu.Lock()
	// The deadline is judged on the clock after the renewals failed: they
	// may take up to Renew, and the others judge the lease by when they
	// last saw it change.
	switch {
	case ok:
		p.renewed = start
	case time.Since(p.renewed) >= p.o.RenewDeadline && len(held) > 0:
		p.log.Warn("leases not renewed within the deadline: stopping every partition", "held", len(held))
		held, lost = map[int]uint64{}, true
	}
	p.held = held
	p.mu.Unlock()
	if lost {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// balanceLoop follows the bucket and balances the leases every Renew, or
// at once when a lease was lost, until stopped. A watch that ends (the
// connection lost) is started again at the next round.
func (p *Partitions) balanceLoop(ctx context.Context, w jetstream.KeyWatcher) {
	defer close(p.balanced)
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
	p.balance(ctx)
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
		case <-p.kick:
			p.balance(ctx)
		case <-tick.C:
			if w == nil {
				if nw, err := p.kv.WatchAll(ctx); err == nil {
					w, updates = nw, nw.Updates()
				}
			}
			p.balance(ctx)
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

// balance stops the work this replica should no longer do (another
// member's now, or its lease lost), releases those leases once their work
// stopped, claims what is its and free, and starts their work.
func (p *Partitions) balance(ctx context.Context) {
	now := time.Now()
	want := p.assignment(now)
	p.setWork(p.keep(p.Owned(), want))
	p.release(ctx, want)
	p.claimWanted(ctx, want, now)
	p.setWork(p.keep(sortedKeys(p.leased()), want))
}

// keep is the partitions of parts this replica wants and holds a lease of.
func (p *Partitions) keep(parts []int, want map[int]bool) []int {
	held := p.leased()
	out := []int{}
	for _, part := range parts {
		if _, ok := held[part]; ok && want[part] {
			out = append(out, part)
		}
	}
	return out
}

// release deletes the leases held that another member should hold, whose
// work has stopped. Each write holds leases alone, so that a renewal
// waits for one write at most.
func (p *Partitions) release(ctx context.Context, want map[int]bool) {
	ctx, cancel := context.WithTimeout(ctx, p.o.Renew)
	defer cancel()
	working := p.Owned()
	for part := range p.leased() {
		if want[part] || slices.Contains(working, part) {
			continue
		}
		p.releaseOne(ctx, part)
	}
}

func (p *Partitions) releaseOne(ctx context.Context, part int) {
	p.leases.Lock()
	defer p.leases.Unlock()
	rev, ok := p.leased()[part]
	if !ok {
		return // lost meanwhile
	}
	if err := p.kv.Delete(ctx, partitionKey(part), jetstream.LastRevision(rev)); err != nil && !isConflict(err) {
		p.log.Warn("releasing a partition", "partition", part, "error", err)
	}
	p.mu.Lock()
	delete(p.held, part)
	p.mu.Unlock()
}

// claimWanted claims the leases of what this replica wants and is free,
// one write at a time as release.
func (p *Partitions) claimWanted(ctx context.Context, want map[int]bool, now time.Time) {
	ctx, cancel := context.WithTimeout(ctx, p.o.Renew)
	defer cancel()
	for part := range want {
		p.claimOne(ctx, part, now)
	}
}

func (p *Partitions) claimOne(ctx context.Context, part int, now time.Time) {
	p.leases.Lock()
	defer p.leases.Unlock()
	if _, mine := p.leased()[part]; mine {
		return
	}
	if rev, ok := p.claim(ctx, part, now); ok {
		p.mu.Lock()
		p.held[part] = rev
		p.mu.Unlock()
	}
}

// leased is a copy of the leases held.
func (p *Partitions) leased() map[int]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return cloneHeld(p.held)
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

// setWork has onSet run the work of parts (sorted), when that changes.
func (p *Partitions) setWork(parts []int) {
	if slices.Equal(parts, p.Owned()) {
		return
	}
	p.log.Info("partitions held", "partitions", parts)
	p.onSet(parts)
	p.mu.Lock()
	p.working = parts
	p.mu.Unlock()
}

// Owned returns the partitions whose work runs on this replica.
func (p *Partitions) Owned() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.working)
}

// Leave stops the partitions' work, renewing their leases until it has
// stopped, then releases them and the member key, so the others take
// them over at once.
func (p *Partitions) Leave(ctx context.Context) error {
	p.stopBalance()
	<-p.balanced
	p.setWork([]int{})
	p.stopRenew()
	<-p.renewing
	var errs []error
	for part, rev := range p.leased() {
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
	p.stopBalance()
	p.stopRenew()
	<-p.balanced
	<-p.renewing
	p.setWork([]int{})
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

func sortedKeys(m map[int]uint64) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
