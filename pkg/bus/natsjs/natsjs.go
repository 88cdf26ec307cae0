package natsjs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-cd/flotilla/pkg/bus"
)

// Options name and size what Open creates (or updates) in JetStream.
type Options struct {
	// Stream is the stream of the events (default "FLOTILLA"); the KV
	// buckets of cursors and timers are named after it
	// (<Stream>_cursors, <Stream>_timers).
	Stream string
	// Subject is the stream's subject (default "flotilla.events").
	Subject string
	// Replicas of the stream and the buckets (default 3: a NATS node
	// may be lost; 1 for a single-node server).
	Replicas int
	// Duplicates is the stream's de-duplication window: an event whose
	// id was appended within it is dropped (default 24h: senders
	// redeliver for hours).
	Duplicates time.Duration
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
	return o
}

// Bus is the bus on JetStream. It implements bus.Bus.
type Bus struct {
	o       Options
	nc      *nats.Conn
	js      jetstream.JetStream
	cursors jetstream.KeyValue
	timers  *timerIndex
	follow  jetstream.ConsumeContext

	mu      sync.Mutex
	changed chan struct{}
	// high is the highest sequence known to be in the stream (this
	// process's appends and every append the follower saw): a Read from
	// a replica behind it retries until it has caught up.
	high uint64
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
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: o.Stream, Subjects: []string{o.Subject}, Storage: jetstream.FileStorage, Replicas: o.Replicas,
		Duplicates: o.Duplicates, AllowDirect: true, AllowAtomicPublish: true,
	})
	if err != nil {
		return nil, fmt.Errorf("creating stream %s: %w", o.Stream, err)
	}
	b := &Bus{o: o, nc: nc, js: js, changed: make(chan struct{})}
	if err := b.answers(ctx); err != nil {
		return nil, err
	}
	if b.cursors, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: o.Stream + "_cursors", Storage: jetstream.FileStorage, Replicas: o.Replicas, History: 1,
	}); err != nil {
		return nil, fmt.Errorf("creating the cursors' bucket: %w", err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: o.Stream + "_timers", Storage: jetstream.FileStorage, Replicas: o.Replicas, History: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the timers' bucket: %w", err)
	}
	if b.timers, err = watchTimers(ctx, kv); err != nil {
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
	for {
		_, err := b.readBatch(ctx, 0, 1)
		if err == nil {
			return nil
		}
		if !errors.Is(err, nats.ErrNoResponders) {
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
// replica: an ordered consumer of the new messages' headers. A reconnect
// wakes them too (appends may have happened meanwhile).
func (b *Bus) followAppends(ctx context.Context, s jetstream.Stream) error {
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverNewPolicy, HeadersOnly: true,
	})
	if err != nil {
		return fmt.Errorf("following stream %s: %w", b.o.Stream, err)
	}
	cc, err := c.Consume(func(m jetstream.Msg) {
		if md, err := m.Metadata(); err == nil {
			b.appended(md.Sequence.Stream)
		}
	}, jetstream.ConsumeErrHandler(func(jetstream.ConsumeContext, error) { b.appended(0) }))
	if err != nil {
		return fmt.Errorf("following stream %s: %w", b.o.Stream, err)
	}
	b.follow = cc
	return nil
}

// appended records that the stream holds seq (0: unknown) and wakes the
// readers.
func (b *Bus) appended(seq uint64) {
	b.mu.Lock()
	b.high = max(b.high, seq)
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
	b.follow.Stop()
	b.timers.stop()
	return nil
}

// ErrClosed is returned once the connection is closed.
var ErrClosed = errors.New("natsjs: connection closed")
