package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Journal is the journal the hub and Timeline read (pkg/store).
type Journal interface {
	Read(ctx context.Context, after uint64, limit int) ([]bus.Record, error)
	// Changed returns a channel closed at the next append.
	Changed() <-chan struct{}
	// FirstSeq and LastSeq bound the records kept.
	FirstSeq() uint64
	LastSeq() uint64
}

// Rollouts reads a rollout's state (pkg/state).
type Rollouts interface {
	Get(ctx context.Context, id string) (rollout.Rollout, error)
}

// Kinds of Message.
const (
	// KindEvent: Data is an Entry, an event journaled.
	KindEvent = "event"
	// KindRollout: Data is the rollout (rollout.Rollout) an event changed.
	KindRollout = "rollout"
)

// Message is what a watcher receives.
type Message struct {
	Kind string
	// Seq is the journal position the message reflects.
	Seq uint64
	// Rollout is the id of the rollout it is about, "" for events of no
	// rollout (a push, the fleet stopped).
	Rollout string
	// Data is JSON, encoded once for every watcher.
	Data []byte
}

// Entry is an event as watchers and timelines show it.
type Entry struct {
	Seq     uint64          `json:"seq"`
	ID      string          `json:"id"`
	Time    time.Time       `json:"time"`
	Type    string          `json:"type"`
	Rollout string          `json:"rollout,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// EntryOf is the entry of a journal record.
func EntryOf(rec bus.Record) Entry {
	e := Entry{Seq: rec.Seq, ID: rec.Event.ID(), Time: rec.Event.Time(), Type: rec.Event.Type(), Rollout: events.RolloutID(rec.Event)}
	if d := rec.Event.Data(); len(d) > 0 && json.Valid(d) {
		e.Data = d
	}
	return e
}

// DefaultBuffer is how many messages a watcher may fall behind before the
// hub drops it.
const DefaultBuffer = 512

// batch is how many records the hub reads at once.
const batch = 512

// DefaultInterval is how long the hub lets appends gather before it reads
// them: a rollout's events come in bursts (a push, its plan, a wave's
// applies), and watchers get each burst in one batch a moment later
// instead of one wake-up per event while the functions that react to it
// still run. A page redrawing 100 ms after the fact looks live; the
// reaction path (DESIGN's A and B, tens of ms) is done before the hub
// wakes.
const DefaultInterval = 100 * time.Millisecond

// Hub fans the journal out to watchers.
type Hub struct {
	j        Journal
	ros      Rollouts
	log      *slog.Logger
	buffer   int
	interval time.Duration

	mu         sync.Mutex
	subs       map[*Sub]struct{}
	subscribed chan struct{} // closed at the next Subscribe
	stopped    bool
	start      uint64 // the journal's last sequence when the hub was made: Run reads after it

	watchers prometheus.Gauge
	dropped  prometheus.Counter
	sent     prometheus.Counter
}

// New returns a hub reading j and, for each rollout an event names, its
// state from ros; its metrics go to reg (nil: none).
func New(j Journal, ros Rollouts, log *slog.Logger, reg prometheus.Registerer) (*Hub, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Hub{j: j, ros: ros, log: log, buffer: DefaultBuffer, interval: DefaultInterval, subs: map[*Sub]struct{}{}, subscribed: make(chan struct{}), start: j.LastSeq(),
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flotilla_watchers",
			Help: "Live watchers of the journal (the API's Server-Sent Events: web UI pages, --watch).",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flotilla_watchers_dropped_total",
			Help: "Watchers the hub dropped because they fell behind (they reconnect and read the state again).",
		}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flotilla_watch_messages_total",
			Help: "Messages (events and rollout states) sent to watchers.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{h.watchers, h.dropped, h.sent} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("registering watch metrics: %w", err)
			}
		}
	}
	return h, nil
}

// WithBuffer sets how many messages a watcher may fall behind (tests).
func (h *Hub) WithBuffer(n int) *Hub {
	h.buffer = max(n, 1)
	return h
}

// WithInterval sets how long appends gather before the hub reads them
// (DefaultInterval; 0: at once).
func (h *Hub) WithInterval(d time.Duration) *Hub {
	h.interval = max(d, 0)
	return h
}

// Sub is one watcher.
type Sub struct {
	// C receives the messages; it is closed when the hub drops the watcher
	// (it fell behind) or stops.
	C       <-chan Message
	c       chan Message
	rollout string
	events  bool
	h       *Hub
}

// Subscribe starts a watcher of rollout id ("" for every rollout and the
// events of none) from the journal's next record; without events it gets
// only the rollouts' states (KindRollout). Close it when done.
func (h *Hub) Subscribe(id string, events bool) *Sub {
	c := make(chan Message, h.buffer)
	s := &Sub{C: c, c: c, rollout: id, events: events, h: h}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		close(c)
		return s
	}
	h.subs[s] = struct{}{}
	h.watchers.Inc()
	close(h.subscribed)
	h.subscribed = make(chan struct{})
	return s
}

// Close ends the watcher.
func (s *Sub) Close() {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	s.h.drop(s)
}

// drop removes s and closes its channel, once. Called with mu held.
func (h *Hub) drop(s *Sub) {
	if _, ok := h.subs[s]; !ok {
		return
	}
	delete(h.subs, s)
	h.watchers.Dec()
	close(s.c)
}

// watched returns whether anyone watches, and a channel closed at the next
// Subscribe.
func (h *Hub) watched() (bool, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs) > 0, h.subscribed
}

// Run reads the journal and sends what it appends to the watchers until ctx
// ends; then it closes every watcher.
func (h *Hub) Run(ctx context.Context) error {
	defer h.stop()
	f := bus.Follower{
		Batch: batch,
		// Nobody watches: skip what is appended, read nothing, until a
		// first watcher comes.
		Ready: func(ctx context.Context, after uint64) (uint64, int, bool) {
			for {
				changed := h.j.Changed()
				// The position is taken before asking who watches: what is
				// appended after a Subscribe that this check misses is read
				// next time round.
				last := h.j.LastSeq()
				watched, subscribed := h.watched()
				if watched {
					return after, 0, true
				}
				after = last
				select {
				case <-ctx.Done():
					return after, 0, false
				case <-changed:
				case <-subscribed:
				}
			}
		},
		// Appends close together go out together (gather); a first
		// watcher after a quiet spell is served at once.
		Idle: func(ctx context.Context, changed <-chan struct{}) bool {
			_, subscribed := h.watched()
			select {
			case <-ctx.Done():
				return false
			case <-changed:
				return h.gather(ctx)
			case <-subscribed:
				return true
			}
		},
		Stalled: func(err error, retryIn time.Duration) {
			h.log.Warn("watch: reading the journal; retrying", "error", err, "retry_in", retryIn)
		},
	}
	// From the hub's making, not Run's start: a watcher subscribed in
	// between gets what was appended after it subscribed.
	return f.Run(ctx, h.j, h.start, func(ctx context.Context, recs []bus.Record) (uint64, error) {
		h.publish(ctx, recs)
		return recs[len(recs)-1].Seq, nil
	})
}

// gather waits the interval for more appends to join the first; false
// when ctx ends.
func (h *Hub) gather(ctx context.Context) bool {
	if h.interval <= 0 {
		return true
	}
	t := time.NewTimer(h.interval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (h *Hub) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	for s := range h.subs {
		h.drop(s)
	}
}

// publish sends each record's entry, then the state of each rollout the
// records named, once.
func (h *Hub) publish(ctx context.Context, recs []bus.Record) {
	var touched []string
	seen := map[string]uint64{}
	for _, rec := range recs {
		if rec.Err != nil {
			continue
		}
		e := EntryOf(rec)
		data, err := json.Marshal(e)
		if err != nil {
			continue
		}
		h.send(Message{Kind: KindEvent, Seq: rec.Seq, Rollout: e.Rollout, Data: data})
		if e.Rollout != "" {
			if _, ok := seen[e.Rollout]; !ok {
				touched = append(touched, e.Rollout)
			}
			seen[e.Rollout] = rec.Seq
		}
	}
	for _, id := range touched {
		if !h.wanted(id) {
			continue
		}
		ro, err := h.ros.Get(ctx, id)
		if err != nil {
			h.log.Debug("watch: reading a rollout", "rollout_id", id, "error", err)
			continue
		}
		data, err := json.Marshal(ro)
		if err != nil {
			continue
		}
		h.send(Message{Kind: KindRollout, Seq: seen[id], Rollout: id, Data: data})
	}
}

// wanted says whether a watcher wants messages about rollout id.
func (h *Hub) wanted(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.rollout == "" || s.rollout == id {
			return true
		}
	}
	return false
}

// send gives m to every watcher that wants it; one whose buffer is full is
// dropped.
func (h *Hub) send(m Message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.rollout != "" && s.rollout != m.Rollout || m.Kind == KindEvent && !s.events {
			continue
		}
		select {
		case s.c <- m:
			h.sent.Inc()
		default:
			h.drop(s)
			h.dropped.Inc()
		}
	}
}

// Watchers is the gauge of live watchers (tests).
func (h *Hub) Watchers() prometheus.Gauge { return h.watchers }

// Timeline reads rollout ro's events back from the hub's journal.
func (h *Hub) Timeline(ctx context.Context, ro rollout.Rollout) (TimelineOf, error) {
	return Timeline(ctx, h.j, ro)
}
