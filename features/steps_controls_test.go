package features

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/cucumber/godog"
)

func (s *scenario) registerControlSteps(sc *godog.ScenarioContext) {
	sc.Step("^`flotilla (pause|resume|abort|override|rollback)` is run for the rollout of \"([^\"]*)\"$", s.controlRollout)
	sc.Step(`^the rollback of "([^"]*)" ends "([^"]*)"$`, s.rollbackEnds)
	sc.Step(`^wave (\d+) is frozen for the next (\d+) (seconds|minutes)$`, s.freezeWave)
	sc.Step("^`flotilla quarantine` is run for version \"([^\"]*)\"$", s.quarantineVersion)
	sc.Step("^`flotilla get rollouts --watch` shows wave (\\d+) of the rollout of \"([^\"]*)\" with cluster \"([^\"]*)\" \"([^\"]*)\", waiting for the freeze window \"([^\"]*)\"$", s.watchShows)
	sc.Step(`^the rollout of "([^"]*)" waits for the freeze window "([^"]*)"$`, s.waitsForFreeze)
	sc.Step(`^the rollout of "([^"]*)" records an override of wave (\d+)$`, s.overrideRecorded)
	sc.Step("^`flotilla fleet (stop|start)` is run$", s.controlFleet)
	sc.Step(`^cluster "([^"]*)" of the rollout of "([^"]*)" has (succeeded|failed)$`, s.clusterEnded)
	sc.Step("^`flotilla retry --cluster ([^`]*)` is run for the rollout of \"([^\"]*)\"$", s.retryCluster)
	sc.Step(`^no cluster of wave (\d+) of the rollout of "([^"]*)" starts for (\d+) seconds$`, s.waveHeld)
	sc.Step(`^no cluster takes the rollouts of "([^"]*)" for (\d+) seconds$`, s.rolloutsHeld)
	sc.Step(`^wave (\d+) needs the approvals of "([^"]*)"$`, s.waveNeedsApprovals)
	sc.Step(`^"([^"]*)" approves wave (\d+) of the rollout of "([^"]*)"$`, s.approveWave)
	sc.Step(`^the rollout of "([^"]*)" records the approvals of "([^"]*)" for wave (\d+)$`, s.approvalsRecorded)
	s.registerClusterWatchSteps(sc)
}

// waveNeedsApprovals makes wave need as many approvals as names, and gives
// each name an API token.
func (s *scenario) waveNeedsApprovals(wave int, names string) error {
	list := strings.Split(names, ",")
	s.wavePolicy(wave, "approvals", len(list))
	if s.w.approverTokens == nil {
		s.w.approverTokens = map[string]string{}
	}
	for _, n := range list {
		s.w.approverTokens[n] = randomHex(16)
	}
	return nil
}

func (s *scenario) approveWave(ctx context.Context, who string, wave int, version string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	s.released(time.Now()) // the last approval releases the wave
	out, err := s.flotillaCLI(ctx, "approve", id, "--wave", fmt.Sprint(wave), "--token", s.w.approverTokens[who], "--reason", "features")
	if err != nil {
		return err
	}
	if !strings.Contains(out, fmt.Sprintf("wave %d approved by %s", wave, who)) {
		return fmt.Errorf("flotilla approve --wave printed %q", out)
	}
	return nil
}

func (s *scenario) approvalsRecorded(ctx context.Context, version, names string, wave int) error {
	var ro struct {
		Waves []struct{ Approvers []string }
	}
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
		return err
	}
	if got := strings.Join(ro.Waves[wave-1].Approvers, ","); got != names {
		return fmt.Errorf("wave %d of the rollout of %s was approved by %q, want %q", wave, version, got, names)
	}
	return nil
}

func (s *scenario) controlRollout(ctx context.Context, action, version string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	if action == "resume" || action == "override" {
		s.released(time.Now())
	}
	out, err := s.flotillaCLI(ctx, action, id, "--token", s.w.apiToken, "--reason", "features")
	if err != nil {
		return err
	}
	if !strings.Contains(out, action+" requested by default") {
		return fmt.Errorf("flotilla %s printed %q", action, out)
	}
	return nil
}

func (s *scenario) controlFleet(ctx context.Context, action string) error {
	if action == "start" {
		s.released(time.Now())
	}
	out, err := s.flotillaCLI(ctx, "fleet", action, "--token", s.w.apiToken, "--reason", "features")
	if err != nil {
		return err
	}
	if !strings.Contains(out, "fleet: "+action+" requested by default") {
		return fmt.Errorf("flotilla fleet %s printed %q", action, out)
	}
	if action == "stop" {
		// The stop is journaled; wait until flotilla has taken it.
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			var st struct{ Stopped bool }
			if err := s.getJSON(ctx, "/api/v1/fleet", &st); err != nil {
				return err
			}
			if st.Stopped {
				return nil
			}
			time.Sleep(100 * time.Millisecond)
		}
		return fmt.Errorf("the fleet is not stopped 30 s after flotilla fleet stop")
	}
	return nil
}

func (s *scenario) clusterEnded(ctx context.Context, cluster, version, outcome string) error {
	want := map[string]string{"succeeded": "Succeeded", "failed": "Failed"}[outcome]
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		ro, err := s.apiRollout(ctx, version)
		if err != nil {
			return err
		}
		for _, w := range ro.Waves {
			for _, c := range w.Clusters {
				if c.Name == cluster && c.Phase == want {
					return nil
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("cluster %s of the rollout of %s has not %s within 2 minutes", cluster, version, outcome)
}

// retryCluster runs `flotilla retry ROLLOUT --cluster C`.
func (s *scenario) retryCluster(ctx context.Context, cluster, version string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	out, err := s.flotillaCLI(ctx, "retry", id, "--cluster", cluster, "--token", s.w.apiToken)
	if err != nil {
		return err
	}
	if !strings.Contains(out, fmt.Sprintf("retry 1 requested: the failed clusters [%s]", cluster)) {
		return fmt.Errorf("flotilla retry printed %q", out)
	}
	return nil
}

// held checks, for the whole time, that flotilla's API lists the clusters
// of the rollout of version that pick selects as Pending, and, when a step
// watched clusters, that none of them changed so far (the API alone would
// pass a launch that applies a held wave while it reports Pending).
func (s *scenario) held(ctx context.Context, versions []string, seconds int, pick func(wave int) bool) (err error) {
	if cw := s.w.watch; cw != nil && !cw.started.IsZero() {
		defer func() {
			if err == nil {
				cw.mu.Lock()
				names := strings.Join(cw.clusters, ",")
				cw.mu.Unlock()
				err = s.unchanged(names, time.Now())
			}
		}()
	}
	end := time.Now().Add(time.Duration(seconds) * time.Second)
	for time.Now().Before(end) {
		for _, v := range versions {
			ro, err := s.apiRollout(ctx, v)
			if err != nil {
				return err
			}
			for i, w := range ro.Waves {
				for _, c := range w.Clusters {
					if pick(i) && c.Phase != "Pending" {
						return fmt.Errorf("cluster %s of the rollout of %s is %s, want it held (Pending)", c.Name, v, c.Phase)
					}
				}
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return nil
}

func (s *scenario) waveHeld(ctx context.Context, wave int, version string, seconds int) error {
	return s.held(ctx, []string{version}, seconds, func(i int) bool { return i == wave-1 })
}

func (s *scenario) rolloutsHeld(ctx context.Context, versions string, seconds int) error {
	return s.held(ctx, strings.Split(versions, ","), seconds, func(int) bool { return true })
}

// freezeWave gives wave a freeze window from now on: an RFC 5545 rule
// with one occurrence, starting a second ago.
func (s *scenario) freezeWave(wave, n int, unit string) error {
	d := time.Duration(n) * time.Second
	if unit == "minutes" {
		d = time.Duration(n) * time.Minute
	}
	start := time.Now().UTC().Add(-time.Second).Truncate(time.Second)
	// The window's end releases the wave (flotilla's timer fires then).
	s.released(start.Add(d))
	s.wavePolicy(wave, "freezeWindows", []map[string]any{{
		"name": "features-freeze", "rrule": "DTSTART:" + start.Format("20060102T150405Z") + "\nRRULE:FREQ=YEARLY;COUNT=1", "duration": d.String(),
	}})
	return nil
}

func (s *scenario) waitsForFreeze(ctx context.Context, version, window string) error {
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		var ro struct{ Waiting string }
		id, err := s.rolloutID(ctx, version)
		if err != nil {
			return err
		}
		if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
			return err
		}
		if strings.Contains(ro.Waiting, fmt.Sprintf("freeze window %q until", window)) {
			return nil
		}
		last = ro.Waiting
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the rollout of %s does not wait for the freeze window %s (waiting: %q)", version, window, last)
}

func (s *scenario) overrideRecorded(ctx context.Context, version string, wave int) error {
	var ro struct {
		Waves []struct{ FreezeOverride string }
	}
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
		return err
	}
	if got := ro.Waves[wave-1].FreezeOverride; !strings.Contains(got, "default") || !strings.Contains(got, "features") {
		return fmt.Errorf("wave %d's override is %q, want who and why", wave, got)
	}
	return nil
}

// watchShows runs `flotilla get rollouts --watch` until it has redrawn the
// list a few times, and looks for the rollout's waves x clusters and what
// it waits for.
func (s *scenario) watchShows(ctx context.Context, wave int, version, cluster, phase, window string) error {
	waiting := fmt.Sprintf("freeze window %q", window)
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	// A loaded machine may take seconds to start the command: wait for its
	// redraws rather than for a fixed time.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(wctx, flotillaBin, "get", "rollouts", "--watch", "--interval", "500ms", "--server", s.w.flotilla.url())
	cmd.Env = s.cliEnv()
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	for wctx.Err() == nil && strings.Count(stdout.String(), "--- ") < 3 {
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	_ = cmd.Wait() // ended by the interrupt
	out := stdout.String()
	if strings.Count(out, "--- ") < 2 {
		return fmt.Errorf("--watch redrew %d times in 30 s at --interval 500ms, want several: %s %s", strings.Count(out, "--- "), out, stderr.String())
	}
	var waveLine bool
	for line := range strings.Lines(out) {
		// WAVE ("*2 prod"), CLUSTER, STATE, ...
		if f := strings.Fields(line); len(f) >= 4 && strings.TrimPrefix(f[0], "*") == fmt.Sprint(wave) && f[2] == cluster && f[3] == phase {
			waveLine = true
		}
	}
	if !waveLine || !strings.Contains(out, id) || !strings.Contains(out, "waiting: "+waiting) {
		return fmt.Errorf("--watch output lacks %s's wave %d with %s %s, waiting for %q:\n%s", id, wave, cluster, phase, waiting, out)
	}
	return nil
}

// lockedBuffer is a bytes.Buffer a command writes while a step reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (s *scenario) quarantineVersion(ctx context.Context, version string) error {
	out, err := s.flotillaCLI(ctx, "quarantine", s.w.app, version, "--token", s.w.apiToken, "--reason", "features")
	if err != nil {
		return err
	}
	if !strings.Contains(out, "quarantine requested by default") {
		return fmt.Errorf("flotilla quarantine printed %q", out)
	}
	return nil
}

// rollbackEnds waits until the rollback of the rollout of version (the
// rollout "rollback-<id>") is in phase.
func (s *scenario) rollbackEnds(ctx context.Context, version, phase string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(3 * time.Minute)
	var last struct{ Phase, Reason string }
	for time.Now().Before(deadline) {
		if err := s.getJSON(ctx, "/api/v1/rollouts/rollback-"+id, &last); err == nil && last.Phase == phase {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("the rollback of %s is %s (%q), want %s", version, last.Phase, last.Reason, phase)
}
