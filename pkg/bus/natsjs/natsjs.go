package natsjs

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// Options name and size what Open creates (or updates) in JetStream.
type Options struct {
	// Stream is the stream of the events (default "FLOTILLA"); the KV
	// buckets of cursors and timers are named after it
	// (<Stream>_cursors, <Stream>_timers).
	Stream string
	// Subject prefixes the stream's subjects (default
	// "flotilla.events"): an event goes to <Subject>.<partition>.
	Subject string
	// Partitions of the stream (default 1), fixed for its life: an
	// event's partition is a hash of its key (PartitionKey), so the
	// events of one key keep their order in one partition, which one
	// replica at a time works (Partitions, View).
	Partitions int
	// PartitionKey is the key an event is partitioned by (the engine's
	// dispatch.Key); nil: its id.
	PartitionKey func(cloudevents.Event) string
	// MaxAge is how long the stream keeps an event (0: until the limits
	// of the server; the embedded journal's retention).
	MaxAge time.Duration
	// Remember selects the events whose ids Has answers for, within the
	// de-duplication window (the pipeline runs' answers); nil: none.
	Remember func(cloudevents.Event) bool
	// Replicas of the stream and the buckets (default 3: a NATS node
	// may be lost; 1 for a single-node server).
	Replicas int
	// Duplicates is the stream's de-duplication window: an event whose
	// id was appended within it is dropped (default 24h: senders
	// redeliver for hours).
	Duplicates time.Duration
	// Now is the engine's clock (app.Options.Clock): Schedule keeps as
	// timers the events due after it, and RunRetention retires the events
	// older than the retention before it. Default time.Now. The leases,
	// the stream's reads and the waits for the server stay on the wall
	// clock: they time NATS, not the rollouts.
	Now func() time.Time
}

// Defaults.
const (
	DefaultStream     = "FLOTILLA"
	DefaultSubject    = "flotilla.events"
	DefaultReplicas   = 3
	DefaultDuplicates = 24 * time.Hour
	// readBatch is how many records one direct batch get asks for when a
	// Read has no limit.
	readBatch = 512
	// maxAtomic is the most events one atomic batch carries (the
	// server's limit on a batch's size is 1,000).
	maxAtomic = 1000
)

func (o Options) withDefaults() Options {
	if o.Stream == "" {
		o.Stream = DefaultStream
	}
	if o.Subject == "" {
		o.Subject = DefaultSubject
	}
	if o.Replicas <= 0 {
		o.Replicas = DefaultReplicas
	}
	if o.Duplicates <= 0 {
		o.Duplicates = DefaultDuplicates
	}
	if o.Partitions <= 0 {
		o.Partitions = 1
	}
	if o.PartitionKey == nil {
		o.PartitionKey = func(e cloudevents.Event) string { return e.ID() }
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// metaPartitions is the stream's metadata naming its partition count.
const metaPartitions = "flotilla.partitions"

// partition is the partition of key among n.
func partition(key string, n int) int {
	if n <= 1 {
		return 0
	}
	sum := sha256.Sum256([]byte(key))
	return int(binary.BigEndian.Uint64(sum[:8]) % uint64(n))
}

// PartitionFor is the partition of the events of key among partitions:
// what PartitionOf answers on a bus of that many.
func PartitionFor(key string, partitions int) int { return partition(key, partitions) }

// PartitionOf is the partition of the events of key.
func (b *Bus) PartitionOf(key string) int { return partition(key, b.o.Partitions) }

// subject is partition p's subject.
func (b *Bus) subject(p int) string { return b.o.Subject + "." + strconv.Itoa(p) }

// subjectOf is the subject of event e.
func (b *Bus) subjectOf(e cloudevents.Event) string {
	return b.subject(partition(b.o.PartitionKey(e), b.o.Partitions))
}

// Bus is the bus on JetStream. It implements bus.Bus.
type Bus struct {
	o       Options
	nc      *nats.Conn
	js      jetstream.JetStream
	stream  jetstream.Stream
	cursors jetstream.KeyValue
	ids     jetstream.KeyValue // the ids Remember selects (nil: none)
	timers  *timerIndex

	// follow is the consumer of appends (followAppends), replaced under
	// followMu when it gave up; stopFollow ends it.
	followMu   sync.Mutex
	follow     jetstream.ConsumeContext
	stopFollow chan struct{}
	followDone chan struct{}
	closeOnce  sync.Once

	mu      sync.Mutex
	changed chan struct{}
	// high is the highest sequence known to be in the stream (this
	// process's appends and every append the follower saw), in all and
	// per subject: a Read from a replica behind it retries until it has
	// caught up.
	high      uint64
	highOfSub map[string]uint64
	// leaderAsked is when a short read of a subject last asked the
	// leader (leaderAhead).
	leaderAsked map[string]time.Time
	// first is the stream's first sequence as of firstAt.
	first   uint64
	firstAt time.Time
	// downSince is when Err first saw the connection down.
	downSince time.Time
}

var _ bus.Bus = (*Bus)(nil)

// Open creates or updates the stream and the buckets on nc's JetStream and
// follows them. nc stays the caller's: Close does not close it.
func Open(ctx context.Context, nc *nats.Conn, o Options) (*Bus, error) {
	o = o.withDefaults()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if cur, err := js.Stream(ctx, o.Stream); err == nil {
		if n := cur.CachedInfo().Config.Metadata[metaPartitions]; n != "" && n != strconv.Itoa(o.Partitions) {
			return nil, fault.Permanent(fmt.Errorf("stream %s has %s partitions, not %d: an event's partition would change with the count", o.Stream, n, o.Partitions))
		}
	}
	s, err := ensureStream(ctx, js, jetstream.StreamConfig{
		Name: o.Stream, Subjects: []string{o.Subject + ".*"}, Storage: jetstream.FileStorage, Replicas: o.Replicas,
		Duplicates: o.Duplicates, AllowDirect: true, AllowAtomicPublish: true, MaxAge: o.MaxAge,
		Metadata: map[string]string{metaPartitions: strconv.Itoa(o.Partitions)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating stream %s: %w", o.Stream, err)
	}
	b := &Bus{o: o, nc: nc, js: js, stream: s, changed: make(chan struct{}), highOfSub: map[string]uint64{}, leaderAsked: map[string]time.Time{}}
	info := s.CachedInfo()
	b.high, b.first, b.firstAt = info.State.LastSeq, info.State.FirstSeq, time.Now()
	if o.Remember != nil {
		if b.ids, err = EnsureKeyValue(ctx, js, jetstream.KeyValueConfig{
			Bucket: o.Stream + "_ids", Storage: jetstream.FileStorage, Replicas: o.Replicas, History: 1, TTL: o.Duplicates,
		}); err != nil {
			return nil, fmt.Errorf("creating the ids' bucket: %w", err)
		}
	}
	if err := b.answers(ctx); err != nil {
		return nil, err
	}
	if b.cursors, err = EnsureKeyValue(ctx, js, jetstream.KeyValueConfig{
		Bucket: o.Stream + "_cursors", Storage: jetstream.FileStorage, Replicas: o.Replicas, History: 1,
	}); err != nil {
		return nil, fmt.Errorf("creating the cursors' bucket: %w", err)
	}
	kv, err := EnsureKeyValue(ctx, js, jetstream.KeyValueConfig{
		Bucket: o.Stream + "_timers", Storage: jetstream.FileStorage, Replicas: o.Replicas, History: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the timers' bucket: %w", err)
	}
	b.cursors = bounded{b.cursors}
	if b.ids != nil {
		b.ids = bounded{b.ids}
	}
	if b.timers, err = watchTimers(ctx, bounded{kv}); err != nil {
		return nil, err
	}
	if err := b.followAppends(ctx, s); err != nil {
		b.timers.stop()
		return nil, err
	}
	return b, nil
}

// answers waits until a new stream answers direct reads (its replicas
// elected a leader): until then a read finds no responders.
func (b *Bus) answers(ctx context.Context) error {
	deadline := time.Now().Add(ensureTimeout)
	for {
		_, err := b.readBatch(ctx, "", 0, 1)
		if err == nil {
			return nil
		}
		// No responders: no leader yet; a read unanswered: the cluster is
		// busy electing (replicas restarting). Both are waited out.
		if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("reading stream %s: %w", b.o.Stream, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stream %s does not answer: %w", b.o.Stream, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// followAppends wakes readers at every append to the stream, by any
// replica: an ordered consumer of the new messages' headers, made again
// when it gives up (its server went away and it could not be reset). A
// reconnect wakes them too (appends may have happened meanwhile), and so
// does a tick every pollEvery: a reader never waits on a notification
// that cannot come (a consumer lost with its NATS node) for longer than
// that.
func (b *Bus) followAppends(ctx context.Context, s jetstream.Stream) error {
	cc, err := retried(ctx, func(ctx context.Context) (jetstream.ConsumeContext, error) { return b.consumeAppends(ctx, s) })
	if err != nil {
		return err
	}
	b.follow = cc
	b.stopFollow = make(chan struct{})
	b.followDone = make(chan struct{})
	go func() {
		defer close(b.followDone)
		tick := time.NewTicker(pollEvery)
		defer tick.Stop()
		for {
			select {
			case <-b.stopFollow:
				b.followMu.Lock()
				b.follow.Stop()
				b.followMu.Unlock()
				return
			case <-tick.C:
				b.appended(nil)
			case <-cc.Closed():
				b.appended(nil)
				next, err := b.consumeAppends(context.WithoutCancel(ctx), s)
				if err != nil {
					continue // the next tick tries again: cc stays closed
				}
				b.followMu.Lock()
				b.follow, cc = next, next
				b.followMu.Unlock()
			}
		}
	}()
	return nil
}

// pollEvery bounds how long a reader waits without a notification.
const pollEvery = 2 * time.Second

func (b *Bus) consumeAppends(ctx context.Context, s jetstream.Stream) (jetstream.ConsumeContext, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverNewPolicy, HeadersOnly: true,
	})
	if err != nil {
		return nil, fmt.Errorf("following stream %s: %w", b.o.Stream, err)
	}
	cc, err := c.Consume(func(m jetstream.Msg) {
		if md, err := m.Metadata(); err == nil {
			b.appended(map[string]uint64{m.Subject(): md.Sequence.Stream})
		}
	}, jetstream.ConsumeErrHandler(func(jetstream.ConsumeContext, error) { b.appended(nil) }))
	if err != nil {
		return nil, fmt.Errorf("following stream %s: %w", b.o.Stream, err)
	}
	return cc, nil
}

// appended records that the stream holds the sequences (by subject; none:
// unknown) and wakes the readers.
func (b *Bus) appended(seqs map[string]uint64) {
	b.mu.Lock()
	for sub, seq := range seqs {
		b.high = max(b.high, seq)
		b.highOfSub[sub] = max(b.highOfSub[sub], seq)
	}
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// Changed returns a channel closed at the next append to the stream.
func (b *Bus) Changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

// Close stops following the stream and the timers. The connection stays
// open.
func (b *Bus) Close() error {
	b.closeOnce.Do(func() { close(b.stopFollow) })
	<-b.followDone
	b.timers.stop()
	return nil
}

// ErrClosed is returned once the connection is closed.
var ErrClosed = errors.New("natsjs: connection closed")

// LastSeq is the highest sequence this process knows the stream holds.
func (b *Bus) LastSeq() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.high
}

// firstRefresh bounds how stale FirstSeq may be.
const firstRefresh = 5 * time.Second

// FirstSeq is the stream's first sequence (retention moves it), read again
// from the stream at most every few seconds.
func (b *Bus) FirstSeq() uint64 {
	b.mu.Lock()
	first, stale := b.first, time.Since(b.firstAt) > firstRefresh
	b.mu.Unlock()
	if !stale {
		return first
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := b.stream.Info(ctx)
	if err != nil {
		return first
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.first, b.firstAt = info.State.FirstSeq, time.Now()
	return b.first
}

// Has tells whether an event with id, of those Options.Remember selects,
// was appended within the de-duplication window.
func (b *Bus) Has(ctx context.Context, id string) (bool, error) {
	if b.ids == nil {
		return false, errors.New("natsjs: Has needs Options.Remember")
	}
	_, err := b.ids.Get(ctx, idsKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("looking up event %s: %w", bus.ShortID(id), err)
	}
	return true, nil
}

func idsKey(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(msgID(id))) }

// remember records the ids of the appended events Remember selects. A
// crash before it leaves Has answering false: the caller's work is then
// done again, as after any replay.
func (b *Bus) remember(ctx context.Context, recs []bus.Record) error {
	if b.ids == nil {
		return nil
	}
	for _, r := range recs {
		if b.o.Remember(r.Event) {
			if _, err := b.ids.Put(ctx, idsKey(r.Event.ID()), nil); err != nil {
				return fmt.Errorf("remembering event %s: %w", bus.ShortID(r.Event.ID()), err)
			}
		}
	}
	return nil
}

// downTolerance is how long the connection may be down (reconnecting to
// another node, a NATS node restarting) before Err reports it: a health
// check that restarted flotilla at every blip would not bring NATS back.
const downTolerance = 30 * time.Second

// Err says why the bus cannot take appends: its connection to NATS has
// been down for more than downTolerance. nil while it is up.
func (b *Bus) Err() error {
	st := b.nc.Status()
	b.mu.Lock()
	defer b.mu.Unlock()
	if st == nats.CONNECTED {
		b.downSince = time.Time{}
		return nil
	}
	if b.downSince.IsZero() {
		b.downSince = time.Now()
	}
	if d := time.Since(b.downSince); d > downTolerance {
		return fmt.Errorf("natsjs: the connection to NATS has been %s for %s", st, d.Round(time.Second))
	}
	return nil
}
