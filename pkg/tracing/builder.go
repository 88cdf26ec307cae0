package tracing

import (
	"context"
	"fmt"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/flotilla-cd/flotilla/events"
)

// Bounds of a Builder's memory.
const (
	// MaxRollouts bounds the rollouts followed at once; past it, the one
	// quiet for longest is forgotten (its open spans are never emitted).
	MaxRollouts = 10_000
	// MaxPushes bounds the pushes remembered until a rollout of theirs
	// starts (each is remembered under its push's and its verdict's id).
	MaxPushes = 4096
)

// Attribute keys of flotilla's spans.
const (
	AttrRolloutID   = attribute.Key("flotilla.rollout.id")
	AttrApplication = attribute.Key("flotilla.application")
	AttrImage       = attribute.Key("flotilla.image")
	AttrTag         = attribute.Key("flotilla.tag")
	AttrDigest      = attribute.Key("flotilla.digest")
	AttrOutcome     = attribute.Key("flotilla.rollout.outcome")
	AttrPartial     = attribute.Key("flotilla.trace.partial")
	AttrWave        = attribute.Key("flotilla.wave")
	AttrClusters    = attribute.Key("flotilla.clusters")
	AttrCluster     = attribute.Key("flotilla.cluster")
	AttrPurpose     = attribute.Key("flotilla.purpose")
	AttrStep        = attribute.Key("flotilla.step")
	AttrEventID     = attribute.Key("flotilla.event.id")
	AttrEndedBy     = attribute.Key("flotilla.ended_by")
	AttrSender      = attribute.Key("flotilla.sender")
)

// Builder turns journaled events, in journal order, into the spans of
// their rollouts' traces (see the package doc). It is not safe for
// concurrent use: one follower feeds it.
type Builder struct {
	tracer   trace.Tracer
	rollouts map[string]*tracked
	// pushes by the id of the push and of its verdict; ended: rollouts
	// whose root span was emitted (a retry after a failed rollback adds
	// spans under it, never a second root).
	pushes recent[*push]
	ended  recent[struct{}]
	max    int
}

// NewBuilder returns a builder that starts its spans with tp's tracer;
// tp must give spans the ids their ctx asks for (see NewTracerProvider).
func NewBuilder(tp trace.TracerProvider) *Builder {
	return &Builder{
		tracer:   tp.Tracer("github.com/flotilla-cd/flotilla/pkg/tracing"),
		rollouts: map[string]*tracked{},
		pushes:   newRecent[*push](2 * MaxPushes),
		ended:    newRecent[struct{}](MaxRollouts),
		max:      MaxRollouts,
	}
}

// span is a span still open: what it is and when it started.
type span struct {
	id, parent trace.SpanID
	name       string
	start      time.Time
	attrs      []attribute.KeyValue
	events     []spanEvent
}

type spanEvent struct {
	name  string
	at    time.Time
	attrs []attribute.KeyValue
}

// push is a push seen, and its verdict's time once verified.
type push struct {
	span
	end time.Time
}

// tracked is a rollout followed: its root and its open spans.
type tracked struct {
	id     string
	root   span
	reason string // why it failed
	// partial: its start was not seen; noRoot: its root span was emitted
	// already.
	partial, noRoot bool
	last            time.Time // the time of its last event
	waves           map[int]*span
	clusters        map[string]*span // the open cluster span, by cluster
	runs            map[string]*span // by cluster/purpose/step
	reverts         map[string]*span // by cluster
	rollback        *span
}

// starters are the events that begin something: only they make the
// builder follow a rollout it does not know (an event that ends something
// unknown has nothing to end).
var starters = map[string]bool{
	events.TypeRolloutStarted: true, events.TypeRolloutQueued: true, events.TypeRolloutFailed: true,
	events.TypeWaveStarted: true, events.TypePipelineRunRequested: true,
}

// Add takes the next journaled event and emits the spans it ends.
func (b *Builder) Add(ctx context.Context, e cloudevents.Event) {
	switch e.Type() {
	case events.TypeImagePushed:
		if p, err := events.Decode[events.ImagePushed](e); err == nil {
			b.pushes.put(e.ID(), &push{span: span{name: "push " + p.Image() + ":" + p.Tag, start: e.Time(), attrs: []attribute.KeyValue{
				AttrImage.String(p.Image()), AttrTag.String(p.Tag), AttrSender.String(p.Sender), AttrEventID.String(e.ID())}}})
		}
		return
	case events.TypeGitPushed:
		if p, err := events.Decode[events.GitPushed](e); err == nil {
			b.pushes.put(e.ID(), &push{span: span{name: "push " + p.RepoURL + " " + p.Ref, start: e.Time(), attrs: []attribute.KeyValue{
				AttrImage.String(p.RepoURL), AttrTag.String(p.Ref), AttrSender.String(p.Sender), AttrEventID.String(e.ID())}}})
		}
		return
	case events.TypeImageVerified, events.TypeGitVerified:
		if p, ok := b.pushes.get(parentID(e)); ok {
			p.end = e.Time()
			if v, err := events.Decode[events.ImageVerified](e); err == nil && v.Digest != "" {
				p.attrs = append(p.attrs, AttrDigest.String(v.Digest))
			}
			b.pushes.put(e.ID(), p)
		}
		return
	}
	rid := events.RolloutID(e)
	if rid == "" {
		return
	}
	ro := b.rollouts[rid]
	if ro == nil {
		if !starters[e.Type()] {
			return
		}
		ro = b.follow(ctx, rid, e)
	}
	ro.last = e.Time()
	b.handle(ctx, ro, e)
}

// follow starts following rollout rid, first seen with e.
func (b *Builder) follow(ctx context.Context, rid string, e cloudevents.Event) *tracked {
	if len(b.rollouts) >= b.max {
		b.forgetQuietest()
	}
	ro := &tracked{
		id:       rid,
		root:     span{id: RootSpanID(rid), name: "rollout " + rid, start: e.Time(), attrs: []attribute.KeyValue{AttrRolloutID.String(rid)}},
		waves:    map[int]*span{},
		clusters: map[string]*span{},
		runs:     map[string]*span{},
		reverts:  map[string]*span{},
	}
	_, ro.noRoot = b.ended.get(rid)
	switch e.Type() {
	case events.TypeRolloutStarted, events.TypeRolloutQueued:
		if p, ok := b.pushes.get(parentID(e)); ok && !p.end.IsZero() {
			ro.root.start = p.start
			s := p.span
			s.id, s.parent = SpanID(rid, "push"), ro.root.id
			b.emit(ctx, rid, &s, p.end, codes.Unset, "")
		}
	case events.TypeRolloutFailed: // a rollback a user asked for starts failed
	default:
		ro.partial = !ro.noRoot
	}
	b.rollouts[rid] = ro
	return ro
}

func (b *Builder) forgetQuietest() {
	var quietest *tracked
	for _, ro := range b.rollouts {
		if quietest == nil || ro.last.Before(quietest.last) {
			quietest = ro
		}
	}
	if quietest != nil {
		delete(b.rollouts, quietest.id)
	}
}

// handle records what e starts, and emits what it ends, of rollout ro.
func (b *Builder) handle(ctx context.Context, ro *tracked, e cloudevents.Event) {
	at := e.Time()
	switch e.Type() {
	case events.TypeRolloutQueued:
		ro.root.events = append(ro.root.events, spanEvent{name: "queued", at: at})
	case events.TypeRolloutStarted:
		p, err := events.Decode[events.RolloutStarted](e)
		if err != nil {
			return
		}
		ro.root.name = fmt.Sprintf("rollout %s %s", p.Application, p.Tag)
		ro.root.attrs = append(ro.root.attrs, AttrApplication.String(p.Application), AttrImage.String(p.Image),
			AttrTag.String(p.Tag), AttrDigest.String(p.Digest))
		if len(ro.root.events) > 0 {
			ro.root.events = append(ro.root.events, spanEvent{name: "started", at: at})
		}
	case events.TypeWaveStarted:
		w, err := events.Decode[events.WaveStarted](e)
		if err != nil || ro.waves[w.Wave] != nil {
			return
		}
		ro.waves[w.Wave] = &span{id: SpanID(ro.id, "wave", e.ID()), parent: ro.root.id, name: fmt.Sprintf("wave %d", w.Wave+1), start: at,
			attrs: []attribute.KeyValue{AttrWave.Int(w.Wave + 1), AttrClusters.StringSlice(w.Clusters)}}
	case events.TypeWaveSucceeded:
		w, err := events.Decode[events.WaveResult](e)
		if err != nil {
			return
		}
		if s := ro.waves[w.Wave]; s != nil {
			b.emit(ctx, ro.id, s, at, codes.Unset, "")
			delete(ro.waves, w.Wave)
		}
	case events.TypePipelineRunRequested:
		b.requested(ro, e)
	case events.TypePipelineRunStarted:
		st, err := events.Decode[events.PipelineRunStart](e)
		if err != nil {
			return
		}
		if s := ro.runs[runKey(st.Cluster, st.Purpose, st.Step)]; s != nil {
			s.events = append(s.events, spanEvent{name: "started", at: at}) // it left the queue
		}
	case events.TypePipelineRunFinished:
		f, err := events.Decode[events.PipelineRunFinished](e)
		if err != nil {
			return
		}
		key := runKey(f.Cluster, f.Purpose, f.Step)
		if s := ro.runs[key]; s != nil {
			code := codes.Unset
			if f.Error != "" {
				code = codes.Error
			}
			s.attrs = append(s.attrs, attribute.Bool("flotilla.changed", f.Changed))
			b.emit(ctx, ro.id, s, at, code, f.Error)
			delete(ro.runs, key)
		}
	case events.TypeClusterApplied:
		c, err := events.Decode[events.ClusterResult](e)
		if err != nil {
			return
		}
		s := ro.clusters[c.Cluster]
		if s == nil && ro.rollback == nil { // applied by a pull request: no run
			s = b.clusterSpan(ro, c.Wave, c.Cluster, e)
		}
		if s != nil {
			s.events = append(s.events, spanEvent{name: "applied", at: at})
		}
	case events.TypeClusterSucceeded, events.TypeClusterFailed:
		c, err := events.Decode[events.ClusterResult](e)
		if err != nil {
			return
		}
		if s := ro.clusters[c.Cluster]; s != nil {
			code := codes.Unset
			if e.Type() == events.TypeClusterFailed {
				code = codes.Error
			}
			b.emit(ctx, ro.id, s, at, code, c.Reason)
			delete(ro.clusters, c.Cluster)
		}
	case events.TypeClusterReverted:
		c, err := events.Decode[events.ClusterResult](e)
		if err != nil {
			return
		}
		if s := ro.reverts[c.Cluster]; s != nil {
			b.emit(ctx, ro.id, s, at, codes.Unset, "")
			delete(ro.reverts, c.Cluster)
		}
	case events.TypeRolloutFailed:
		r, _ := events.Decode[events.RolloutResult](e)
		ro.reason = r.Reason
		ro.root.events = append(ro.root.events, spanEvent{name: "failed", at: at, attrs: []attribute.KeyValue{attribute.String("reason", r.Reason)}})
		for w, s := range ro.waves {
			b.emit(ctx, ro.id, s, at, codes.Error, r.Reason)
			delete(ro.waves, w)
		}
		if ro.rollback == nil {
			ro.rollback = &span{id: SpanID(ro.id, "rollback", e.ID()), parent: ro.root.id, name: "rollback", start: at}
		}
	case events.TypeRolloutSucceeded:
		b.finish(ctx, ro, at, "succeeded", codes.Unset, "")
	case events.TypeRolloutSuperseded:
		r, _ := events.Decode[events.RolloutResult](e)
		b.finish(ctx, ro, at, "superseded", codes.Unset, r.Reason)
	case events.TypeRolloutRolledBack:
		b.finish(ctx, ro, at, "rolledback", codes.Error, "rolled back: "+ro.reason)
	case events.TypeRolloutRollbackFailed:
		r, _ := events.Decode[events.RolloutResult](e)
		b.finish(ctx, ro, at, "rollbackfailed", codes.Error, "rollback failed: "+r.Reason)
	}
}

// requested opens the span of a pipeline run, and the cluster's (or its
// revert's) span when it is the first.
func (b *Builder) requested(ro *tracked, e cloudevents.Event) {
	r, err := events.Decode[events.PipelineRunRequested](e)
	if err != nil {
		return
	}
	key := runKey(r.Cluster, r.Purpose, r.Step)
	if ro.runs[key] != nil {
		return
	}
	var parent *span
	if r.Purpose == events.PurposeRevert {
		if parent = ro.reverts[r.Cluster]; parent == nil {
			up := ro.root.id
			if ro.rollback != nil {
				up = ro.rollback.id
			}
			parent = &span{id: SpanID(ro.id, "revert", e.ID()), parent: up, name: "revert " + r.Cluster, start: e.Time(),
				attrs: []attribute.KeyValue{AttrCluster.String(r.Cluster), AttrWave.Int(r.Wave + 1)}}
			ro.reverts[r.Cluster] = parent
		}
	} else if parent = ro.clusters[r.Cluster]; parent == nil {
		parent = b.clusterSpan(ro, r.Wave, r.Cluster, e)
	}
	ro.runs[key] = &span{id: SpanID(ro.id, "run", e.ID()), parent: parent.id, name: "pipeline " + r.Purpose + " " + r.Cluster, start: e.Time(),
		attrs: []attribute.KeyValue{AttrCluster.String(r.Cluster), AttrPurpose.String(r.Purpose), AttrStep.Int(r.Step), AttrImage.String(r.Image)}}
}

// clusterSpan opens the span of cluster's delivery in wave, under the
// wave's span while it is open (a cluster retried after its wave passed
// is under the root).
func (b *Builder) clusterSpan(ro *tracked, wave int, cluster string, e cloudevents.Event) *span {
	up := ro.root.id
	if w := ro.waves[wave]; w != nil {
		up = w.id
	}
	s := &span{id: SpanID(ro.id, "cluster", e.ID()), parent: up, name: "cluster " + cluster, start: e.Time(),
		attrs: []attribute.KeyValue{AttrCluster.String(cluster), AttrWave.Int(wave + 1)}}
	ro.clusters[cluster] = s
	return s
}

// finish ends rollout ro: every span still open ends with it, then the
// root; ro is forgotten.
func (b *Builder) finish(ctx context.Context, ro *tracked, at time.Time, outcome string, code codes.Code, desc string) {
	endedBy := AttrEndedBy.String("rollout " + outcome)
	for _, open := range []map[string]*span{ro.runs, ro.clusters, ro.reverts} {
		for _, s := range open {
			s.attrs = append(s.attrs, endedBy)
			b.emit(ctx, ro.id, s, at, codes.Unset, "")
		}
	}
	for _, s := range ro.waves {
		s.attrs = append(s.attrs, endedBy)
		b.emit(ctx, ro.id, s, at, codes.Unset, "")
	}
	if s := ro.rollback; s != nil {
		rc, rd := codes.Unset, ""
		if outcome == "rollbackfailed" {
			rc, rd = code, desc
		}
		b.emit(ctx, ro.id, s, at, rc, rd)
	}
	if !ro.noRoot {
		ro.root.attrs = append(ro.root.attrs, AttrOutcome.String(outcome))
		if ro.partial {
			ro.root.attrs = append(ro.root.attrs, AttrPartial.Bool(true))
		}
		b.emit(ctx, ro.id, &ro.root, at, code, desc)
	}
	delete(b.rollouts, ro.id)
	b.ended.put(ro.id, struct{}{})
}

// emit starts and ends s, with its parent, in rollout rid's trace.
func (b *Builder) emit(ctx context.Context, rid string, s *span, end time.Time, code codes.Code, desc string) {
	tid := TraceID(rid)
	ctx = withIDs(ctx, tid, s.id)
	if s.parent.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: tid, SpanID: s.parent, TraceFlags: trace.FlagsSampled, Remote: true,
		}))
	} else {
		ctx = trace.ContextWithSpanContext(ctx, trace.SpanContext{})
	}
	_, sp := b.tracer.Start(ctx, s.name, trace.WithTimestamp(s.start), trace.WithAttributes(s.attrs...))
	for _, ev := range s.events {
		sp.AddEvent(ev.name, trace.WithTimestamp(ev.at), trace.WithAttributes(ev.attrs...))
	}
	if code != codes.Unset {
		sp.SetStatus(code, desc)
	}
	if end.Before(s.start) {
		end = s.start
	}
	sp.End(trace.WithTimestamp(end))
}

func runKey(cluster, purpose string, step int) string {
	return fmt.Sprintf("%s/%s/%d", cluster, purpose, step)
}

// parentID is the id of the event e was derived from (events.Derive
// appends "/<type>[/<discriminator>]" to it), "" when e was not derived.
func parentID(e cloudevents.Event) string {
	if i := strings.LastIndex(e.ID(), "/"+e.Type()); i > 0 {
		return e.ID()[:i]
	}
	return ""
}

// recent is a map that keeps its last max keys.
type recent[T any] struct {
	max   int
	m     map[string]T
	order []string
}

func newRecent[T any](max int) recent[T] { return recent[T]{max: max, m: map[string]T{}} }

func (r *recent[T]) get(k string) (T, bool) {
	v, ok := r.m[k]
	return v, ok
}

func (r *recent[T]) put(k string, v T) {
	if _, ok := r.m[k]; !ok {
		r.order = append(r.order, k)
		if len(r.order) > r.max {
			delete(r.m, r.order[0])
			r.order = r.order[1:]
		}
	}
	r.m[k] = v
}
