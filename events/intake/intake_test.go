package intake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// memJournal is an in-memory Journal that drops ids it has seen.
type memJournal struct {
	mu     sync.Mutex
	seen   map[string]bool
	events []cloudevents.Event
	ctxs   []context.Context
}

func (j *memJournal) Append(ctx context.Context, evs ...cloudevents.Event) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.seen == nil {
		j.seen = map[string]bool{}
	}
	j.ctxs = append(j.ctxs, ctx)
	n := 0
	for _, e := range evs {
		if j.seen[e.ID()] {
			continue
		}
		j.seen[e.ID()] = true
		j.events = append(j.events, e)
		n++
	}
	return n, nil
}

func (j *memJournal) ids() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return eventIDs(j.events)
}

// journalFunc injects journal failures.
type journalFunc func(ctx context.Context, evs ...cloudevents.Event) (int, error)

func (f journalFunc) Append(ctx context.Context, evs ...cloudevents.Event) (int, error) {
	return f(ctx, evs...)
}

const (
	registrySecret = "registry-s3cret"
	githubSecret   = "github-s3cret"
	flaggerToken   = "flagger-token-eu-1"
)

var testReceivers = []ReceiverConfig{
	{Name: "registry", Type: "distribution", Secret: registrySecret},
	{Name: "gh", Type: "github", Secret: githubSecret},
	{Name: "flagger", Type: "flagger", Secret: flaggerToken},
	{Name: "open", Type: "flagger", Insecure: true},
}

type testIntake struct {
	url     string
	journal Journal
	reg     *prometheus.Registry
	logs    *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startIntake(t *testing.T, j Journal, opts ...Option) *testIntake {
	t.Helper()
	return startIntakeWith(t, testReceivers, j, opts...)
}

func startIntakeWith(t *testing.T, receivers []ReceiverConfig, j Journal, opts ...Option) *testIntake {
	t.Helper()
	ti := &testIntake{journal: j, reg: prometheus.NewRegistry(), logs: &syncBuffer{}}
	logger := slog.New(slog.NewJSONHandler(ti.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts = append([]Option{
		WithLogger(logger),
		WithMetrics(ti.reg),
		WithIntakeClock(func() time.Time { return received }),
	}, opts...)
	in, err := New(receivers, j, opts...)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/hooks/", in)
	mux.Handle(EventsPath, in)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ti.url = srv.URL
	return ti
}

type response struct {
	status int
	header http.Header
	body   map[string]any
}

func (ti *testIntake) do(t *testing.T, method, path string, h http.Header, body []byte) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, ti.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, body %s", ct, raw)
	}
	r := response{status: resp.StatusCode, header: resp.Header}
	if err := json.Unmarshal(raw, &r.body); err != nil {
		t.Fatalf("response is not JSON: %q", raw)
	}
	return r
}

func registryHeaders(secret string) http.Header {
	return header("Content-Type", distributionEventsV2, "Authorization", "Bearer "+secret)
}

func githubHeaders(event, delivery, signature string) http.Header {
	return header("Content-Type", "application/json", "X-GitHub-Event", event,
		"X-GitHub-Delivery", delivery, "X-Hub-Signature-256", signature)
}

func TestIntake(t *testing.T) {
	batch := fixture(t, "distribution", "batch.json")
	push := fixture(t, "github", "push.json")
	promoted := fixture(t, "flagger", "promoted.json")
	rollingBack := fixture(t, "flagger", "rolling_back.json")
	tests := []struct {
		name       string
		method     string
		path       string
		header     http.Header
		body       []byte
		wantStatus int
		wantBody   map[string]any // nil: only an "error" key is checked for
		wantIDs    []string       // journaled
		wantAllow  string
	}{
		{
			name: "unknown receiver", method: "POST", path: "/hooks/nope",
			header: registryHeaders(registrySecret), body: batch, wantStatus: 404,
		},
		{name: "no receiver name", method: "POST", path: "/hooks/", body: batch, wantStatus: 404},
		// The token is everything after the name: "a/b" is a (wrong) token.
		{name: "token with a slash", method: "POST", path: "/hooks/flagger/a/b", body: promoted, wantStatus: 401},
		{
			name: "path token on a sender that does not use one", method: "POST", path: "/hooks/gh/" + githubSecret,
			header: githubHeaders("push", "d-1", githubSign(githubSecret, push)), body: push, wantStatus: 404,
		},
		{
			name: "GET", method: "GET", path: "/hooks/registry",
			header: registryHeaders(registrySecret), wantStatus: 405, wantAllow: "POST",
		},
		{
			name: "wrong bearer token", method: "POST", path: "/hooks/registry",
			header: registryHeaders("guess"), body: batch, wantStatus: 401,
		},
		{
			name: "unsigned GitHub push", method: "POST", path: "/hooks/gh",
			header: githubHeaders("push", "d-1", ""), body: push, wantStatus: 401,
		},
		{
			name: "signed garbage", method: "POST", path: "/hooks/gh",
			header: githubHeaders("push", "d-1", githubSign(githubSecret, []byte(`{"ref":`))), body: []byte(`{"ref":`),
			wantStatus: 400,
		},
		{
			name: "unsupported media type", method: "POST", path: "/hooks/registry",
			header: header("Content-Type", "text/plain", "Authorization", "Bearer "+registrySecret), body: batch,
			wantStatus: 415,
		},
		{
			name: "ping", method: "POST", path: "/hooks/gh",
			header: githubHeaders("ping", "d-ping", githubSign(githubSecret, []byte(`{"zen":"hi"}`))), body: []byte(`{"zen":"hi"}`),
			wantStatus: 202, wantBody: map[string]any{"ignored": "ping"},
		},
		{
			name: "registry batch", method: "POST", path: "/hooks/registry",
			header: registryHeaders(registrySecret), body: batch,
			wantStatus: 202,
			wantBody:   map[string]any{"accepted": 1.0, "duplicates": 0.0, "ids": []any{"registry/distribution/a1b2-0"}},
			wantIDs:    []string{"registry/distribution/a1b2-0"},
		},
		{
			name: "GitHub push", method: "POST", path: "/hooks/gh",
			header: githubHeaders("push", "d-2", githubSign(githubSecret, push)), body: push,
			wantStatus: 202,
			wantBody:   map[string]any{"accepted": 1.0, "duplicates": 0.0, "ids": []any{"gh/github/d-2"}},
			wantIDs:    []string{"gh/github/d-2"},
		},
		{
			name: "Flagger, token in metadata", method: "POST", path: "/hooks/flagger",
			header: header("Content-Type", "application/json"), body: promoted,
			wantStatus: 202,
			wantBody:   map[string]any{"accepted": 1.0, "duplicates": 0.0, "ids": []any{flaggerID("eu-1", promoted)}},
			wantIDs:    []string{flaggerID("eu-1", promoted)},
		},
		{
			name: "Flagger, token in path", method: "POST", path: "/hooks/flagger/" + flaggerToken,
			header: header("Content-Type", "application/json"), body: rollingBack,
			wantStatus: 202,
			wantBody:   map[string]any{"accepted": 1.0, "duplicates": 0.0, "ids": []any{flaggerID("us-2", rollingBack)}},
			wantIDs:    []string{flaggerID("us-2", rollingBack)},
		},
		{
			name: "insecure receiver", method: "POST", path: "/hooks/open",
			header: header("Content-Type", "application/json"), body: rollingBack,
			wantStatus: 202,
			wantBody: map[string]any{"accepted": 1.0, "duplicates": 0.0,
				"ids": []any{"open/flagger/" + strings.TrimPrefix(flaggerID("us-2", rollingBack), "flagger/flagger/")}},
			wantIDs: []string{"open/flagger/" + strings.TrimPrefix(flaggerID("us-2", rollingBack), "flagger/flagger/")},
		},
		{
			name: "Flagger without cluster", method: "POST", path: "/hooks/flagger/" + flaggerToken,
			header: header("Content-Type", "application/json"), body: fixture(t, "flagger", "new_revision.json"),
			wantStatus: 400,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &memJournal{}
			ti := startIntake(t, j)
			r := ti.do(t, tt.method, tt.path, tt.header, tt.body)
			if r.status != tt.wantStatus {
				t.Errorf("status %d, want %d (body %v)", r.status, tt.wantStatus, r.body)
			}
			if tt.wantBody != nil {
				if diff := cmp.Diff(tt.wantBody, r.body); diff != "" {
					t.Errorf("body (-want +got):\n%s", diff)
				}
			} else if msg, _ := r.body["error"].(string); msg == "" || len(r.body) != 1 {
				t.Errorf("body %v, want {\"error\": ...}", r.body)
			}
			if got := r.header.Get("Allow"); got != tt.wantAllow {
				t.Errorf("Allow %q, want %q", got, tt.wantAllow)
			}
			if diff := cmp.Diff(tt.wantIDs, j.ids(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("journaled (-want +got):\n%s", diff)
			}
			// Neither secrets nor bodies are logged.
			logs := ti.logs.String()
			for _, secret := range []string{registrySecret, githubSecret, flaggerToken, "Promotion completed", "octo-dev", "sha256=", "zen"} {
				if strings.Contains(logs, secret) {
					t.Errorf("logs contain %q:\n%s", secret, logs)
				}
			}
		})
	}
}

func TestIntakeBodyLimit(t *testing.T) {
	j := &memJournal{}
	ti := startIntake(t, j, WithMaxBodyBytes(1024))
	big := fixture(t, "github", "push.json")
	if len(big) <= 1024 {
		t.Fatalf("fixture too small: %d bytes", len(big))
	}
	r := ti.do(t, "POST", "/hooks/gh", githubHeaders("push", "d-big", githubSign(githubSecret, big)), big)
	if r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d, want 413 (%v)", r.status, r.body)
	}
	if ids := j.ids(); len(ids) != 0 {
		t.Errorf("journaled %v", ids)
	}
	if got := webhooks(t, ti, "gh", "github", "too_large"); got != 1 {
		t.Errorf("too_large count %v", got)
	}
}

func TestIntakeRedelivery(t *testing.T) {
	j := &memJournal{}
	ti := startIntake(t, j)
	batch := fixture(t, "distribution", "batch.json")
	want := []map[string]any{
		{"accepted": 1.0, "duplicates": 0.0, "ids": []any{"registry/distribution/a1b2-0"}},
		{"accepted": 0.0, "duplicates": 1.0, "ids": []any{"registry/distribution/a1b2-0"}},
	}
	for i, w := range want {
		r := ti.do(t, "POST", "/hooks/registry", registryHeaders(registrySecret), batch)
		if r.status != http.StatusAccepted {
			t.Fatalf("delivery %d: status %d (%v)", i, r.status, r.body)
		}
		if diff := cmp.Diff(w, r.body); diff != "" {
			t.Errorf("delivery %d (-want +got):\n%s", i, diff)
		}
	}
	if diff := cmp.Diff([]string{"registry/distribution/a1b2-0"}, j.ids()); diff != "" {
		t.Errorf("journaled (-want +got):\n%s", diff)
	}
	for outcome, want := range map[string]float64{"accepted": 1, "duplicate": 1} {
		if got := webhooks(t, ti, "registry", "distribution", outcome); got != want {
			t.Errorf("%s count %v, want %v", outcome, got, want)
		}
	}
}

func TestIntakeJournalFailure(t *testing.T) {
	j := journalFunc(func(context.Context, ...cloudevents.Event) (int, error) {
		return 0, errors.New("disk on fire at /var/lib/flotilla/journal.db")
	})
	ti := startIntake(t, j)
	r := ti.do(t, "POST", "/hooks/registry", registryHeaders(registrySecret), fixture(t, "distribution", "batch.json"))
	if r.status != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", r.status)
	}
	if msg, _ := r.body["error"].(string); msg == "" || strings.Contains(msg, "/var/lib") {
		t.Errorf("error %q: want a message without the journal's details", msg)
	}
	if !strings.Contains(ti.logs.String(), "disk on fire") {
		t.Errorf("the journal error is not logged:\n%s", ti.logs.String())
	}
	if got := webhooks(t, ti, "registry", "distribution", "journal_error"); got != 1 {
		t.Errorf("journal_error count %v", got)
	}
}

func TestIntakeDeadline(t *testing.T) {
	var deadline time.Time
	var ok bool
	j := journalFunc(func(ctx context.Context, evs ...cloudevents.Event) (int, error) {
		deadline, ok = ctx.Deadline()
		return len(evs), nil
	})
	ti := startIntake(t, j, WithRequestTimeout(3*time.Second))
	start := time.Now()
	r := ti.do(t, "POST", "/hooks/registry", registryHeaders(registrySecret), fixture(t, "distribution", "batch.json"))
	if r.status != http.StatusAccepted {
		t.Fatalf("status %d", r.status)
	}
	if !ok || deadline.Before(start) || deadline.After(start.Add(3*time.Second+time.Second)) {
		t.Errorf("Append ctx deadline %v (set %v), want about 3s after %v", deadline, ok, start)
	}
}

func TestIntakeObserver(t *testing.T) {
	var mu sync.Mutex
	var observed [][]string
	observe := func(_ context.Context, evs []cloudevents.Event) {
		mu.Lock()
		defer mu.Unlock()
		observed = append(observed, eventIDs(evs))
	}
	ti := startIntake(t, &memJournal{}, WithObserver(observe))
	batch := fixture(t, "distribution", "batch.json")
	for range 2 {
		ti.do(t, "POST", "/hooks/registry", registryHeaders(registrySecret), batch)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([][]string{{"registry/distribution/a1b2-0"}}, observed); diff != "" {
		t.Errorf("observed (-want +got):\n%s", diff)
	}
}

func TestIntakeMetrics(t *testing.T) {
	ti := startIntake(t, &memJournal{})
	batch := fixture(t, "distribution", "batch.json")
	ti.do(t, "POST", "/hooks/registry", registryHeaders("guess"), batch)
	ti.do(t, "POST", "/hooks/registry", registryHeaders("guess"), batch)
	ti.do(t, "POST", "/hooks/registry", registryHeaders(registrySecret), batch)
	ti.do(t, "POST", "/hooks/registry", registryHeaders(registrySecret), fixture(t, "distribution", "ignored.json"))
	ti.do(t, "POST", "/hooks/unknown-"+strings.Repeat("x", 10), nil, nil)

	want := `
# HELP flotilla_webhook_auth_failures_total Webhook deliveries that failed authentication.
# TYPE flotilla_webhook_auth_failures_total counter
flotilla_webhook_auth_failures_total{receiver="registry"} 2
# HELP flotilla_webhooks_total Webhook deliveries by receiver, sender type and outcome.
# TYPE flotilla_webhooks_total counter
flotilla_webhooks_total{outcome="accepted",receiver="registry",sender="distribution"} 1
flotilla_webhooks_total{outcome="ignored",receiver="registry",sender="distribution"} 1
flotilla_webhooks_total{outcome="not_found",receiver="",sender=""} 1
flotilla_webhooks_total{outcome="unauthenticated",receiver="registry",sender="distribution"} 2
`
	want += `
# HELP flotilla_intake_events_journaled_total Events the intake journaled (new ones only: redeliveries are not counted), by receiver.
# TYPE flotilla_intake_events_journaled_total counter
flotilla_intake_events_journaled_total{receiver="registry"} 1
`
	if err := testutil.GatherAndCompare(ti.reg, strings.NewReader(want),
		"flotilla_webhooks_total", "flotilla_webhook_auth_failures_total", "flotilla_intake_events_journaled_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(ti.reg, "flotilla_intake_seconds"); n != 1 {
		t.Errorf("flotilla_intake_seconds has %d series, want 1 (receiver=registry)", n)
	}
	if problems, err := testutil.GatherAndLint(ti.reg); err != nil || len(problems) != 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func TestIntakeRateLimit(t *testing.T) {
	j := &memJournal{}
	// The test clock stands still: the bucket never refills.
	ti := startIntakeWith(t, []ReceiverConfig{
		{Name: "gh", Type: "github", Secret: githubSecret, RateLimit: RateLimit{PerSecond: 0.5, Burst: 2}},
		{Name: "other", Type: "github", Secret: githubSecret},
	}, j)
	push := fixture(t, "github", "push.json")
	sig := githubSign(githubSecret, push)
	for i, want := range []int{202, 202, 429, 429} {
		r := ti.do(t, "POST", "/hooks/gh", githubHeaders("push", fmt.Sprintf("d-%d", i), sig), push)
		if r.status != want {
			t.Fatalf("delivery %d: status %d, want %d (%v)", i, r.status, want, r.body)
		}
		if want == 429 {
			if got := r.header.Get("Retry-After"); got != "2" {
				t.Errorf("delivery %d: Retry-After %q, want 2 (one token per 2s)", i, got)
			}
			if r.body["error"] == "" {
				t.Errorf("delivery %d: no error in %v", i, r.body)
			}
		}
	}
	if got := len(j.ids()); got != 2 {
		t.Errorf("journaled %d events, want 2: a limited delivery records nothing", got)
	}
	if got := webhooks(t, ti, "gh", "github", "rate_limited"); got != 2 {
		t.Errorf("rate_limited count %v, want 2", got)
	}
	// Each receiver has its own bucket.
	r := ti.do(t, "POST", "/hooks/other", githubHeaders("push", "d-other", sig), push)
	if r.status != http.StatusAccepted {
		t.Errorf("other receiver: status %d (%v)", r.status, r.body)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for _, tt := range []struct {
		wait time.Duration
		want int
	}{{0, 1}, {time.Millisecond, 1}, {time.Second, 1}, {1001 * time.Millisecond, 2}, {90 * time.Second, 90}} {
		if got := retryAfterSeconds(tt.wait); got != tt.want {
			t.Errorf("retryAfterSeconds(%v) = %d, want %d", tt.wait, got, tt.want)
		}
	}
}

// webhooks reads flotilla_webhooks_total for one label set.
func webhooks(t *testing.T, ti *testIntake, receiver, sender, outcome string) float64 {
	t.Helper()
	mfs, err := ti.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() != "flotilla_webhooks_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["receiver"] == receiver && labels["sender"] == sender && labels["outcome"] == outcome {
				v += m.GetCounter().GetValue()
			}
		}
	}
	return v
}

func TestNew(t *testing.T) {
	j := &memJournal{}
	tests := []struct {
		name      string
		receivers []ReceiverConfig
		journal   Journal
	}{
		{"unknown type", []ReceiverConfig{{Name: "a", Type: "no-such-sender", Secret: "s"}}, j},
		{"no secret", []ReceiverConfig{{Name: "a", Type: "github"}}, j},
		{"duplicate name", []ReceiverConfig{{Name: "a", Type: "github", Secret: "s"}, {Name: "a", Type: "flagger", Secret: "t"}}, j},
		{"empty name", []ReceiverConfig{{Type: "github", Secret: "s"}}, j},
		{"slash in name", []ReceiverConfig{{Name: "a/b", Type: "github", Secret: "s"}}, j},
		{"no journal", []ReceiverConfig{{Name: "a", Type: "github", Secret: "s"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.receivers, tt.journal); err == nil {
				t.Error("New succeeded, want an error")
			}
		})
	}
	t.Run("metrics registered twice", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		if _, err := New(testReceivers, j, WithMetrics(reg)); err != nil {
			t.Fatal(err)
		}
		if _, err := New(testReceivers, j, WithMetrics(reg)); err == nil {
			t.Error("second New on one registry succeeded")
		}
	})
	t.Run("no registerer", func(t *testing.T) {
		in, err := New(testReceivers, j)
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		body := fixture(t, "distribution", "batch.json")
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/hooks/registry", bytes.NewReader(body))
		req.Header = registryHeaders(registrySecret)
		in.ServeHTTP(rec, req)
		if rec.Code != http.StatusAccepted {
			t.Errorf("status %d: %s", rec.Code, rec.Body)
		}
	})
}

func TestIntakeEventsEndpoint(t *testing.T) {
	const token = "events-t0ken"
	j := &memJournal{}
	ti := startIntakeWith(t, []ReceiverConfig{
		{Name: "ce", Type: SenderCloudEvents, Secret: token},
		{Name: "ce-2", Type: SenderCloudEvents, Secret: "other"},
	}, j)
	binary := func(id, auth string) http.Header {
		return header("Content-Type", "application/json", "Ce-Specversion", "1.0", "Ce-Id", id,
			"Ce-Source", "/ci", "Ce-Type", events.TypeImagePushed, "Authorization", auth)
	}
	body := []byte(`{"registry":"registry.example.com","repository":"shop/api","tag":"1.4.2"}`)

	tests := []struct {
		name       string
		method     string
		path       string
		h          http.Header
		body       []byte
		wantStatus int
		wantNew    int
	}{
		{"binary mode at /events", "POST", "/events", binary("e-1", "Bearer "+token), body, 202, 1},
		{"redelivery", "POST", "/events", binary("e-1", "Bearer "+token), body, 202, 0},
		{"/events is the first cloudevents receiver", "POST", "/events", binary("e-2", "Bearer other"), body, 401, 0},
		{"same receiver under /hooks", "POST", "/hooks/ce", binary("e-2", "Bearer "+token), body, 202, 1},
		{"no token", "POST", "/events", binary("e-3", ""), body, 401, 0},
		{"not a CloudEvent", "POST", "/events", header("Content-Type", "application/json", "Authorization", "Bearer "+token), body, 415, 0},
		{"GET", "GET", "/events", nil, nil, 405, 0},
	}
	total := 0
	for _, tt := range tests {
		r := ti.do(t, tt.method, tt.path, tt.h, tt.body)
		if r.status != tt.wantStatus {
			t.Errorf("%s: status %d, want %d (%v)", tt.name, r.status, tt.wantStatus, r.body)
		}
		if tt.wantStatus == 202 && r.body["accepted"] != float64(tt.wantNew) {
			t.Errorf("%s: accepted %v, want %d", tt.name, r.body["accepted"], tt.wantNew)
		}
		if tt.wantStatus == 405 && r.header.Get("Allow") != "POST, OPTIONS" {
			t.Errorf("%s: Allow %q", tt.name, r.header.Get("Allow"))
		}
		total += tt.wantNew
	}
	if got := len(j.ids()); got != total {
		t.Errorf("journaled %d events, want %d: %v", got, total, j.ids())
	}
}

func TestIntakeEventsHandshake(t *testing.T) {
	ti := startIntakeWith(t, []ReceiverConfig{
		{Name: "ce", Type: SenderCloudEvents, Secret: "t", RateLimit: RateLimit{PerSecond: 2, Burst: 4}},
		{Name: "gh", Type: SenderGitHub, Secret: "t"},
	}, &memJournal{})
	tests := []struct {
		path, origin string
		wantStatus   int
		wantHeaders  map[string]string
	}{
		{"/events", "eventemitter.example.com", 200, map[string]string{
			"WebHook-Allowed-Origin": "eventemitter.example.com",
			"WebHook-Allowed-Rate":   "120", // per minute
			"Allow":                  "POST, OPTIONS",
		}},
		{"/hooks/ce", "", 204, map[string]string{"Allow": "POST, OPTIONS", "WebHook-Allowed-Origin": ""}},
		// Other senders do not speak the CloudEvents webhook spec.
		{"/hooks/gh", "eventemitter.example.com", 405, map[string]string{"Allow": "POST", "WebHook-Allowed-Origin": ""}},
	}
	for _, tt := range tests {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodOptions, ti.url+tt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tt.origin != "" {
			req.Header.Set("WebHook-Request-Origin", tt.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != tt.wantStatus {
			t.Errorf("OPTIONS %s: status %d, want %d", tt.path, resp.StatusCode, tt.wantStatus)
		}
		for k, v := range tt.wantHeaders {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("OPTIONS %s: %s = %q, want %q", tt.path, k, got, v)
			}
		}
	}
}

// gateFunc is a GateKeeper from a function.
type gateFunc func(context.Context, GateCall) (GateDecision, error)

func (f gateFunc) Decide(ctx context.Context, c GateCall) (GateDecision, error) { return f(ctx, c) }

func TestIntakeGates(t *testing.T) {
	j := &memJournal{}
	var calls []GateCall
	keeper := gateFunc(func(_ context.Context, c GateCall) (GateDecision, error) {
		calls = append(calls, c)
		switch c.Name {
		case "approved":
			return GateDecision{Open: true, Reason: "approved by ops"}, nil
		case "broken":
			return GateDecision{}, errors.New("approvals unavailable")
		}
		return GateDecision{Open: false, Reason: "waiting for approval"}, nil
	})
	ti := startIntake(t, j, WithGateKeeper(keeper))
	call := func(name, gate string) []byte {
		return []byte(`{"name":"` + name + `","namespace":"shop","phase":"Progressing","metadata":{"cluster":"eu-1","gate":"` + gate + `"}}`)
	}
	tests := []struct {
		name       string
		body       []byte
		wantStatus int
		wantOpen   any
	}{
		{"open gate", call("approved", GateConfirmPromotion), 200, true},
		{"closed gate", call("pending", GateConfirmPromotion), 403, false},
		{"keeper fails", call("broken", GateConfirmRollout), 503, nil},
		{"gate type missing", []byte(`{"name":"x","namespace":"shop","phase":"Progressing","metadata":{"cluster":"eu-1"}}`), 400, nil},
	}
	for _, tt := range tests {
		r := ti.do(t, "POST", "/hooks/flagger/"+flaggerToken, header("Content-Type", "application/json"), tt.body)
		if r.status != tt.wantStatus {
			t.Errorf("%s: status %d, want %d (%v)", tt.name, r.status, tt.wantStatus, r.body)
		}
		if tt.wantOpen != nil && r.body["open"] != tt.wantOpen {
			t.Errorf("%s: open %v, want %v", tt.name, r.body["open"], tt.wantOpen)
		}
	}
	if len(calls) != 3 {
		t.Errorf("keeper saw %d calls, want 3", len(calls))
	}
	if ids := j.ids(); len(ids) != 0 {
		t.Errorf("gate calls journaled %v", ids)
	}
	// Gate calls are authenticated like every Flagger delivery.
	r := ti.do(t, "POST", "/hooks/flagger/wrong", header("Content-Type", "application/json"), call("approved", GateRollback))
	if r.status != http.StatusUnauthorized || len(calls) != 3 {
		t.Errorf("forged gate call: status %d, keeper calls %d", r.status, len(calls))
	}
	for outcome, want := range map[string]float64{"gate_open": 1, "gate_closed": 1, "gate_error": 1} {
		if got := webhooks(t, ti, "flagger", "flagger", outcome); got != want {
			t.Errorf("%s count %v, want %v", outcome, got, want)
		}
	}
}

func TestDefaultGateKeeper(t *testing.T) {
	for _, gate := range gateTypes {
		dec, err := DefaultGateKeeper{}.Decide(t.Context(), GateCall{Gate: gate})
		if err != nil {
			t.Fatal(err)
		}
		if want := gate != GateRollback; dec.Open != want {
			t.Errorf("%s: open %v, want %v (a 2xx to a rollback hook rolls back)", gate, dec.Open, want)
		}
	}
}

// panicSender is a sender with a bug.
type panicSender struct{}

func (panicSender) Authenticate(context.Context, *Delivery) error { return nil }
func (panicSender) Parse(*Delivery) (Result, error)               { panic("index out of range") }

func TestIntakeSurvivesAPanickingSender(t *testing.T) {
	senders["test-panic"] = func(ReceiverConfig) (Sender, error) { return panicSender{}, nil }
	t.Cleanup(func() { delete(senders, "test-panic") })
	j := &memJournal{}
	ti := startIntakeWith(t, []ReceiverConfig{{Name: "bug", Type: "test-panic", Secret: "s"}}, j)
	for range 2 {
		r := ti.do(t, "POST", "/hooks/bug", header("Content-Type", "application/json"), []byte(`{}`))
		if r.status != http.StatusInternalServerError {
			t.Fatalf("status %d, want 500 (%v)", r.status, r.body)
		}
	}
	if got := webhooks(t, ti, "bug", "test-panic", "panic"); got != 2 {
		t.Errorf("panic count %v, want 2", got)
	}
}

func TestIntakeNeverLogsSecrets(t *testing.T) {
	ti := startIntake(t, &memJournal{})
	push := fixture(t, "github", "push.json")
	// Right and wrong secrets, in headers and in paths.
	ti.do(t, "POST", "/hooks/gh", githubHeaders("push", "d-1", githubSign(githubSecret, push)), push)
	ti.do(t, "POST", "/hooks/gh", githubHeaders("push", "d-2", githubSign("guess-"+githubSecret, push)), push)
	ti.do(t, "POST", "/hooks/registry", registryHeaders(registrySecret), fixture(t, "distribution", "batch.json"))
	ti.do(t, "POST", "/hooks/registry", registryHeaders("wrong-"+registrySecret), fixture(t, "distribution", "batch.json"))
	ti.do(t, "POST", "/hooks/flagger/"+flaggerToken, header("Content-Type", "application/json"), fixture(t, "flagger", "promoted.json"))
	ti.do(t, "POST", "/hooks/flagger/wrong-"+flaggerToken, header("Content-Type", "application/json"), fixture(t, "flagger", "promoted.json"))
	logs := ti.logs.String()
	if logs == "" {
		t.Fatal("no logs at all")
	}
	for _, secret := range []string{githubSecret, registrySecret, flaggerToken} {
		if strings.Contains(logs, secret) {
			t.Errorf("logs contain the secret %q:\n%s", secret, logs)
		}
	}
}

// A path token may hold any character a secret generator makes: '/', '+'
// and '=' (base64), and '?', '#', '%' escaped. It used to be accepted by the
// config and never authenticate (404).
func TestPathTokenWithURLSpecialCharacters(t *testing.T) {
	secrets := []string{
		"q9X/3vT+k2==",
		"a//b/",
		"what?is#this%25%",
		"sp ace&amp;=;,@:$!'()*",
		"üñï/cødé",
	}
	promoted := fixture(t, "flagger", "promoted.json")
	for _, secret := range secrets {
		t.Run(secret, func(t *testing.T) {
			j := &memJournal{}
			in, err := New([]ReceiverConfig{{Name: "flagger", Type: SenderFlagger, Secret: secret}}, j)
			if err != nil {
				t.Fatal(err)
			}
			// Served as flotilla serves it: hooks are not routed through a
			// ServeMux, whose path cleaning would redirect "a//b".
			srv := httptest.NewServer(in)
			t.Cleanup(srv.Close)
			post := func(path string) int {
				t.Helper()
				req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL+path, bytes.NewReader(promoted))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_ = resp.Body.Close()
				return resp.StatusCode
			}
			if got := post("/hooks/flagger/" + url.PathEscape(secret)); got != http.StatusAccepted {
				t.Errorf("escaped token: status %d, want 202", got)
			}
			if !strings.ContainsAny(secret, "?#%") {
				if got := post("/hooks/flagger/" + secret); got != http.StatusAccepted {
					t.Errorf("token as is: status %d, want 202", got)
				}
			}
			if got := post("/hooks/flagger/" + url.PathEscape(secret+"x")); got != http.StatusUnauthorized {
				t.Errorf("wrong token: status %d, want 401", got)
			}
			if got := len(j.ids()); got != 1 {
				t.Errorf("journaled %d events, want 1", got)
			}
		})
	}
}
