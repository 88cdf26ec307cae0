package logctx

import (
	"context"
	"log/slog"
	"slices"
)

// RolloutID is the key of the rollout id on every log line about a rollout.
const RolloutID = "rollout_id"

type attrsKey struct{}

type loggerKey struct{}

// With returns ctx carrying args (slog's key-value pairs or slog.Attrs) on
// top of those it carries already; a key given again replaces the earlier
// value. Attributes with an empty string value are left out, so that
// With(ctx, RolloutID, id) is a no-op for events of no rollout.
func With(ctx context.Context, args ...any) context.Context {
	add := slog.New(discard{}).With(args...).Handler().(discard).attrs
	if len(add) == 0 {
		return ctx
	}
	prev := Attrs(ctx)
	out := make([]slog.Attr, 0, len(prev)+len(add))
	for _, a := range prev {
		if !slices.ContainsFunc(add, func(b slog.Attr) bool { return b.Key == a.Key }) {
			out = append(out, a)
		}
	}
	for _, a := range add {
		if a.Value.Kind() == slog.KindString && a.Value.String() == "" {
			continue
		}
		out = append(out, a)
	}
	return context.WithValue(ctx, attrsKey{}, out)
}

// Attrs returns the attributes ctx carries.
func Attrs(ctx context.Context) []slog.Attr {
	as, _ := ctx.Value(attrsKey{}).([]slog.Attr)
	return as
}

// WithLogger returns ctx carrying l, for From.
func WithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

// From returns the logger ctx carries (WithLogger), else one that discards.
// Log with the ...Context methods and ctx, so that the lines carry ctx's
// attributes.
func From(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok && l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}

// Wrap returns l logging through Handler (l itself when it does already; a
// discarding logger for nil).
func Wrap(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	if _, ok := l.Handler().(*handler); ok {
		return l
	}
	return slog.New(Handler(l.Handler()))
}

// Handler returns a handler that adds to each record the attributes its
// context carries (With), except those whose key the record or the logger
// (slog.Logger.With) has already, then hands it to h.
func Handler(h slog.Handler) slog.Handler {
	if w, ok := h.(*handler); ok {
		return w
	}
	return &handler{next: h}
}

type handler struct {
	next slog.Handler
	// keys the logger's own attributes have (top level, outside groups).
	keys []string
	// grouped: the logger opened a group (slog.Logger.WithGroup), which
	// the record's attributes, and so ctx's, land in: they are added all
	// the same (flotilla's loggers open none).
	grouped bool
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	as := Attrs(ctx)
	if len(as) == 0 {
		return h.next.Handle(ctx, r)
	}
	var have []string
	if !h.grouped {
		r.Attrs(func(a slog.Attr) bool {
			have = append(have, a.Key)
			return true
		})
	}
	var add []slog.Attr
	for _, a := range as {
		if !slices.Contains(h.keys, a.Key) && !slices.Contains(have, a.Key) {
			add = append(add, a)
		}
	}
	if len(add) == 0 {
		return h.next.Handle(ctx, r)
	}
	r = r.Clone()
	r.AddAttrs(add...)
	return h.next.Handle(ctx, r)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	n := &handler{next: h.next.WithAttrs(as), keys: h.keys, grouped: h.grouped}
	if !h.grouped {
		n.keys = slices.Clone(h.keys)
		for _, a := range as {
			n.keys = append(n.keys, a.Key)
		}
	}
	return n
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &handler{next: h.next.WithGroup(name), keys: h.keys, grouped: true}
}

// discard collects the attributes slog.Logger.With makes of its arguments
// (so that With accepts exactly what slog does).
type discard struct{ attrs []slog.Attr }

func (discard) Enabled(context.Context, slog.Level) bool  { return false }
func (discard) Handle(context.Context, slog.Record) error { return nil }
func (d discard) WithAttrs(as []slog.Attr) slog.Handler {
	return discard{attrs: append(slices.Clone(d.attrs), as...)}
}
func (d discard) WithGroup(string) slog.Handler { return d }
