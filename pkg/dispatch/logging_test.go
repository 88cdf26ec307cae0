package dispatch_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/dispatch"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/logctx"
)

// recorder is a slog.Handler that keeps every line: its message and its
// attributes (the logger's and the record's) as key -> values.
type recorder struct {
	mu    *sync.Mutex
	lines *[]line
	attrs []slog.Attr
}

type line struct {
	msg   string
	attrs map[string][]string
}

func newRecorder() *recorder { return &recorder{mu: &sync.Mutex{}, lines: &[]line{}} }

func (*recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	l := line{msg: rec.Message, attrs: map[string][]string{}}
	for _, a := range r.attrs {
		l.attrs[a.Key] = append(l.attrs[a.Key], a.Value.String())
	}
	rec.Attrs(func(a slog.Attr) bool {
		l.attrs[a.Key] = append(l.attrs[a.Key], a.Value.String())
		return true
	})
	r.mu.Lock()
	*r.lines = append(*r.lines, l)
	r.mu.Unlock()
	return nil
}
func (r *recorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &recorder{mu: r.mu, lines: r.lines, attrs: append(append([]slog.Attr(nil), r.attrs...), as...)}
}
func (r *recorder) WithGroup(string) slog.Handler { return r }

func (r *recorder) all() []line {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]line(nil), *r.lines...)
}

// Every line logged while an event of a rollout is handled carries its
// rollout id once: the dispatcher's own (a retry, a function giving up),
// those a function logs through the ctx's logger, and those a component
// with a logger of its own logs with the call's ctx.
func TestEveryLineOfARolloutCarriesItsID(t *testing.T) {
	s := newStore(t)
	rec := newRecorder()
	own := logctx.Wrap(slog.New(rec).With("component", "deliver"))
	a := &fn{name: "a", consumes: []string{typeIn}, handle: func(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
		logctx.From(ctx).InfoContext(ctx, "a logs through the ctx's logger")
		own.InfoContext(ctx, "a component logs with the call's ctx", "cluster", "c1")
		return emit(typeMid)(ctx, e)
	}}
	calls := 0
	b := &fn{name: "b", consumes: []string{typeMid}, handle: func(ctx context.Context, _ cloudevents.Event) ([]cloudevents.Event, error) {
		calls++
		own.WarnContext(ctx, "b fails", logctx.RolloutID, "r1") // given explicitly: not twice
		if calls == 1 {
			return nil, errors.New("transient")
		}
		return nil, fault.Permanent(errors.New("for good"))
	}}
	d, err := dispatch.New(s, []dispatch.Function{a, b}, dispatch.Options{Logger: slog.New(rec), Backoff: 1})
	if err != nil {
		t.Fatal(err)
	}
	in := newEvent(t, "e1", typeIn)
	in.SetExtension(events.ExtRolloutID, "r1")
	appendEvents(t, s, in)
	start(t, d)
	waitJournal(t, s, "e1/"+typeMid+"/"+events.TypeFunctionFailed+"/b")

	var msgs []string
	for _, l := range rec.all() {
		msgs = append(msgs, l.msg)
		if diff := cmp.Diff([]string{"r1"}, l.attrs[logctx.RolloutID]); diff != "" {
			t.Errorf("line %q: rollout_id (-want +got):\n%s", l.msg, diff)
		}
		if len(l.attrs["function"]) != 1 || len(l.attrs["event_id"]) != 1 {
			t.Errorf("line %q: want one function and one event_id, got %v", l.msg, l.attrs)
		}
	}
	want := []string{
		"a logs through the ctx's logger", "a component logs with the call's ctx", "event handled",
		"b fails", "handler failed, retrying", "b fails", "function gave up on event",
	}
	if diff := cmp.Diff(want, msgs); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}
