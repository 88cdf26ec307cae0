package intake

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// Refused requests used to take the receiver's rate-limit tokens first:
// 20 with a wrong token locked the real registry out (5 of 5 valid
// deliveries got 429), and registries do not retry.
func TestRefusedDeliveriesDoNotSpendTheRateLimit(t *testing.T) {
	j := &memJournal{}
	// The test clock stands still: no bucket refills.
	ti := startIntakeWith(t, []ReceiverConfig{
		{Name: "registry", Type: SenderDistribution, Secret: registrySecret, RateLimit: RateLimit{PerSecond: 1, Burst: 5}},
		{Name: "gh", Type: SenderGitHub, Secret: githubSecret, RateLimit: RateLimit{PerSecond: 1, Burst: 5}},
	}, j, WithAuthFailureLimit(RateLimit{PerSecond: 1, Burst: 10}))
	batch := fixture(t, "distribution", "batch.json")
	push := fixture(t, "github", "push.json")
	// A flood of wrong credentials, past the refusal budget too,
	// interleaved with the real senders' deliveries.
	valid := 0
	for i := range 40 {
		want := http.StatusUnauthorized
		if i >= 10 {
			want = http.StatusTooManyRequests // the refusal budget, not the senders'
		}
		if r := ti.do(t, "POST", "/hooks/registry", registryHeaders("wrong-"+registrySecret), batch); r.status != want {
			t.Fatalf("wrong token %d: status %d, want %d", i, r.status, want)
		}
		if r := ti.do(t, "POST", "/hooks/gh", githubHeaders("push", fmt.Sprintf("forged-%d", i), githubSign("wrong", push)), push); r.status != want {
			t.Fatalf("wrong signature %d: status %d, want %d", i, r.status, want)
		}
		if i%8 == 0 {
			valid++
			body := bytes.ReplaceAll(batch, []byte(`"id": "`), fmt.Appendf(nil, `"id": "%d-`, i))
			if r := ti.do(t, "POST", "/hooks/registry", registryHeaders(registrySecret), body); r.status != http.StatusAccepted {
				t.Fatalf("valid registry delivery during the flood: status %d (%v)", r.status, r.body)
			}
			if r := ti.do(t, "POST", "/hooks/gh", githubHeaders("push", fmt.Sprintf("real-%d", i), githubSign(githubSecret, push)), push); r.status != http.StatusAccepted {
				t.Fatalf("valid GitHub delivery during the flood: status %d (%v)", r.status, r.body)
			}
		}
	}
	if got := webhooks(t, ti, "registry", SenderDistribution, "accepted"); got != float64(valid) {
		t.Errorf("registry accepted %v, want %d", got, valid)
	}
	if got := webhooks(t, ti, "registry", SenderDistribution, "auth_rate_limited"); got != 30 {
		t.Errorf("auth_rate_limited %v, want 30", got)
	}
}

// readTracker is a request body that records whether it was read.
type readTracker struct{ read atomic.Bool }

func (r *readTracker) Read([]byte) (int, error) {
	r.read.Store(true)
	return 0, io.EOF
}

// The body of a delivery refused for its header or path token is never read
// (it used to be buffered whole first: 2,000 stalled 1 MiB uploads with a
// wrong token took RSS from 63 MB to 4 GB).
func TestHeadCredentialsCheckedBeforeTheBody(t *testing.T) {
	in, err := New([]ReceiverConfig{
		{Name: "registry", Type: SenderDistribution, Secret: registrySecret},
		{Name: "hub", Type: SenderDockerHub, Secret: "hub-token"},
		{Name: "flagger", Type: SenderFlagger, Secret: flaggerToken},
		{Name: "gl", Type: SenderGitLab, Secret: "gl-token"},
		{Name: "gh", Type: SenderGitHub, Secret: githubSecret},
		{Name: "gitea", Type: SenderGitea, Secret: "gitea-secret"},
		{Name: "nexus", Type: SenderNexus, Secret: "nexus-secret", Registry: "nexus.example.com:8082"},
	}, &memJournal{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		path   string
		header http.Header
	}{
		{"wrong header token", "/hooks/registry", registryHeaders("wrong")},
		{"no header token", "/hooks/registry", header("Content-Type", distributionEventsV2)},
		{"wrong path token", "/hooks/hub/wrong", header("Content-Type", "application/json")},
		{"no path token", "/hooks/hub", header("Content-Type", "application/json")},
		{"wrong Flagger path token", "/hooks/flagger/wrong", header("Content-Type", "application/json")},
		{"wrong GitLab token", "/hooks/gl", header("Content-Type", "application/json", "X-Gitlab-Token", "wrong")},
		{"no GitHub signature", "/hooks/gh", header("Content-Type", "application/json", "X-GitHub-Event", "push")},
		{"GitHub signature not sha256=<hex>", "/hooks/gh", githubHeaders("push", "d-1", "sha256=not-hex")},
		{"no Gitea signature", "/hooks/gitea", header("Content-Type", "application/json", "X-Gitea-Event", "push")},
		{"no Nexus signature", "/hooks/nexus", header("Content-Type", "application/json")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := &readTracker{}
			req := httptest.NewRequestWithContext(t.Context(), "POST", tt.path, body)
			req.Header = tt.header
			req.ContentLength = 1 << 20
			rec := httptest.NewRecorder()
			in.ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", rec.Code)
			}
			if body.read.Load() {
				t.Error("the body was read before the delivery was refused")
			}
		})
	}
}

// Bodies read before their delivery is authenticated (senders that sign the
// body) share a bounded budget: past it, a request is answered 503 unread.
func TestBodyBudget(t *testing.T) {
	j := &memJournal{}
	in, err := New([]ReceiverConfig{
		{Name: "gh", Type: SenderGitHub, Secret: githubSecret},
		{Name: "registry", Type: SenderDistribution, Secret: registrySecret},
	}, j, WithBodyBudget(4096))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)

	// A stalled upload holds the whole budget.
	pr, pw := io.Pipe()
	stalled := make(chan int, 1)
	go func() {
		req, _ := http.NewRequestWithContext(context.Background(), "POST", srv.URL+"/hooks/gh", pr)
		req.ContentLength = 4096
		req.Header = githubHeaders("push", "stalled", "sha256=00")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			stalled <- 0
			return
		}
		_ = resp.Body.Close()
		stalled <- resp.StatusCode
	}()
	if _, err := pw.Write([]byte("{")); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		if in.bodies.TryAcquire(1) {
			in.bodies.Release(1)
			return false, nil
		}
		return true, nil
	}); err != nil {
		t.Fatal("the stalled upload never took the budget")
	}

	push := fixture(t, "github", "push.json")
	// post returns the status and Retry-After of a delivery.
	post := func(path string, h http.Header, body []byte) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	status, retry := post("/hooks/gh", githubHeaders("push", "d-busy", githubSign(githubSecret, push)), push)
	if status != http.StatusServiceUnavailable || retry == "" {
		t.Errorf("delivery past the budget: status %d, Retry-After %q: want 503 with Retry-After", status, retry)
	}
	// A sender authenticated by its header does not wait for the budget.
	if status, _ := post("/hooks/registry", registryHeaders(registrySecret), fixture(t, "distribution", "batch.json")); status != http.StatusAccepted {
		t.Errorf("header-authenticated delivery: status %d, want 202", status)
	}
	_ = pw.CloseWithError(io.ErrUnexpectedEOF)
	select {
	case <-stalled:
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled upload was not answered once its body ended")
	}
	// The budget is back.
	if status, _ := post("/hooks/gh", githubHeaders("push", "d-after", githubSign(githubSecret, push)), push); status != http.StatusAccepted {
		t.Errorf("delivery after the stalled upload ended: status %d, want 202", status)
	}
}

// A body that stops arriving is cut off at the body read timeout: 408.
func TestBodyReadTimeout(t *testing.T) {
	in, err := New([]ReceiverConfig{{Name: "gh", Type: SenderGitHub, Secret: githubSecret}}, &memJournal{},
		WithBodyReadTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.Close() })
	go func() { _, _ = pw.Write([]byte(`{"ref":`)) }()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", srv.URL+"/hooks/gh", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 1000
	req.Header = githubHeaders("push", "slow", "sha256=00")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the stalled body was not cut off: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("status %d, want 408", resp.StatusCode)
	}
}

// An event id over the limit (built from a 100 KB delivery id here) is
// refused for good (400, with the limit), not 503 "retry later", and the
// log never holds it whole.
func TestOverlongIDsRefused(t *testing.T) {
	j := &memJournal{}
	ti := startIntake(t, j)
	delivery := strings.Repeat("x", 100<<10)
	push := fixture(t, "github", "push.json")
	r := ti.do(t, "POST", "/hooks/gh", githubHeaders("push", delivery, githubSign(githubSecret, push)), push)
	if r.status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(r.body["error"]), fmt.Sprintf("at most %d", MaxEventIDLen)) {
		t.Errorf("status %d, body %.300v: want 400 naming the limit", r.status, r.body)
	}
	if n := len(j.ids()); n != 0 {
		t.Errorf("journaled %d events", n)
	}
	if len(fmt.Sprint(r.body["error"])) > 1024 {
		t.Errorf("the answer holds the whole id: %d bytes", len(fmt.Sprint(r.body["error"])))
	}
	for _, line := range strings.Split(ti.logs.String(), "\n") {
		if len(line) > 4096 {
			t.Errorf("a log line of %d bytes: %.200s…", len(line), line)
		}
	}
}

// A journal that refuses events for good (they would not read back) gets
// the sender a 400, not an endless retry.
func TestPermanentJournalRefusal(t *testing.T) {
	ti := startIntake(t, journalFunc(func(context.Context, ...cloudevents.Event) (int, error) {
		return 0, fault.Permanent(fmt.Errorf("event %s does not read back", "x"))
	}))
	r := ti.do(t, "POST", "/hooks/registry", registryHeaders(registrySecret), fixture(t, "distribution", "batch.json"))
	if r.status != http.StatusBadRequest {
		t.Errorf("status %d, want 400", r.status)
	}
}

// A flood of refusals makes a bounded number of log lines: the first few of
// each window, then one with the count left out.
func TestRefusalLogsAreSampled(t *testing.T) {
	now := received
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ti := startIntakeWith(t, []ReceiverConfig{{Name: "registry", Type: SenderDistribution, Secret: registrySecret}}, &memJournal{},
		WithIntakeClock(clock), WithAuthFailureLimit(RateLimit{PerSecond: -1}))
	batch := fixture(t, "distribution", "batch.json")
	for range 100 {
		ti.do(t, "POST", "/hooks/registry", registryHeaders("wrong"), batch)
	}
	if n := strings.Count(ti.logs.String(), "webhook not authenticated"); n != logBurst {
		t.Errorf("%d log lines for 100 refusals, want %d", n, logBurst)
	}
	mu.Lock()
	now = now.Add(logWindow)
	mu.Unlock()
	ti.do(t, "POST", "/hooks/registry", registryHeaders("wrong"), batch)
	if !strings.Contains(ti.logs.String(), `"suppressed":95`) {
		t.Errorf("no line counting the 95 refusals left out:\n%s", ti.logs.String())
	}
	if got := webhooks(t, ti, "registry", SenderDistribution, "unauthenticated"); got != 101 {
		t.Errorf("metrics counted %v refusals, want 101", got)
	}
}
