package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/nats-io/nats.go"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/bus/natsjs"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/natskv"
)

// eventBus is what the server needs of its bus, in either mode: pkg/store
// (embedded) and pkg/bus/natsjs (scale-out) implement it.
type eventBus interface {
	bus.Bus
	// Has tells whether a pipeline run's answer is on the bus.
	Has(ctx context.Context, id string) (bool, error)
	// CursorNames lists the mirrors' cursors.
	CursorNames(ctx context.Context, prefix string) ([]string, error)
	// FirstSeq and LastSeq bound the watch stream.
	FirstSeq() uint64
	LastSeq() uint64
	// Err says why the bus takes no appends now.
	Err() error
}

// engine runs the functions: one dispatcher (embedded), or the
// dispatchers of the partitions this replica holds (scale-out).
type engine interface {
	Run(ctx context.Context) error
	Err() error
	// Drain starts no more events and waits for the calls under way
	// (dispatch.Dispatcher.Drain), before Run's context is canceled.
	Drain(ctx context.Context) error
}

// drainTimeout bounds a graceful stop's wait for the calls under way:
// with the HTTP server's shutdown (at the same time) and the hand-over of
// the partitions after it, within Kubernetes' default grace period (30 s).
const drainTimeout = 10 * time.Second

// runDrained runs e until ctx ends, then drains it for up to drainTimeout
// before it stops: a call under way (a pipeline run applying a cluster, a
// function's update) ends and is not replayed by the next holder.
func runDrained(ctx context.Context, e engine, log *slog.Logger) error {
	run, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	cancel := context.AfterFunc(ctx, func() {
		dctx, cancel := context.WithTimeout(run, drainTimeout)
		defer cancel()
		start := time.Now()
		if err := e.Drain(dctx); err != nil {
			log.Warn("stopping with calls under way: their events are handled again at the next start", "error", err, "waited", time.Since(start))
		} else {
			log.Info("drained: every call under way ended", "took", time.Since(start))
		}
		stop()
	})
	defer cancel()
	return e.Run(run)
}

// Drain drains the dispatchers of the partitions held, which stay held
// (their leases renewed) meanwhile.
func (e *sharedEngine) Drain(ctx context.Context) error {
	e.mu.Lock()
	shards := e.shards
	e.mu.Unlock()
	if shards == nil {
		return nil
	}
	return shards.Drain(ctx)
}

// scaleOut is what scale-out mode runs on: the NATS connection, the bus
// and the state on JetStream.
type scaleOut struct {
	cfg  *config.Bus
	nc   *nats.Conn
	bus  *natsjs.Bus
	repo *natskv.Repo
	docs *natskv.Docs
}

// openScaleOut connects to NATS and opens the bus and the state, on the
// engine's clock (Options.Clock) as the embedded state is: the bus's
// timers and retention, the rollouts' dates.
func openScaleOut(ctx context.Context, s config.Server, clock Clock, log *slog.Logger) (*scaleOut, error) {
	c := s.Bus
	opts := []nats.Option{
		nats.Name("flotilla " + c.Replica), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: the connection was closed on purpose
				log.Warn("disconnected from NATS", "error", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("reconnected to NATS", "server", nc.ConnectedUrlRedacted()) }),
	}
	if c.CredentialsFile != "" {
		opts = append(opts, nats.UserCredentials(c.CredentialsFile))
	}
	if t := c.TLS; t != nil {
		if t.CAFile != "" {
			opts = append(opts, nats.RootCAs(t.CAFile))
		}
		if t.CertFile != "" {
			opts = append(opts, nats.ClientCert(t.CertFile, t.KeyFile))
		}
	}
	nc, err := nats.Connect(c.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", c.URL, err)
	}
	so := &scaleOut{cfg: c, nc: nc}
	if so.bus, err = natsjs.Open(ctx, nc, natsjs.Options{
		Stream: c.Stream, Subject: "flotilla." + c.Stream, Replicas: c.Replicas, Partitions: c.Partitions,
		PartitionKey: partitionKey, Duplicates: s.DedupeWindow.Duration, // retention: RunRetention, by the cursors
		Remember: func(e cloudevents.Event) bool { return e.Type() == events.TypePipelineRunFinished },
		Now:      clock.Now,
	}); err != nil {
		nc.Close()
		return nil, err
	}
	kvo := natskv.Options{Prefix: c.Stream, Replicas: c.Replicas}
	if so.repo, err = natskv.Open(ctx, nc, so.bus, kvo, clock.Now); err != nil {
		so.close()
		return nil, err
	}
	if so.docs, err = natskv.OpenDocs(ctx, nc, kvo); err != nil {
		so.close()
		return nil, err
	}
	return so, nil
}

// partitionKey routes an event to its partition: the dispatcher's key
// (its rollout, else its image or git repository), except a pipeline run's
// request and a prune's, which go with the workload they write
// (application and cluster): the runs of a rollout and of the newer one
// superseding it, and a prune and a revert, then meet on one replica,
// whose runner lets one at a time write the workload.
func partitionKey(e cloudevents.Event) string {
	switch e.Type() {
	case events.TypePipelineRunRequested:
		if req, err := events.Decode[events.PipelineRunRequested](e); err == nil && req.Application != "" {
			return "workload/" + req.Application + "/" + req.Cluster
		}
	case events.TypePruneRequested:
		if req, err := events.Decode[events.PruneRequested](e); err == nil && req.Application != "" {
			return "workload/" + req.Application + "/" + req.Cluster
		}
	}
	return dispatch.Key(e)
}

// retireEvery is how often the stream's retention runs: an eighth of the
// retention period, from a second to ten minutes.
func retireEvery(retention time.Duration) time.Duration {
	return min(max(retention/8, time.Second), 10*time.Minute)
}

func (so *scaleOut) close() {
	if so.bus != nil {
		_ = so.bus.Close()
	}
	so.nc.Close()
}

// owns tells whether this replica holds the partition of a rollout's
// events.
func (e *sharedEngine) owns(rolloutID string) bool {
	return e.held(e.so.bus.PartitionOf(dispatch.RolloutKey(rolloutID)))
}

// sharedEngine is scale-out mode's engine: this replica takes its share
// of the partitions and runs their dispatchers; while it holds partition
// 0 it also runs the followers that must run once in the whole fleet of
// replicas (the sinks' mirrors, the tracer) and reports the delivery
// metrics (fleetmetrics.WithActive).
type sharedEngine struct {
	so     *scaleOut
	fns    []dispatch.Function
	opts   dispatch.Options
	once   []func(context.Context) error
	log    *slog.Logger
	shards *dispatch.Shards

	mu       sync.Mutex
	owned    map[int]bool
	stopOnce context.CancelFunc
	onceDone chan struct{}
}

func (e *sharedEngine) held(p int) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.owned[p]
}

// heldCount is how many partitions this replica holds.
func (e *sharedEngine) heldCount() float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return float64(len(e.owned))
}

// Run joins the partitions until ctx ends, then hands them over.
func (e *sharedEngine) Run(ctx context.Context) error {
	e.mu.Lock()
	e.shards = dispatch.NewShards(ctx, func(p int) (dispatch.Journal, error) { return e.so.bus.Partition(p) }, e.fns, e.opts)
	e.mu.Unlock()
	parts, err := e.so.bus.JoinPartitions(ctx, natsjs.PartitionOptions{Replica: e.so.cfg.Replica, Count: e.so.cfg.Partitions}, e.set, e.log)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while joining
		}
		return err
	}
	relay := time.NewTicker(15 * time.Second)
	defer relay.Stop()
	for {
		select {
		case <-relay.C:
			// An outbox a crashed replica left is appended (the bus drops
			// what it has).
			if err := e.so.repo.Relay(ctx); err != nil {
				e.log.Warn("relaying outboxes", "error", err)
			}
			continue
		case <-ctx.Done():
		}
		break
	}
	leave, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return parts.Leave(leave)
}

// set starts and stops this replica's work as its partitions change.
func (e *sharedEngine) set(owned []int) {
	e.mu.Lock()
	shards := e.shards
	e.mu.Unlock()
	shards.Set(owned)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.owned = map[int]bool{}
	for _, p := range owned {
		e.owned[p] = true
	}
	switch {
	case e.owned[0] && e.stopOnce == nil:
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		e.stopOnce, e.onceDone = cancel, done
		var wg sync.WaitGroup
		for _, run := range e.once {
			wg.Go(func() {
				if err := run(ctx); err != nil && !errors.Is(err, context.Canceled) {
					e.log.Warn("a follower stopped", "error", err)
				}
			})
		}
		go func() { wg.Wait(); close(done) }()
	case !e.owned[0] && e.stopOnce != nil:
		e.stopOnce()
		<-e.onceDone
		e.stopOnce, e.onceDone = nil, nil
	}
}

// Err reports a stalled partition or a bus that cannot take appends.
func (e *sharedEngine) Err() error {
	e.mu.Lock()
	shards := e.shards
	e.mu.Unlock()
	if shards == nil {
		return e.so.bus.Err()
	}
	return errors.Join(e.so.bus.Err(), shards.Err())
}

// ownedRollouts are the rollouts in flight whose partitions this replica
// holds: what its resync reads.
type ownedRollouts struct {
	repo interface {
		ListInFlight(ctx context.Context) ([]rollout.Rollout, error)
	}
	owns func(id string) bool
}

func (o ownedRollouts) ListInFlight(ctx context.Context) ([]rollout.Rollout, error) {
	all, err := o.repo.ListInFlight(ctx)
	if err != nil {
		return nil, err
	}
	var out []rollout.Rollout
	for _, ro := range all {
		if o.owns(ro.ID) {
			out = append(out, ro)
		}
	}
	return out, nil
}
