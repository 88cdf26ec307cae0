package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/logctx"
)

// Mirror posts every journaled event, in order, to an outbound CloudEvents
// sink (binary HTTP mode). It keeps its own cursor, so a sink that is down
// delays the mirror but never the rollouts, and loses nothing.
type Mirror struct {
	j      Journal
	client cloudevents.Client
	target string
	log    *slog.Logger
	// cursor names the mirror's position in the journal; transform, when
	// set, turns each event into those to post (none: nothing for it).
	cursor    string
	transform Transform
}

// Transform turns a journaled event into the events a mirror posts for it.
// An error marked fault.Permanent skips the event (logged); any other is
// retried, so a transient failure loses nothing.
type Transform func(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error)

const mirrorCursor = "sink"

// CursorDeleter forgets a consumer's cursor (pkg/bus).
type CursorDeleter interface {
	DeleteCursor(ctx context.Context, consumer string) error
}

// ForgetMirror drops the cursor of a mirror that is no longer configured,
// so that it does not hold the journal's retention back forever. A sink
// configured again later starts from the journal's start as it is then.
func ForgetMirror(ctx context.Context, j CursorDeleter) error {
	if err := j.DeleteCursor(ctx, mirrorCursor); err != nil {
		return fmt.Errorf("forgetting the sink's cursor: %w", err)
	}
	return nil
}

// NewMirror returns a mirror to url.
func NewMirror(j Journal, url string, log *slog.Logger) (*Mirror, error) {
	c, err := cloudevents.NewClientHTTP()
	if err != nil {
		return nil, fmt.Errorf("creating sink client: %w", err)
	}
	log = logctx.Wrap(log)
	return &Mirror{j: j, client: c, target: url, log: log, cursor: mirrorCursor}, nil
}

// WithTransform makes the mirror post what fn makes of each event, keeping
// its position under its own cursor name.
func (m *Mirror) WithTransform(cursor string, fn Transform) *Mirror {
	m.cursor, m.transform = cursor, fn
	return m
}

// CursorLister lists the consumers whose names start with a prefix
// (pkg/store).
type CursorLister interface {
	CursorDeleter
	CursorNames(ctx context.Context, prefix string) ([]string, error)
}

// ForgetMirrorsExcept drops the cursors named prefix+something that keep
// lists no longer: the mirrors of sinks taken out of the configuration.
func ForgetMirrorsExcept(ctx context.Context, j CursorLister, prefix string, keep []string) error {
	names, err := j.CursorNames(ctx, prefix)
	if err != nil {
		return fmt.Errorf("listing mirror cursors: %w", err)
	}
	for _, n := range names {
		if slices.Contains(keep, n) {
			continue
		}
		if err := j.DeleteCursor(ctx, n); err != nil {
			return fmt.Errorf("forgetting mirror cursor %q: %w", n, err)
		}
	}
	return nil
}

// Run mirrors until ctx ends.
func (m *Mirror) Run(ctx context.Context) error {
	cursor, err := m.readCursor(ctx)
	if err != nil {
		return err
	}
	// A failing journal (a full disk) or sink cursor must not end serve:
	// the follower waits and retries.
	f := bus.Follower{Stalled: func(err error, retryIn time.Duration) {
		m.log.Error("sink mirror stalled: the journal failed; retrying", "error", err, "retry_in", retryIn)
	}}
	return f.Run(ctx, m.j, cursor, func(ctx context.Context, recs []bus.Record) (uint64, error) {
		for _, r := range recs {
			if r.Err != nil {
				cursor = r.Seq // not an event: the runtime quarantines it
				continue
			}
			if !m.mirror(ctx, r.Event) {
				break // ctx ended; keep what the sink has acknowledged
			}
			cursor = r.Seq
		}
		if err := m.j.SetCursor(context.WithoutCancel(ctx), m.cursor, cursor); err != nil {
			// Mirrored at least once: a restart resends from the saved cursor.
			return cursor, fmt.Errorf("saving sink cursor: %w", err)
		}
		return cursor, nil
	})
}

// readCursor reads where the mirror stopped, retrying a journal that fails
// until ctx ends: a mirror that gave up here would send nothing more until
// a restart.
func (m *Mirror) readCursor(ctx context.Context) (uint64, error) {
	delay := 100 * time.Millisecond
	for {
		cursor, err := m.j.Cursor(ctx, m.cursor)
		if err == nil {
			return cursor, nil
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("reading sink cursor: %w", err)
		}
		m.log.Error("sink mirror stalled: reading its cursor failed; retrying", "sink", m.target, "error", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("reading sink cursor: %w", ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, 10*time.Second)
	}
}

// mirror sends what e becomes for the sink; false when ctx ended first.
func (m *Mirror) mirror(ctx context.Context, e cloudevents.Event) bool {
	ectx := logctx.With(ctx, logctx.RolloutID, events.RolloutID(e))
	out, err := m.outgoing(ectx, e)
	if err != nil {
		return false
	}
	for _, o := range out {
		if m.send(ectx, o) != nil {
			return false
		}
	}
	return true
}

// outgoing is what the mirror posts for e: e itself, or what the transform
// makes of it, retried until it succeeds, fails for good (skipped) or ctx
// ends (the error).
func (m *Mirror) outgoing(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	if m.transform == nil {
		return []cloudevents.Event{e}, nil
	}
	delay := 100 * time.Millisecond
	for {
		out, err := m.transform(ctx, e)
		switch {
		case err == nil:
			return out, nil
		case fault.IsPermanent(err):
			m.log.ErrorContext(ctx, "mirror skips an event it cannot translate", "event_id", e.ID(), "event_type", e.Type(), "sink", m.target, "error", err)
			return nil, nil
		}
		m.log.WarnContext(ctx, "mirror could not translate an event, retrying", "event_id", e.ID(), "sink", m.target, "error", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 10*time.Second)
	}
}

// send posts e until the sink acknowledges it or ctx ends.
func (m *Mirror) send(ctx context.Context, e cloudevents.Event) error {
	delay := 100 * time.Millisecond
	for {
		res := m.client.Send(cloudevents.ContextWithTarget(ctx, m.target), e)
		if cloudevents.IsACK(res) {
			return nil
		}
		m.log.WarnContext(ctx, "sink refused event, retrying", "event_id", e.ID(), "sink", m.target, "error", res)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 10*time.Second)
	}
}
