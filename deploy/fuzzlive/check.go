package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// errDied is wrapped by the error of a check during which flotilla exited.
var errDied = errors.New("flotilla exited")

// checkAlive fails when flotilla is not running or /healthz is not 200.
func checkAlive(ctx context.Context, f *flotilla) error {
	if !f.alive() {
		return fmt.Errorf("%w (%s)", errDied, f.exit())
	}
	status, body, err := f.healthz(ctx)
	if err != nil {
		return fmt.Errorf("GET /healthz: %w", err)
	}
	if status != http.StatusOK {
		return fmt.Errorf("GET /healthz: %d %s", status, body)
	}
	return nil
}

// sentinel proves the runtime works and has got past everything journaled
// before: it pushes a new image of application app to the registry, posts
// that push to /events as a valid CloudEvent, and waits until the rollout
// plan makes of it is in the API. The runtime hands events to the functions
// in journal order, one after another, and the push is journaled after
// every delivery the fuzzer had got an answer for, so its rollout means
// the runtime has processed all of them (verify resolved the tag at the
// registry, plan started the rollout).
func sentinel(ctx context.Context, f *flotilla, reg *sentinelRegistry, rc receiver, app string, timeout time.Duration) (time.Duration, error) {
	const tag = "1.0.0"
	repo := "fuzzlive/" + app
	digest, err := reg.push(ctx, repo, tag)
	if err != nil {
		return 0, err
	}
	data, err := json.Marshal(events.ImagePushed{Registry: reg.host(), Repository: repo, Tag: tag, Digest: digest, Sender: "fuzzlive"})
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url(events.EventsPath), bytes.NewReader(data))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Ce-Specversion", "1.0")
	req.Header.Set("Ce-Id", app+"-"+digest)
	req.Header.Set("Ce-Source", "/fuzzlive/sentinel")
	req.Header.Set("Ce-Type", events.TypeImagePushed)
	req.Header.Set("Ce-Time", time.Now().UTC().Format(time.RFC3339Nano))
	req.Header.Set("Authorization", "Bearer "+rc.creds.secret)
	start := time.Now()
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("posting the sentinel push of %s: %w", app, err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return 0, fmt.Errorf("posting the sentinel push of %s: %s %s", app, resp.Status, bytes.TrimSpace(body))
	}
	deadline := time.Now().Add(timeout)
	lastReport := time.Now()
	for {
		if !f.alive() {
			return 0, fmt.Errorf("%w while the runtime worked towards the sentinel push of %s (%s)", errDied, app, f.exit())
		}
		ro, err := findRollout(ctx, f, app, digest)
		if err == nil && ro != nil {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			backlog := ""
			if m, err := f.metrics(ctx); err == nil {
				backlog = fmt.Sprintf(" (journal %0.f events, runtime processed %0.f)",
					m.sum("flotilla_journal_events_total"), m.sum("flotilla_events_processed_total"))
			}
			return 0, fmt.Errorf("no rollout of %s %s within %s of its push%s: the runtime is stuck or stopped", app, tag, timeout, backlog)
		}
		if time.Since(lastReport) > 10*time.Second {
			lastReport = time.Now()
			if m, err := f.metrics(ctx); err == nil {
				logf("waiting for the rollout of %s: journal %0.f events, runtime processed %0.f", app,
					m.sum("flotilla_journal_events_total"), m.sum("flotilla_events_processed_total"))
			}
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// findRollout returns the rollout of app with digest, or nil.
func findRollout(ctx context.Context, f *flotilla, app, digest string) (*rollout.Rollout, error) {
	status, b, err := f.get(ctx, "/api/v1/rollouts", 10*time.Second)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /api/v1/rollouts: %d %s", status, bytes.TrimSpace(b))
	}
	var ros []rollout.Rollout
	if err := json.Unmarshal(b, &ros); err != nil {
		return nil, fmt.Errorf("decoding rollouts: %w", err)
	}
	for i := range ros {
		if ros[i].Application == app && ros[i].Digest == digest {
			return &ros[i], nil
		}
	}
	return nil, nil
}
