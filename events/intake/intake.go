package intake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/fault"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
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

// Option configures [New].
type Option func(*intakeOptions)

type intakeOptions struct {
	maxBody     int64
	bodyBudget  int64
	bodyTimeout time.Duration
	authLimit   RateLimit
	timeout     time.Duration
	logger      *slog.Logger
	reg         prometheus.Registerer
	now         func() time.Time
	observer    func(context.Context, []cloudevents.Event)
	gates       GateKeeper
}

// WithMaxBodyBytes limits request bodies; a larger one is answered 413. The
// default is 1 MiB.
func WithMaxBodyBytes(n int64) Option {
	return func(o *intakeOptions) {
		if n > 0 {
			o.maxBody = n
		}
	}
}

// WithBodyBudget bounds the bytes of request bodies read at once before
// their delivery is authenticated (senders that sign the body: GitHub,
// Gitea, Bitbucket, Nexus; Flagger with its token in the payload). A
// request that cannot reserve its share (its Content-Length, else the
// maximum body size) within a second is answered 503 with Retry-After,
// unread. The default is 64 MiB. Bodies of deliveries authenticated by a
// header or path token are not counted: their senders' rate limits bound
// them.
func WithBodyBudget(n int64) Option {
	return func(o *intakeOptions) {
		if n > 0 {
			o.bodyBudget = n
		}
	}
}

// WithBodyReadTimeout bounds the time to read a request's body once its
// head is in; a body still arriving then is answered 408. The default is
// 10s: a webhook body is at most a megabyte.
func WithBodyReadTimeout(d time.Duration) Option {
	return func(o *intakeOptions) {
		if d > 0 {
			o.bodyTimeout = d
		}
	}
}

// WithAuthFailureLimit sets each receiver's budget of refused deliveries
// (failed authentication), separate from its rate limit, which only
// authenticated deliveries spend. Past it, refusals are answered 429 and
// not logged one by one. The default is [DefaultAuthFailureLimit].
func WithAuthFailureLimit(l RateLimit) Option {
	return func(o *intakeOptions) {
		if l.PerSecond != 0 {
			o.authLimit = l
		}
	}
}

// DefaultAuthFailureLimit is a receiver's budget of refused deliveries: a
// misconfigured sender shows up at once, a flood is answered cheaply.
var DefaultAuthFailureLimit = RateLimit{PerSecond: 10, Burst: 50}

// WithRequestTimeout sets the deadline of the context a delivery is journaled
// under. The default is 10s (Flagger's default hook timeout).
func WithRequestTimeout(d time.Duration) Option {
	return func(o *intakeOptions) {
		if d > 0 {
			o.timeout = d
		}
	}
}

// WithLogger sets the logger. The default discards everything.
func WithLogger(l *slog.Logger) Option {
	return func(o *intakeOptions) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithMetrics registers the intake's metrics with r. The default, as is
// a nil r, is no metrics.
func WithMetrics(r prometheus.Registerer) Option {
	return func(o *intakeOptions) { o.reg = r }
}

// WithIntakeClock sets the clock that stamps deliveries and times requests.
// The default is time.Now.
func WithIntakeClock(now func() time.Time) Option {
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
func WithObserver(f func(ctx context.Context, evs []cloudevents.Event)) Option {
	return func(o *intakeOptions) { o.observer = f }
}

// WithGateKeeper sets who decides Flagger's gate calls. The default is
// [DefaultGateKeeper]: gates open, no rollback.
func WithGateKeeper(g GateKeeper) Option {
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
	// bodies is the budget of body bytes read before authentication.
	bodies *semaphore.Weighted
}

type receiver struct {
	ReceiverConfig
	sender  Sender
	limiter *rate.Limiter // authenticated deliveries
	refused *rate.Limiter // deliveries that failed authentication
	logs    *logSampler   // of refusals and rate limiting
}

// New builds the intake for receivers. An unknown sender type, a
// duplicate or invalid name, or an empty secret on a receiver not marked
// Insecure is an error.
func New(receivers []ReceiverConfig, j Journal, opts ...Option) (*Intake, error) {
	if j == nil {
		return nil, errors.New("building intake: no journal")
	}
	o := intakeOptions{
		maxBody:     1 << 20,
		bodyBudget:  64 << 20,
		bodyTimeout: 10 * time.Second,
		authLimit:   DefaultAuthFailureLimit,
		timeout:     10 * time.Second,
		logger:      slog.New(slog.DiscardHandler),
		now:         time.Now,
		gates:       DefaultGateKeeper{},
	}
	for _, opt := range opts {
		opt(&o)
	}
	in := &Intake{receivers: map[string]receiver{}, journal: j, opts: o, bodies: semaphore.NewWeighted(o.bodyBudget)}
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
		in.receivers[rc.Name] = receiver{
			ReceiverConfig: rc, sender: s,
			limiter: rc.RateLimit.limiter(), refused: o.authLimit.limiter(),
			logs: newLogSampler(o.now),
		}
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
	errUnknownReceiver = fault.New(fault.ErrNotFound, "no such receiver")
	errMethod          = fault.New(fault.ErrMethodNotAllowed, "method not allowed: use POST")
	errJournal         = errors.New("journaling events")
	errRateLimited     = fault.New(fault.ErrRateLimited, "too many deliveries: retry after the time in Retry-After")
	errAuthLimited     = fault.New(fault.ErrAuthRateLimited, "too many unauthenticated deliveries: check the credentials, then retry after the time in Retry-After")
	errBusy            = fault.New(fault.ErrBusy, "too many request bodies being read: retry after the time in Retry-After")
	errBodyTimeout     = fault.New(fault.ErrTimeout, "reading body: timed out")
)

const (
	outcomeAccepted   = "accepted"
	outcomeDuplicate  = "duplicate"
	outcomeIgnored    = "ignored"
	outcomeJournalErr = "journal_error"
)

// classify returns the status and outcome of err, from pkg/fault's one
// table; an error of no kind is the journal's (503: retry).
func classify(err error) (int, string) {
	status, outcome, ok := fault.Status(err)
	if !ok {
		return status, outcomeJournalErr
	}
	return status, outcome
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
		in.refuse(w, r, rcv, log, res, err)
		return
	}

	if res.Gate != nil {
		in.answerGate(w, r, rcv, *res.Gate, log)
		return
	}
	if len(res.Events) == 0 {
		in.metrics.delivery(rcv.Name, rcv.Type, outcomeIgnored)
		// Debug: a registry reports every pull.
		log.Debug("webhook ignored", slog.String("delivery", logID(res.DeliveryID)), slog.String("reason", res.Ignored))
		writeJSON(w, http.StatusAccepted, ignoredResponse{Ignored: res.Ignored})
		return
	}
	ids := eventIDs(res.Events)
	outcome := outcomeAccepted
	if n == 0 {
		outcome = outcomeDuplicate
	}
	in.metrics.delivery(rcv.Name, rcv.Type, outcome)
	attrs := []any{
		slog.String("delivery", logID(res.DeliveryID)),
		slog.Any("event_ids", logIDs(ids)),
		slog.Int("new", n),
		slog.Int("duplicates", len(ids)-n),
	}
	if id := rolloutOf(res.Events); id != "" {
		// A canary's or a pipeline run's report: its rollout's log.
		attrs = append(attrs, slog.String("rollout_id", id))
	}
	log.Info("webhook accepted", attrs...)
	writeJSON(w, http.StatusAccepted, acceptedResponse{Accepted: n, Duplicates: len(ids) - n, IDs: ids})
}

// refuse answers a delivery that failed with err: its status from the
// table, a log line (sampled for refusals a flood can repeat), metrics.
func (in *Intake) refuse(w http.ResponseWriter, r *http.Request, rcv receiver, log *slog.Logger, res Result, err error) {
	status, outcome := classify(err)
	in.metrics.delivery(rcv.Name, rcv.Type, outcome)
	attrs := []any{
		slog.Int("status", status),
		slog.String("delivery", logID(res.DeliveryID)),
		slog.Any("error", err),
	}
	switch {
	case status == http.StatusUnauthorized || errors.Is(err, errAuthLimited):
		in.metrics.authFailure(rcv.Name)
		rcv.logs.warn(log, "webhook not authenticated", append(attrs, slog.String("remote", r.RemoteAddr))...)
	case status == http.StatusTooManyRequests || errors.Is(err, errBusy):
		rcv.logs.warn(log, "webhook refused: over its limits", append(attrs, slog.String("remote", r.RemoteAddr))...)
	case status >= 500:
		log.Error("webhook not journaled", append(attrs, slog.Any("event_ids", logIDs(eventIDs(res.Events))))...)
		// Whatever the journal said stays in the log.
		err = errors.New("journaling events failed; retry later")
	default:
		log.Warn("webhook refused", attrs...)
	}
	var retry retryAfterError
	if errors.As(err, &retry) {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(retry.after)))
	}
	if status == http.StatusMethodNotAllowed {
		allow := http.MethodPost
		if rcv.Type == SenderCloudEvents {
			allow += ", " + http.MethodOptions
		}
		w.Header().Set("Allow", allow)
	}
	writeError(w, status, err)
}

// retryAfterError carries how long the sender should wait.
type retryAfterError struct {
	err   error
	after time.Duration
}

func (e retryAfterError) Error() string { return e.err.Error() }
func (e retryAfterError) Unwrap() error { return e.err }

// handle runs one delivery through its sender and the journal, cheapest
// refusal first: the method, the head's credentials (before any of the
// body is read), a bounded and timed body read, the body's credentials,
// only then the receiver's rate limit (so that refused requests never spend
// the real sender's deliveries), parsing, the events' bounds, the journal.
// It returns the parse result (also on a journal error, for the logs) and
// how many events were new.
func (in *Intake) handle(w http.ResponseWriter, r *http.Request, rcv receiver, token string, received time.Time) (Result, int, error) {
	if r.Method != http.MethodPost {
		return Result{}, 0, errMethod
	}
	d := &Delivery{
		Receiver:   rcv.Name,
		Header:     r.Header,
		Query:      r.URL.Query(),
		PathToken:  token,
		ReceivedAt: received,
	}
	authenticated := rcv.Insecure
	if ha, ok := rcv.sender.(HeadAuthenticator); ok && !authenticated {
		switch err := ha.AuthenticateHead(r.Context(), d); {
		case err == nil:
			authenticated = true
		case !errors.Is(err, ErrNeedBody):
			return Result{}, 0, in.refused(rcv, received, err)
		}
	}
	body, err := in.readBody(w, r, authenticated)
	if err != nil {
		return Result{}, 0, err
	}
	d.Body = body
	if !authenticated {
		if err := rcv.sender.Authenticate(r.Context(), d); err != nil {
			return Result{}, 0, in.refused(rcv, received, err)
		}
	}
	if wait, limited := reserve(rcv.limiter, received); limited {
		return Result{}, 0, retryAfterError{errRateLimited, wait}
	}
	res, err := rcv.sender.Parse(d)
	if err != nil {
		return res, 0, err
	}
	if len(res.Events) == 0 || res.Gate != nil {
		return res, 0, nil
	}
	if err := checkEvents(res.Events); err != nil {
		return res, 0, err
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

// refused spends one of the receiver's refusals on a failed authentication:
// err, or, past the budget, a 429.
func (in *Intake) refused(rcv receiver, now time.Time, err error) error {
	if wait, limited := reserve(rcv.refused, now); limited {
		return retryAfterError{fmt.Errorf("%w (%w)", errAuthLimited, err), wait}
	}
	return err
}

// readBody reads r's body, at most the maximum body size, within the body
// read timeout. A body read before its delivery is authenticated must first
// reserve its size in the intake's body budget.
func (in *Intake) readBody(w http.ResponseWriter, r *http.Request, authenticated bool) ([]byte, error) {
	if r.ContentLength > in.opts.maxBody {
		// Refused unread: its size is known.
		return nil, fmt.Errorf("reading body: %w", &http.MaxBytesError{Limit: in.opts.maxBody})
	}
	if !authenticated {
		size := in.opts.maxBody
		if r.ContentLength >= 0 {
			size = r.ContentLength
		}
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		err := in.bodies.Acquire(ctx, size)
		cancel()
		if err != nil {
			return nil, retryAfterError{errBusy, time.Second}
		}
		defer in.bodies.Release(size)
	}
	// Unsupported by some ResponseWriters (tests); the server's ReadTimeout
	// still bounds the request then.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(in.opts.bodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, in.opts.maxBody))
	switch {
	case err == nil:
		return body, nil
	case errors.As(err, new(*http.MaxBytesError)):
		return nil, fmt.Errorf("reading body: %w", err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, errBodyTimeout
	}
	return nil, fault.Permanent(fmt.Errorf("reading body: %w", err))
}

// MaxEventIDLen bounds the id of an event the intake journals (the ids
// flotilla derives from a sender's delivery id, or a CloudEvent's own).
const MaxEventIDLen = 1024

// checkEvents refuses, for good, events the journal must not take, with a
// reason a sender can act on. (The journal itself refuses any event that
// would not read back.)
func checkEvents(evs []cloudevents.Event) error {
	for _, e := range evs {
		if n := len(e.ID()); n > MaxEventIDLen {
			return fault.Permanent(fmt.Errorf("event id %s is %d bytes long: at most %d", logID(e.ID()), n, MaxEventIDLen))
		}
		if !ValidTime(e.Time()) {
			return fault.Permanent(fmt.Errorf("event %s: time %s is outside years 1-9999", logID(e.ID()), e.Time().UTC().Format(time.RFC3339)))
		}
	}
	return nil
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
		slog.String("rollout_id", call.RolloutID),
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

// rolloutOf is the rollout of evs when they are all of one, else "".
func rolloutOf(evs []cloudevents.Event) string {
	id := ""
	for i, e := range evs {
		r := events.RolloutID(e)
		if r == "" || (i > 0 && r != id) {
			return ""
		}
		id = r
	}
	return id
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
