package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/flotilla-cd/flotilla/pkg/bus"
)

// Journal is what the Tracer reads (pkg/store).
type Journal interface {
	Read(ctx context.Context, after uint64, limit int) ([]bus.Record, error)
	// Changed returns a channel closed at the next append.
	Changed() <-chan struct{}
	// LastSeq is the last record's position.
	LastSeq() uint64
}

// Tracer follows the journal and exports its rollouts' traces.
type Tracer struct {
	j    Journal
	from uint64
	tp   *sdktrace.TracerProvider
	b    *Builder
	o    options
}

type options struct {
	headers  map[string]string
	ratio    float64
	instance string
	log      *slog.Logger
	exporter sdktrace.SpanExporter
}

// Option configures a Tracer.
type Option func(*options)

// WithHeaders sends these HTTP headers with every export (a collector's
// credentials). Default: none.
func WithHeaders(h map[string]string) Option { return func(o *options) { o.headers = h } }

// WithSampleRatio keeps this fraction of the rollouts' traces, decided by
// trace id (so all of a rollout's spans or none), 0 to 1. Default 1.
func WithSampleRatio(r float64) Option { return func(o *options) { o.ratio = r } }

// WithInstance names the flotilla (server.instance) in the spans' resource
// as service.instance.id. Default: none.
func WithInstance(name string) Option { return func(o *options) { o.instance = name } }

// WithLogger logs the journal's failures. Default: none.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithExporter exports to e instead of OTLP/HTTP (tests). Default: the
// endpoint's.
func WithExporter(e sdktrace.SpanExporter) Option { return func(o *options) { o.exporter = e } }

// DefaultPath is the OTLP/HTTP traces path, taken when the endpoint has
// none.
const DefaultPath = "/v1/traces"

// New returns a tracer exporting to endpoint, an http(s) URL of an
// OTLP/HTTP receiver (a URL without a path gets DefaultPath; http:// is
// plain text), following j from its current end.
func New(ctx context.Context, j Journal, endpoint string, opts ...Option) (*Tracer, error) {
	o := options{ratio: 1, log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	if o.exporter == nil {
		u, err := url.Parse(endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("tracing endpoint %q: want an http or https URL", endpoint)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = DefaultPath
		}
		eo := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(u.String())}
		if len(o.headers) > 0 {
			eo = append(eo, otlptracehttp.WithHeaders(o.headers))
		}
		if o.exporter, err = otlptracehttp.New(ctx, eo...); err != nil {
			return nil, fmt.Errorf("creating the OTLP exporter: %w", err)
		}
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", "flotilla")}
	if o.instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", o.instance))
	}
	tp := NewTracerProvider(o.ratio, sdktrace.WithBatcher(o.exporter), sdktrace.WithResource(resource.NewSchemaless(attrs...)))
	return &Tracer{j: j, from: j.LastSeq(), tp: tp, b: NewBuilder(tp), o: o}, nil
}

// NewTracerProvider returns a provider whose spans take the ids the
// Builder asks for, sampled by trace id at ratio (0 to 1), with opts (an
// exporter, a resource).
func NewTracerProvider(ratio float64, opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{
		sdktrace.WithIDGenerator(idGenerator{}), sdktrace.WithSampler(sdktrace.TraceIDRatioBased(ratio)),
	}, opts...)...)
}

// readBatch is how many records the tracer reads at once.
const readBatch = 512

// Run follows the journal until ctx ends, then exports what is pending
// (for up to 5 seconds).
func (t *Tracer) Run(ctx context.Context) error {
	defer func() {
		flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := t.tp.Shutdown(flush); err != nil {
			t.o.log.WarnContext(ctx, "exporting the last spans", "error", err)
		}
	}()
	f := bus.Follower{Batch: readBatch, Stalled: func(err error, retryIn time.Duration) {
		t.o.log.WarnContext(ctx, "tracing: reading the journal; retrying", "error", err, "retry_in", retryIn)
	}}
	return f.Run(ctx, t.j, t.from, func(ctx context.Context, recs []bus.Record) (uint64, error) {
		for _, r := range recs {
			if r.Err == nil {
				t.b.Add(ctx, r.Event)
			}
		}
		return recs[len(recs)-1].Seq, nil
	})
}
