package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Journal durably records events. Append returns how many of evs were new
// (not already journaled by id); when it returns without error the events are
// durable.
type Journal interface {
	Append(ctx context.Context, evs ...cloudevents.Event) (int, error)
}

// ReceiverConfig declares one receiver: POST /hooks/<Name>.
type ReceiverConfig struct {
	Name string
	// Type is a sender type, one of [SenderTypes].
	Type   string
	Secret string
	// Header names the request header that carries Secret, for senders
	// configured to send a static header (distribution, harbor, acr, ecr,
	// cloudevents). Empty means the sender's default.
	Header string
	// Registry is the registry host, for senders whose payloads do not name
	// it (nexus).
	Registry string
	// OIDC verifies the Google-signed tokens of a Pub/Sub push subscription
	// (sender type gar).
	OIDC OIDCConfig
	// RateLimit bounds how fast the receiver accepts deliveries; more are
	// answered 429 with Retry-After. Zero means [DefaultRateLimit].
	RateLimit RateLimit
	// Insecure skips authentication: deliveries are accepted from anyone.
	// For tests and demos only.
	Insecure bool
}

// RateLimit is a token bucket: PerSecond deliveries per second sustained,
// Burst at once. A negative PerSecond means no limit.
type RateLimit struct {
	PerSecond float64
	Burst     int
}

// DefaultRateLimit is a receiver's rate limit when its config sets none:
// far above what a registry or git host sends, low enough that a flood
// cannot starve the journal for the other receivers.
var DefaultRateLimit = RateLimit{PerSecond: 500, Burst: 1000}

func (l RateLimit) limiter() *rate.Limiter {
	switch {
	case l.PerSecond < 0:
		return rate.NewLimiter(rate.Inf, 0)
	case l.PerSecond == 0:
		l = DefaultRateLimit
	}
	return rate.NewLimiter(rate.Limit(l.PerSecond), max(1, l.Burst))
}

// OIDCConfig says which OIDC bearer tokens authenticate a delivery: Google
// Pub/Sub push subscriptions sign one per request.
type OIDCConfig struct {
	// Issuer must equal the token's iss. Default "https://accounts.google.com".
	Issuer string
	// Audience must be among the token's aud. Required.
	Audience string
	// JWKSURL serves the issuer's signing keys. Default
	// "https://www.googleapis.com/oauth2/v3/certs".
	JWKSURL string
	// JWKSFile holds the signing keys as a JWKS document, instead of
	// JWKSURL (air-gapped installs, tests).
	JWKSFile string
	// ServiceAccount, when set, must equal the token's email claim, and
	// email_verified must be true.
	ServiceAccount string
}

// IntakeOption configures [NewIntake].
type IntakeOption func(*intakeOptions)

type intakeOptions struct {
	maxBody  int64
	timeout  time.Duration
	logger   *slog.Logger
	reg      prometheus.Registerer
	now      func() time.Time
	observer func(context.Context, []cloudevents.Event)
	gates    GateKeeper
}

// WithMaxBodyBytes limits request bodies; a larger one is answered 413. The
// default is 1 MiB.
func WithMaxBodyBytes(n int64) IntakeOption {
	return func(o *intakeOptions) {
		if n > 0 {
			o.maxBody = n
		}
	}
}

// WithRequestTimeout sets the deadline of the context a delivery is journaled
// under. The default is 10s (Flagger's default hook timeout).
func WithRequestTimeout(d time.Duration) IntakeOption {
	return func(o *intakeOptions) {
		if d > 0 {
			o.timeout = d
		}
	}
}

// WithIntakeLogger sets the logger. The default discards everything.
func WithIntakeLogger(l *slog.Logger) IntakeOption {
	return func(o *intakeOptions) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithIntakeMetrics registers the intake's metrics with r. The default, as is
// a nil r, is no metrics.
func WithIntakeMetrics(r prometheus.Registerer) IntakeOption {
	return func(o *intakeOptions) { o.reg = r }
}

// WithIntakeClock sets the clock that stamps deliveries and times requests.
// The default is time.Now.
func WithIntakeClock(now func() time.Time) IntakeOption {
	return func(o *intakeOptions) {
		if now != nil {
			o.now = now
		}
	}
}

// WithObserver calls f with the events of every delivery once they are
// journaled, before the response is written, under the request's context. f
// must hand the events off, not process them. A redelivery whose events were
// all journaled before is not observed; a partly new batch is observed whole,
// so f may see an id twice. The default observes nothing.
func WithObserver(f func(ctx context.Context, evs []cloudevents.Event)) IntakeOption {
	return func(o *intakeOptions) { o.observer = f }
}

// WithGateKeeper sets who decides Flagger's gate calls. The default is
// [DefaultGateKeeper]: gates open, no rollback.
func WithGateKeeper(g GateKeeper) IntakeOption {
	return func(o *intakeOptions) {
		if g != nil {
			o.gates = g
		}
	}
}

// Intake is the webhook endpoint: it authenticates a delivery, parses it
// into events, journals them and only then answers 202. Mount it at
// "/hooks/" (without stripping the prefix).
type Intake struct {
	receivers map[string]receiver
	// events names the receiver served at POST /events: the first of type
	// cloudevents, if any.
	events  string
	journal Journal
	opts    intakeOptions
	metrics *intakeMetrics
}

type receiver struct {
	ReceiverConfig
	sender  Sender
	limiter *rate.Limiter
}

// NewIntake builds the intake for receivers. An unknown sender type, a
// duplicate or invalid name, or an empty secret on a receiver not marked
// Insecure is an error.
func NewIntake(receivers []ReceiverConfig, j Journal, opts ...IntakeOption) (*Intake, error) {
	if j == nil {
		return nil, errors.New("building intake: no journal")
	}
	o := intakeOptions{
		maxBody: 1 << 20,
		timeout: 10 * time.Second,
		logger:  slog.New(slog.DiscardHandler),
		now:     time.Now,
		gates:   DefaultGateKeeper{},
	}
	for _, opt := range opts {
		opt(&o)
	}
	in := &Intake{receivers: map[string]receiver{}, journal: j, opts: o}
	for _, rc := range receivers {
		if rc.Name == "" || strings.Contains(rc.Name, "/") {
			return nil, fmt.Errorf("configuring receiver %q: name must be non-empty and contain no '/'", rc.Name)
		}
		if _, dup := in.receivers[rc.Name]; dup {
			return nil, fmt.Errorf("configuring receiver %q: duplicate name", rc.Name)
		}
		s, err := NewSender(rc)
		if err != nil {
			return nil, fmt.Errorf("configuring receiver %q: %w", rc.Name, err)
		}
		in.receivers[rc.Name] = receiver{ReceiverConfig: rc, sender: s, limiter: rc.RateLimit.limiter()}
		if rc.Type == SenderCloudEvents && in.events == "" {
			in.events = rc.Name
		}
	}
	m, err := newIntakeMetrics(o.reg)
	if err != nil {
		return nil, err
	}
	in.metrics = m
	return in, nil
}

// Errors of the intake itself; senders' errors are classified by
// [ErrUnauthenticated], [ErrUnsupportedMediaType] and [IsPermanent].
var (
	errUnknownReceiver = errors.New("no such receiver")
	errMethod          = errors.New("method not allowed: use POST")
	errJournal         = errors.New("journaling events")
	errRateLimited     = errors.New("too many deliveries: retry after the time in Retry-After")
)

// statusTable maps error classes to HTTP status and metric outcome. The first
// match wins; an error that matches nothing is 503: retry.
var statusTable = []struct {
	match   func(error) bool
	status  int
	outcome string
}{
	{is(errUnknownReceiver), http.StatusNotFound, "not_found"},
	{is(errMethod), http.StatusMethodNotAllowed, "method_not_allowed"},
	{is(errRateLimited), http.StatusTooManyRequests, "rate_limited"},
	{isTooLarge, http.StatusRequestEntityTooLarge, "too_large"},
	{is(ErrUnauthenticated), http.StatusUnauthorized, "unauthenticated"},
	{is(ErrUnsupportedMediaType), http.StatusUnsupportedMediaType, "unsupported_media_type"},
	{IsPermanent, http.StatusBadRequest, "malformed"},
}

const (
	outcomeAccepted   = "accepted"
	outcomeDuplicate  = "duplicate"
	outcomeIgnored    = "ignored"
	outcomeJournalErr = "journal_error"
)

func is(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

func isTooLarge(err error) bool {
	var tooLarge *http.MaxBytesError
	return errors.As(err, &tooLarge)
}

// classify returns the status and outcome of err.
func classify(err error) (int, string) {
	for _, row := range statusTable {
		if row.match(err) {
			return row.status, row.outcome
		}
	}
	return http.StatusServiceUnavailable, outcomeJournalErr
}

// ServeHTTP implements http.Handler for /hooks/<receiver>,
// /hooks/<receiver>/<token> and /events.
func (in *Intake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := in.opts.now()
	name, token, ok := splitHookPath(r.URL.EscapedPath())
	if r.URL.Path == EventsPath {
		name, token, ok = in.events, "", in.events != ""
	}
	rcv, known := in.receivers[name]
	if !ok || !known || (token != "" && !usesPathToken(rcv.sender)) {
		// The name is not a label: unknown names are unbounded.
		in.metrics.delivery("", "", "not_found")
		in.opts.logger.Debug("webhook for unknown receiver", slog.String("remote", r.RemoteAddr))
		writeError(w, http.StatusNotFound, errUnknownReceiver)
		return
	}
	log := in.opts.logger.With(slog.String("receiver", rcv.Name), slog.String("sender", rcv.Type))
	if r.Method == http.MethodOptions && rcv.Type == SenderCloudEvents {
		in.handshake(w, r, rcv)
		return
	}
	defer func() { in.metrics.observe(rcv.Name, in.opts.now().Sub(start)) }()
	if wait, limited := reserve(rcv.limiter, start); limited {
		in.metrics.delivery(rcv.Name, rcv.Type, "rate_limited")
		log.Warn("webhook rate limited", slog.Duration("retry_after", wait), slog.String("remote", r.RemoteAddr))
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(wait)))
		writeError(w, http.StatusTooManyRequests, errRateLimited)
		return
	}

	defer func() {
		// A sender must not panic on any input (each has a fuzz target);
		// if one does, the delivery gets a 500 and the server lives on.
		if p := recover(); p != nil {
			in.metrics.delivery(rcv.Name, rcv.Type, "panic")
			log.Error("webhook handler panicked", slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			writeError(w, http.StatusInternalServerError, errors.New("internal error handling the delivery; it was not recorded"))
		}
	}()
	res, n, err := in.handle(w, r, rcv, token, start)
	if err != nil {
		status, outcome := classify(err)
		in.metrics.delivery(rcv.Name, rcv.Type, outcome)
		attrs := []any{
			slog.Int("status", status),
			slog.String("delivery", res.DeliveryID),
			slog.Any("error", err),
		}
		switch {
		case status == http.StatusUnauthorized:
			in.metrics.authFailure(rcv.Name)
			log.Warn("webhook not authenticated", append(attrs, slog.String("remote", r.RemoteAddr))...)
		case status >= 500:
			log.Error("webhook not journaled", append(attrs, slog.Any("event_ids", eventIDs(res.Events)))...)
			// Whatever the journal said stays in the log.
			err = errors.New("journaling events failed; retry later")
		default:
			log.Warn("webhook refused", attrs...)
		}
		if status == http.StatusMethodNotAllowed {
			allow := http.MethodPost
			if rcv.Type == SenderCloudEvents {
				allow += ", " + http.MethodOptions
			}
			w.Header().Set("Allow", allow)
		}
		writeError(w, status, err)
		return
	}

	if res.Gate != nil {
		in.answerGate(w, r, rcv, *res.Gate, log)
		return
	}
	if len(res.Events) == 0 {
		in.metrics.delivery(rcv.Name, rcv.Type, outcomeIgnored)
		// Debug: a registry reports every pull.
		log.Debug("webhook ignored", slog.String("delivery", res.DeliveryID), slog.String("reason", res.Ignored))
		writeJSON(w, http.StatusAccepted, ignoredResponse{Ignored: res.Ignored})
		return
	}
	ids := eventIDs(res.Events)
	outcome := outcomeAccepted
	if n == 0 {
		outcome = outcomeDuplicate
	}
	in.metrics.delivery(rcv.Name, rcv.Type, outcome)
	log.Info("webhook accepted",
		slog.String("delivery", res.DeliveryID),
		slog.Any("event_ids", ids),
		slog.Int("new", n),
		slog.Int("duplicates", len(ids)-n))
	writeJSON(w, http.StatusAccepted, acceptedResponse{Accepted: n, Duplicates: len(ids) - n, IDs: ids})
}

// handle runs one delivery through its sender and the journal. It returns
// the parse result (also on a journal error, for the logs) and how many
// events were new.
func (in *Intake) handle(w http.ResponseWriter, r *http.Request, rcv receiver, token string, received time.Time) (Result, int, error) {
	if r.Method != http.MethodPost {
		return Result{}, 0, errMethod
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, in.opts.maxBody))
	if err != nil {
		if isTooLarge(err) {
			return Result{}, 0, fmt.Errorf("reading body: %w", err)
		}
		return Result{}, 0, Permanent(fmt.Errorf("reading body: %w", err))
	}
	d := &Delivery{
		Receiver:   rcv.Name,
		Header:     r.Header,
		Body:       body,
		Query:      r.URL.Query(),
		PathToken:  token,
		ReceivedAt: received,
	}
	if !rcv.Insecure {
		if err := rcv.sender.Authenticate(r.Context(), d); err != nil {
			return Result{}, 0, err
		}
	}
	res, err := rcv.sender.Parse(d)
	if err != nil {
		return res, 0, err
	}
	if len(res.Events) == 0 || res.Gate != nil {
		return res, 0, nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), in.opts.timeout)
	defer cancel()
	n, err := in.journal.Append(ctx, res.Events...)
	if err != nil {
		return res, 0, fmt.Errorf("%w: %w", errJournal, err)
	}
	in.metrics.journaled(rcv.Name, n)
	if in.opts.observer != nil && n > 0 {
		in.opts.observer(ctx, res.Events)
	}
	return res, n, nil
}

// splitHookPath reads the escaped path "/hooks/<name>" or
// "/hooks/<name>/<token>". The token is everything after the name,
// unescaped: a secret with '/', '?', '#' or '%' (half of all base64
// secrets) works path-escaped, as flotilla writes it into canaries, and a
// '/' works unescaped too.
func splitHookPath(escaped string) (name, token string, ok bool) {
	rest, ok := strings.CutPrefix(escaped, "/hooks/")
	if !ok {
		return "", "", false
	}
	rawName, rawToken, _ := strings.Cut(rest, "/")
	name, err := url.PathUnescape(rawName)
	if err != nil || name == "" || strings.Contains(name, "/") {
		return "", "", false
	}
	if token, err = url.PathUnescape(rawToken); err != nil {
		return "", "", false
	}
	return name, token, true
}

// answerGate answers a Flagger gate call with the gate keeper's decision:
// 200 opens the gate (or rolls back, for a rollback hook), 403 holds it. A
// keeper that fails answers 503, which Flagger treats as a closed gate too.
func (in *Intake) answerGate(w http.ResponseWriter, r *http.Request, rcv receiver, call GateCall, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(r.Context(), in.opts.timeout)
	defer cancel()
	dec, err := in.opts.gates.Decide(ctx, call)
	attrs := []any{
		slog.String("gate", call.Gate),
		slog.String("cluster", call.Cluster),
		slog.String("canary", call.Namespace+"/"+call.Name),
		slog.String("phase", call.Phase),
		slog.String("rollout", call.RolloutID),
	}
	if err != nil {
		in.metrics.delivery(rcv.Name, rcv.Type, "gate_error")
		log.Error("gate call not decided", append(attrs, slog.Any("error", err))...)
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("deciding %s gate: %w", call.Gate, err))
		return
	}
	status, outcome := http.StatusOK, "gate_open"
	if !dec.Open {
		status, outcome = http.StatusForbidden, "gate_closed"
	}
	in.metrics.delivery(rcv.Name, rcv.Type, outcome)
	log.Debug("gate call answered", append(attrs, slog.Bool("open", dec.Open), slog.String("reason", dec.Reason))...)
	writeJSON(w, status, gateResponse{Gate: call.Gate, Open: dec.Open, Reason: dec.Reason})
}

// EventsPath is where native CloudEvents are posted: the first receiver of
// type cloudevents serves it.
const EventsPath = "/events"

// reserve takes a token from l at now. When none is left it returns how long
// until one is, and true; nothing is taken then.
func reserve(l *rate.Limiter, now time.Time) (time.Duration, bool) {
	res := l.ReserveN(now, 1)
	if !res.OK() {
		return time.Second, true
	}
	if wait := res.DelayFrom(now); wait > 0 {
		res.CancelAt(now)
		return wait, true
	}
	return 0, false
}

// retryAfterSeconds rounds wait up to whole seconds, at least 1, as
// Retry-After takes.
func retryAfterSeconds(wait time.Duration) int {
	return max(1, int((wait+time.Second-1)/time.Second))
}

// handshake answers the abuse-protection handshake of the CloudEvents
// webhook spec: the sender asks, with OPTIONS and WebHook-Request-Origin,
// whether it may deliver, and at which rate.
func (in *Intake) handshake(w http.ResponseWriter, r *http.Request, rcv receiver) {
	origin := r.Header.Get("WebHook-Request-Origin")
	if origin == "" {
		w.Header().Set("Allow", http.MethodPost+", "+http.MethodOptions)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Allow", http.MethodPost+", "+http.MethodOptions)
	w.Header().Set("WebHook-Allowed-Origin", origin)
	if lim := rcv.limiter.Limit(); lim != rate.Inf {
		w.Header().Set("WebHook-Allowed-Rate", strconv.Itoa(max(1, int(float64(lim)*60))))
	} else {
		w.Header().Set("WebHook-Allowed-Rate", "*")
	}
	in.opts.logger.Info("CloudEvents webhook handshake", slog.String("receiver", rcv.Name), slog.String("origin", origin))
	w.WriteHeader(http.StatusOK)
}

func eventIDs(evs []cloudevents.Event) []string {
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID()
	}
	return ids
}

// Response bodies of the intake. Structs, not maps: they encode without
// sorting keys, and the intake answers thousands of requests a second.
type (
	acceptedResponse struct {
		Accepted   int      `json:"accepted"`
		Duplicates int      `json:"duplicates"`
		IDs        []string `json:"ids"`
	}
	ignoredResponse struct {
		Ignored string `json:"ignored"`
	}
	gateResponse struct {
		Gate   string `json:"gate"`
		Open   bool   `json:"open"`
		Reason string `json:"reason,omitempty"`
	}
	errorResponse struct {
		Error string `json:"error"`
	}
)

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, errorResponse{Error: err.Error()})
}

// Response header values, shared: the server only reads them.
var (
	headerJSON    = []string{"application/json"}
	headerNoSniff = []string{"nosniff"}
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding response"}`)
	}
	h := w.Header()
	h["Content-Type"] = headerJSON
	h["X-Content-Type-Options"] = headerNoSniff
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// intakeMetrics are the intake's collectors. A nil *intakeMetrics records
// nothing.
type intakeMetrics struct {
	webhooks     *prometheus.CounterVec
	authFailures *prometheus.CounterVec
	journaledEvs *prometheus.CounterVec
	seconds      *prometheus.HistogramVec
}

func newIntakeMetrics(reg prometheus.Registerer) (*intakeMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &intakeMetrics{
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_webhooks_total",
			Help: "Webhook deliveries by receiver, sender type and outcome.",
		}, []string{"receiver", "sender", "outcome"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_webhook_auth_failures_total",
			Help: "Webhook deliveries that failed authentication.",
		}, []string{"receiver"}),
		journaledEvs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_intake_events_journaled_total",
			Help: "Events the intake journaled (new ones only: redeliveries are not counted), by receiver.",
		}, []string{"receiver"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flotilla_intake_seconds",
			Help:    "Time from receiving a webhook to answering it, journaling included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14), // 0.5ms .. ~4s
		}, []string{"receiver"}),
	}
	var registered []prometheus.Collector
	for _, c := range []prometheus.Collector{m.webhooks, m.authFailures, m.journaledEvs, m.seconds} {
		if err := reg.Register(c); err != nil {
			for _, r := range registered {
				reg.Unregister(r)
			}
			return nil, fmt.Errorf("registering intake metrics: %w", err)
		}
		registered = append(registered, c)
	}
	return m, nil
}

func (m *intakeMetrics) delivery(receiver, sender, outcome string) {
	if m != nil {
		m.webhooks.WithLabelValues(receiver, sender, outcome).Inc()
	}
}

func (m *intakeMetrics) authFailure(receiver string) {
	if m != nil {
		m.authFailures.WithLabelValues(receiver).Inc()
	}
}

func (m *intakeMetrics) journaled(receiver string, n int) {
	if m != nil && n > 0 {
		m.journaledEvs.WithLabelValues(receiver).Add(float64(n))
	}
}

func (m *intakeMetrics) observe(receiver string, d time.Duration) {
	if m != nil {
		m.seconds.WithLabelValues(receiver).Observe(d.Seconds())
	}
}
