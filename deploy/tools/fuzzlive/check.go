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
	"github.com/flotilla-cd/flotilla/events/intake"
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

// sentinel proves that the engine works and has got past everything
// journaled before: it pushes a new image of application app to the
// registry, posts that push to /events as a valid CloudEvent (journaled
// after every delivery the fuzzer had an answer for), waits until the
// rollout plan makes of it is in the API (verify resolved the tag at the
// registry, plan started the rollout), then until no event is in flight.
// The dispatcher reads the journal in order (it runs the events of
// different keys in parallel, but reads them one after another), so once
// it has handled the push every earlier event was read, and once nothing
// read is in flight in the functions' lane
// (flotilla_dispatch_events_in_flight{lane="functions"} 0) every earlier
// event was handled: pipeline runs, in their own lane, may go on until
// their deadline (the lab's clusters answer nothing). A tree older than the dispatcher has no such gauge:
// its runtime handled events one at a time in journal order, so the
// rollout alone says as much.
func sentinel(ctx context.Context, f *flotilla, reg *sentinelRegistry, rc receiver, app string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(timeout)
	digest, err := postSentinel(ctx, f, reg, rc, app)
	if err != nil {
		return 0, err
	}
	rolledOut := func() (bool, error) {
		ro, err := findRollout(ctx, f, app, digest)
		return ro != nil, err
	}
	if err := waitFor(ctx, f, deadline, "a rollout of "+app, rolledOut); err != nil {
		return 0, err
	}
	logf("the rollout of %s is in the API %s after its push", app, time.Since(start).Round(time.Millisecond))
	drained := func() (bool, error) {
		m, err := f.metrics(ctx)
		if err != nil {
			return false, err
		}
		n, ok := m[inFlightMetric+`{lane="functions"}`]
		if !ok {
			// A tree before dispatch lanes had one gauge.
			n, ok = m[inFlightMetric]
		}
		return !ok || n == 0, nil
	}
	if err := waitFor(ctx, f, deadline, "no event in flight ("+inFlightMetric+" 0)", drained); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// inFlightMetric is the dispatcher's gauge of events read and not handled.
const inFlightMetric = "flotilla_dispatch_events_in_flight"

// postSentinel pushes an image of app and posts that push to /events; it
// returns the image's digest.
func postSentinel(ctx context.Context, f *flotilla, reg *sentinelRegistry, rc receiver, app string) (string, error) {
	const tag = "1.0.0"
	repo := "fuzzlive/" + app
	digest, err := reg.push(ctx, repo, tag)
	if err != nil {
		return "", err
	}
	data, err := json.Marshal(events.ImagePushed{Registry: reg.host(), Repository: repo, Tag: tag, Digest: digest, Sender: "fuzzlive"})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url(intake.EventsPath), bytes.NewReader(data))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Ce-Specversion", "1.0")
	req.Header.Set("Ce-Id", app+"-"+digest)
	req.Header.Set("Ce-Source", "/fuzzlive/sentinel")
	req.Header.Set("Ce-Type", events.TypeImagePushed)
	req.Header.Set("Ce-Time", time.Now().UTC().Format(time.RFC3339Nano))
	req.Header.Set("Authorization", "Bearer "+rc.creds.secret)
	resp, err := f.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("posting the sentinel push of %s: %w", app, err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("posting the sentinel push of %s: %s %s", app, resp.Status, bytes.TrimSpace(body))
	}
	return digest, nil
}

// waitFor polls cond until it holds, flotilla dies or deadline passes;
// what says what it waits for. Every ten seconds it logs the dispatcher's
// progress.
func waitFor(ctx context.Context, f *flotilla, deadline time.Time, what string, cond func() (bool, error)) error {
	lastReport := time.Now()
	for {
		if !f.alive() {
			return fmt.Errorf("%w while waiting for %s (%s)", errDied, what, f.exit())
		}
		ok, err := cond()
		if err == nil && ok {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("still no %s at the deadline%s: the engine is stuck or stopped (last error: %w)", what, progress(ctx, f), err)
			}
			return fmt.Errorf("still no %s at the deadline%s: the engine is stuck or stopped", what, progress(ctx, f))
		}
		if time.Since(lastReport) > 10*time.Second {
			lastReport = time.Now()
			logf("waiting for %s%s", what, progress(ctx, f))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// progress says how far the dispatcher is, from /metrics.
func progress(ctx context.Context, f *flotilla) string {
	m, err := f.metrics(ctx)
	if err != nil {
		return ""
	}
	return fmt.Sprintf(" (journal %0.f events, %0.f read by the dispatcher, %0.f in flight)",
		m.sum("flotilla_journal_events_total"), m.sum("flotilla_events_processed_total"), m.sum(inFlightMetric))
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
