package features

// The limit on failed API tokens shared by the replicas of scale-out mode
// (#31, pkg/api/failures.go): a client address that sends unknown tokens
// to one replica, then another, spends one limit; every replica refuses it
// 429 from then on, each having read the bucket from the NATS KV. The
// steps send to each replica directly (not through the scenario's
// Service) and read what each answers, and the bucket in the NATS KV.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/cucumber/godog"

	"github.com/flotilla-cd/flotilla/pkg/api"
)

// failureLimit is what the steps of the shared limit keep.
type failureLimit struct {
	// sent are the statuses each replica (0-based) answered the bad
	// client's unknown tokens with, in order; first is when the first
	// was sent.
	sent  map[int][]int
	first time.Time
	// retryAfter is the Retry-After of the last 429, limitedUntil when
	// it ends, and limitedBy the replica (1-based) that gave it.
	retryAfter   time.Duration
	limitedUntil time.Time
	limitedBy    int
}

func (s *scenario) registerFailureLimitSteps(sc *godog.ScenarioContext) {
	sc.Step(`^flotilla takes the client's address from X-Forwarded-For when the peer is 127\.0\.0\.1 \(server\.trustedProxies\)$`, s.trustLoopbackProxy)
	sc.Step(`^a client at "([^"]*)" sends (\d+) unknown API tokens to replica (\d+)$`, s.sendUnknownTokens)
	sc.Step(`^the client at "([^"]*)" sends unknown API tokens to replica (\d+) until one is refused with 429$`, s.sendUnknownUntil429)
	sc.Step(`^replica (\d+) refused its (\d+) with 401, and replica (\d+) refused (\d+) with 401 before its 429 with Retry-After: the limit of (\d+) spent over both$`, s.limitSpentOverBoth)
	sc.Step(`^the NATS KV bucket every replica reads holds the limit of "([^"]*)" spent$`, s.failureBucketSpent)
	sc.Step(`^replica (\d+), which "([^"]*)" never reached, refuses even the API token from it with 429 and Retry-After within (\d+) seconds?$`, s.untouchedReplicaRefuses)
	sc.Step(`^the API token from a client at "([^"]*)" reads the rollouts on every replica$`, s.tokenReadsFromAddr)
	sc.Step(`^the Retry-After replica 2 gave has passed$`, s.retryAfterPassed)
	sc.Step(`^the API token from "([^"]*)" reads the rollouts on every replica again$`, s.tokenReadsFromAddr)
}

var failureLimits sync.Map // *world -> *failureLimit

func (s *scenario) failures() *failureLimit {
	v, loaded := failureLimits.LoadOrStore(s.w, &failureLimit{sent: map[int][]int{}})
	if !loaded {
		w := s.w
		s.onCleanup(func() { failureLimits.Delete(w) })
	}
	return v.(*failureLimit)
}

func b64url(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func (s *scenario) trustLoopbackProxy() error {
	if s.w == nil {
		return errors.New("no scenario world: a registry step must come first")
	}
	s.w.configEdits = append(s.w.configEdits, func(cfg map[string]any) error {
		cfg["server"].(map[string]any)["trustedProxies"] = []string{"127.0.0.1"}
		return nil
	})
	return nil
}

// replicaCall sends one request to replica n (1-based) itself, as from a
// client at addr behind the trusted proxy, with the bearer token.
func (s *scenario) replicaCall(ctx context.Context, n int, addr, token string) (answer, error) {
	if !s.scaleOut || n < 1 || n > len(s.w.flotilla.replicas) {
		return answer{}, fmt.Errorf("no replica %d: the scenario runs %d (tag it @scale-out)", n, len(s.w.flotilla.replicas))
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.w.flotilla.replicas[n-1].url()+"/api/v1/rollouts", nil)
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Forwarded-For", addr)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("replica %d: %w", n, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}, err
}

// sendUnknown sends one unknown token to replica n from addr and keeps
// what it answered.
func (s *scenario) sendUnknown(ctx context.Context, n int, addr string) (answer, error) {
	f := s.failures()
	if f.first.IsZero() {
		f.first = time.Now()
	}
	a, err := s.replicaCall(ctx, n, addr, "unknown-"+randomHex(8))
	if err != nil {
		return a, err
	}
	f.sent[n-1] = append(f.sent[n-1], a.status)
	if a.status == http.StatusTooManyRequests {
		secs, err := strconv.Atoi(a.header.Get("Retry-After"))
		if err != nil || secs < 1 {
			return a, fmt.Errorf("replica %d answered 429 with Retry-After %q, want a number of seconds", n, a.header.Get("Retry-After"))
		}
		// Retry-After is rounded up to whole seconds: the limit may end
		// up to a second before it says.
		f.retryAfter, f.limitedUntil, f.limitedBy = time.Duration(secs)*time.Second, time.Now().Add(time.Duration(secs-1)*time.Second), n
	}
	return a, nil
}

func (s *scenario) sendUnknownTokens(ctx context.Context, addr string, count, n int) error {
	for range count {
		if _, err := s.sendUnknown(ctx, n, addr); err != nil {
			return err
		}
	}
	return nil
}

// sendUnknownUntil429 stops at the first 429, or after 20 tokens: a
// limit of each replica's own would answer 429 only at the 11th token
// this replica saw.
func (s *scenario) sendUnknownUntil429(ctx context.Context, addr string, n int) error {
	for range 20 {
		a, err := s.sendUnknown(ctx, n, addr)
		if err != nil {
			return err
		}
		if a.status == http.StatusTooManyRequests {
			return nil
		}
	}
	return fmt.Errorf("replica %d answered %v to 20 unknown tokens from %s, no 429", n, s.failures().sent[n-1], addr)
}

// limitSpentOverBoth reads the answers: a then b 401s, then b's 429. A
// bucket refills one token every api.DefaultBearerFailureEvery: a run
// slower than that may see one 401 more per such period.
func (s *scenario) limitSpentOverBoth(ra, na, rb, nb, limit int) error {
	f := s.failures()
	if limit != api.DefaultBearerFailureBurst {
		return fmt.Errorf("the scenario says a limit of %d, flotilla's is %d", limit, api.DefaultBearerFailureBurst)
	}
	count := func(statuses []int, status int) int {
		n := 0
		for _, st := range statuses {
			if st == status {
				n++
			}
		}
		return n
	}
	a, b := f.sent[ra-1], f.sent[rb-1]
	if len(a) != na || count(a, http.StatusUnauthorized) != na {
		return fmt.Errorf("replica %d answered %v, want %d times 401", ra, a, na)
	}
	refill := int(time.Since(f.first) / api.DefaultBearerFailureEvery)
	if len(b) == 0 || b[len(b)-1] != http.StatusTooManyRequests {
		return fmt.Errorf("replica %d answered %v, want 429 last", rb, b)
	}
	got := count(b[:len(b)-1], http.StatusUnauthorized)
	if got != len(b)-1 || got < nb || got > nb+refill {
		return fmt.Errorf("replica %d answered %v: %d times 401 before its 429, want %d (up to %d more, the bucket refilling over %s): "+
			"a limit of each replica's own answers 429 only at its own 11th", rb, b, got, nb, refill, time.Since(f.first).Round(time.Millisecond))
	}
	if f.retryAfter > api.DefaultBearerFailureEvery {
		return fmt.Errorf("Retry-After is %s, more than one token's refill (%s)", f.retryAfter, api.DefaultBearerFailureEvery)
	}
	return nil
}

// failureBucketSpent reads the address's bucket from the documents'
// bucket of the scenario's NATS KV (pkg/state/natskv's Docs: key
// "<collection>.<key>", each base64url): fewer than one token left.
func (s *scenario) failureBucketSpent(ctx context.Context, addr string) error {
	if !s.scaleOut {
		return errors.New("the shared limit lives in the NATS KV: tag the scenario @scale-out")
	}
	key := b64url(api.BearerFailureCollection) + "." + b64url(addr)
	value, err := readNATS(ctx, func(ctx context.Context) ([]byte, error) { return s.readDoc(ctx, key) })
	if err != nil {
		return fmt.Errorf("the limit of %s (%s) in the NATS KV: %w", addr, key, err)
	}
	var doc struct {
		Addr   string    `json:"addr"`
		Tokens float64   `json:"tokens"`
		At     time.Time `json:"at"`
	}
	if err := json.Unmarshal(value, &doc); err != nil {
		return fmt.Errorf("the limit of %s: %w: %s", addr, err, value)
	}
	if doc.Addr != addr || doc.Tokens >= 1 || doc.At.Before(s.failures().first) {
		return fmt.Errorf("the NATS KV holds the limit %s of %s, want %s's with fewer than 1 token left, written since the first failure", value, key, addr)
	}
	return nil
}

// readDoc is one read of the document key from the documents' bucket of
// the scenario's NATS KV.
func (s *scenario) readDoc(ctx context.Context, key string) ([]byte, error) {
	kv, done, err := s.bucket(ctx, "docs")
	if err != nil {
		return nil, err
	}
	defer done()
	e, err := kv.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return e.Value(), nil
}

// untouchedReplicaRefuses asks replica n with the good token from addr:
// n learnt the bucket only from its watch of the NATS KV.
func (s *scenario) untouchedReplicaRefuses(ctx context.Context, n int, addr string, within int) error {
	f := s.failures()
	if len(f.sent[n-1]) > 0 {
		return fmt.Errorf("replica %d was sent unknown tokens: %v", n, f.sent[n-1])
	}
	if f.limitedBy == 0 {
		return errors.New("no replica answered 429 with Retry-After")
	}
	// The limit ends with its Retry-After (one token refilled): a machine
	// so loaded that the steps since took longer sees this replica rightly
	// answer 200. Then the limit is spent again where it was, and this
	// replica asked again, a few times.
	deadline, respent := time.Now().Add(time.Duration(within)*time.Second), 0
	for {
		a, err := s.replicaCall(ctx, n, addr, s.w.apiToken)
		if err != nil {
			return err
		}
		if a.status == http.StatusTooManyRequests && a.header.Get("Retry-After") != "" {
			return nil
		}
		if a.status == http.StatusOK && time.Now().After(f.limitedUntil) && respent < 3 {
			respent++
			if err := s.sendUnknownUntil429(ctx, addr, f.limitedBy); err != nil {
				return err
			}
			deadline = time.Now().Add(time.Duration(within) * time.Second)
			continue
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %d answered the API token from %s %d %.200s (Retry-After %q), want 429 with Retry-After: it does not read the limit the others spent",
				n, addr, a.status, a.body, a.header.Get("Retry-After"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tokenReadsFromAddr asks every replica with the API token from addr,
// each until it answers 200 or for 5 s: a replica reading the state while
// its NATS stream elects a leader answers 503, and is asked again.
func (s *scenario) tokenReadsFromAddr(ctx context.Context, addr string) error {
	for n := 1; n <= len(s.w.flotilla.replicas); n++ {
		deadline := time.Now().Add(5 * time.Second)
		for {
			a, err := s.replicaCall(ctx, n, addr, s.w.apiToken)
			if err != nil {
				return err
			}
			if a.status == http.StatusOK {
				break
			}
			if a.status == http.StatusTooManyRequests || time.Now().After(deadline) {
				return fmt.Errorf("replica %d answered the API token from %s %d %.300s (Retry-After %q), want 200", n, addr, a.status, a.body, a.header.Get("Retry-After"))
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	return nil
}

func (s *scenario) retryAfterPassed(ctx context.Context) error {
	wait := s.failures().retryAfter
	if wait == 0 {
		return errors.New("no replica answered 429 with Retry-After")
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait + 200*time.Millisecond):
		return nil
	}
}
