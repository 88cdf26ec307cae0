package tracing

import (
	"context"
	"crypto/rand"
	"crypto/sha256"

	"go.opentelemetry.io/otel/trace"
)

// TraceID is the trace of rollout id: the first 16 bytes of a SHA-256 of it.
func TraceID(rolloutID string) trace.TraceID {
	h := sha256.Sum256([]byte("flotilla/trace\x00" + rolloutID))
	var t trace.TraceID
	copy(t[:], h[:16])
	return t
}

// SpanID is the span of rollout id named by parts (for the rollout's root
// span, "rollout"; else the kind of span and the id of the event that
// started it).
func SpanID(rolloutID string, parts ...string) trace.SpanID {
	s := "flotilla/span\x00" + rolloutID
	for _, p := range parts {
		s += "\x00" + p
	}
	h := sha256.Sum256([]byte(s))
	var id trace.SpanID
	copy(id[:], h[:8])
	return id
}

// RootSpanID is the span of the whole rollout, the parent of all others.
func RootSpanID(rolloutID string) trace.SpanID { return SpanID(rolloutID, "rollout") }

type idsKey struct{}

type ids struct {
	trace trace.TraceID
	span  trace.SpanID
}

// withIDs has the span started with ctx take these ids.
func withIDs(ctx context.Context, t trace.TraceID, s trace.SpanID) context.Context {
	return context.WithValue(ctx, idsKey{}, ids{t, s})
}

// idGenerator gives a span the ids its ctx asks for (withIDs), random ones
// otherwise.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if v, ok := ctx.Value(idsKey{}).(ids); ok {
		return v.trace, v.span
	}
	var t trace.TraceID
	_, _ = rand.Read(t[:])
	return t, randomSpanID()
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if v, ok := ctx.Value(idsKey{}).(ids); ok {
		return v.span
	}
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var s trace.SpanID
	_, _ = rand.Read(s[:])
	return s
}
