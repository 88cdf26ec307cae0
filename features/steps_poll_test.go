package features

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/events"
)

func (s *scenario) registerPollSteps(sc *godog.ScenarioContext) {
	sc.Step(`^flotilla polls the applications' registries every "([^"]*)"$`, s.pollEvery)
	sc.Step(`^version "([^"]*)" is pushed without its registry notification$`, s.pushWithoutNotification)
	sc.Step(`^version "([^"]*)" built (\d+) minutes ago is pushed without its registry notification$`, s.pushBuiltWithoutNotification)
	sc.Step(`^the rollout of "([^"]*)" starts within (\d+) seconds$`, s.rolloutStartsWithin)
	sc.Step("^`flotilla describe rollout` of \"([^\"]*)\" says it came from a \"([^\"]*)\"$", s.describeSaysSource)
	sc.Step(`^the API says the rollout of "([^"]*)" came from a "([^"]*)"$`, s.apiSaysSource)
	sc.Step(`^flotilla counted the version found by polling$`, s.countedPollFound)
	sc.Step(`^flotilla has polled the registry (\d+) more times and found nothing new$`, s.polledNothingNew)
	sc.Step("^`flotilla refresh ([^`]*)` is run$", s.refreshRun)
	sc.Step(`^it answers that it found version "([^"]*)" and fed it in$`, s.refreshFound)
	sc.Step(`^a push without its webhook changes "([^"]*)" to "([^"]*)" in "([^"]*)"$`, s.pushValueWithoutWebhook)
	sc.Step(`^the API says the rollout of that commit came from a "([^"]*)"$`, s.apiSaysCommitSource)
	sc.Step(`^the registry's tag list answers 503$`, s.tagListFails)
	sc.Step(`^the registry's tag list answers again$`, s.tagListAnswers)
	sc.Step(`^flotilla's failed polls back off: between (\d+) and (\d+) in (\d+) seconds$`, s.failedPollsBackOff)
	sc.Step("^`flotilla refresh ([^`]*)` fails with 502, naming the registry's answer$", s.refreshFails)
	sc.Step(`^version "([^"]*)" is built again and pushed without its registry notification$`, s.rebuildWithoutNotification)
	sc.Step(`^the rollout of the rebuilt "([^"]*)" starts within (\d+) seconds, from a "([^"]*)"$`, s.rebuiltStartsWithin)
	sc.Step(`^exactly (\d+) rollouts? of the rebuilt "([^"]*)" (?:was|were) started$`, s.rebuiltRollouts)
}

// tagLists fails the registry's tag lists (GET /v2/<name>/tags/list) with
// 503 while failing is set; the rest of the registry answers.
type tagLists struct {
	next    http.Handler
	failing atomic.Bool
}

func (t *tagLists) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if t.failing.Load() && strings.HasSuffix(r.URL.Path, "/tags/list") {
		http.Error(w, `{"errors":[{"code":"UNAVAILABLE","message":"tag lists are down"}]}`, http.StatusServiceUnavailable)
		return
	}
	t.next.ServeHTTP(w, r)
}

// tagListFails puts the failing tag lists in front of the scenario's
// registry, before anything asks it.
func (s *scenario) tagListFails() error {
	t := &tagLists{next: s.w.registry.Config.Handler}
	t.failing.Store(true)
	s.w.registry.Config.Handler = t
	return nil
}

func (s *scenario) tagListAnswers() error {
	t, ok := s.w.registry.Config.Handler.(*tagLists)
	if !ok {
		return fmt.Errorf("the registry's tag list was not made to fail")
	}
	t.failing.Store(false)
	return nil
}

// failedPollsBackOff counts the polls that failed during a window: with
// the interval doubling per failure, fewer than one per interval, but some.
func (s *scenario) failedPollsBackOff(ctx context.Context, least, most, seconds int) error {
	before, _, err := s.pollMetrics(ctx)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(seconds) * time.Second):
	}
	after, _, err := s.pollMetrics(ctx)
	if err != nil {
		return err
	}
	n := int(after["error"] - before["error"])
	if n < least || n > most {
		return fmt.Errorf("%d polls failed in %d s (polls %v), want between %d and %d", n, seconds, after, least, most)
	}
	if after["found"] != before["found"] {
		return fmt.Errorf("a poll found a version while the tag list failed: %v", after)
	}
	return nil
}

func (s *scenario) refreshFails(ctx context.Context, app string) error {
	out, err := s.flotillaCLI(ctx, "refresh", app, "--token", s.w.apiToken)
	if err == nil {
		return fmt.Errorf("flotilla refresh succeeded against a failing registry: %s", out)
	}
	if !strings.Contains(err.Error(), "UNAVAILABLE: tag lists are down") {
		return fmt.Errorf("flotilla refresh failed without naming the registry's answer: %w", err)
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+s.w.apiToken)
	status, err := s.post(ctx, "/api/v1/applications/"+app+"/refresh", h, nil)
	if err != nil {
		return err
	}
	if status != http.StatusBadGateway {
		return fmt.Errorf("POST /api/v1/applications/%s/refresh answered %d, want 502", app, status)
	}
	return nil
}

// pollEvery sets fleet.poll.interval of the flotilla the scenario starts.
func (s *scenario) pollEvery(interval string) error {
	s.w.pollInterval = interval
	return nil
}

// pushWithoutNotification pushes version to the registry and drops its
// notification, as a lost webhook.
func (s *scenario) pushWithoutNotification(version string) error {
	_, err := s.push(version)
	return err
}

// pushBuiltWithoutNotification pushes an image built minutes ago, and
// sends no notification for it.
func (s *scenario) pushBuiltWithoutNotification(version string, minutes int) error {
	_, err := s.pushBuiltAt(version, time.Now().Add(-time.Duration(minutes)*time.Minute).Truncate(time.Second))
	return err
}

// rolloutStartsWithin waits, at most d, for the rollout of version to
// start, as the sink of flotilla's events sees it.
func (s *scenario) rolloutStartsWithin(ctx context.Context, version string, seconds int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second)
	defer cancel()
	if _, err := s.rolloutID(ctx, version); err != nil {
		return fmt.Errorf("no rollout of %s started within %d s: %w", version, seconds, err)
	}
	return nil
}

func (s *scenario) describeSaysSource(ctx context.Context, version, source string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	out, err := s.flotillaCLI(ctx, "describe", "rollout", id)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == "Source" {
			if got := strings.TrimSpace(v); got != source {
				return fmt.Errorf("flotilla describe rollout %s says source %q, want %q", id, got, source)
			}
			return nil
		}
	}
	return fmt.Errorf("flotilla describe rollout %s names no source:\n%s", id, out)
}

func (s *scenario) apiSaysSource(ctx context.Context, version, source string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	var ro struct{ Tag, Digest, Source string }
	if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
		return err
	}
	if ro.Source != source || ro.Tag != version || ro.Digest != s.w.digests[version] {
		return fmt.Errorf("the API has rollout %s of %s@%s from %q, want %s@%s from %q", id, ro.Tag, ro.Digest, ro.Source,
			version, s.w.digests[version], source)
	}
	// The push the poll journaled says so too, and names the digest the
	// registry holds.
	if source == events.SourcePoll {
		if _, err := s.w.sink.waitFor(ctx, "the poll's push of "+version, func(e cloudevents.Event) bool {
			p, err := events.Decode[events.ImagePushed](e)
			return e.Type() == events.TypeImagePushed && err == nil && p.Tag == version && p.Source == events.SourcePoll &&
				p.Digest == s.w.digests[version]
		}); err != nil {
			return err
		}
	}
	return nil
}

// pollMetrics reads flotilla_polls_total by outcome and
// flotilla_poll_found_total summed over the applications and, in
// scale-out mode, over the replicas (each polls the applications of the
// partitions it holds).
func (s *scenario) pollMetrics(ctx context.Context) (map[string]float64, float64, error) {
	procs := s.w.flotilla.replicas
	if len(procs) == 0 {
		procs = []*flotillaProcess{s.w.flotilla}
	}
	polls, found := map[string]float64{}, 0.0
	for _, p := range procs {
		pp, f, err := scrapePolls(ctx, p.url())
		if err != nil {
			return nil, 0, err
		}
		for k, v := range pp {
			polls[k] += v
		}
		found += f
	}
	return polls, found, nil
}

// scrapePolls reads the poll's metrics from one flotilla at base.
func scrapePolls(ctx context.Context, base string) (polls map[string]float64, found float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	polls = map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		series, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(value, &v); err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(series, `flotilla_polls_total{outcome="`):
			polls[strings.TrimSuffix(strings.TrimPrefix(series, `flotilla_polls_total{outcome="`), `"}`)] = v
		case strings.HasPrefix(series, "flotilla_poll_found_total{"):
			found += v
		}
	}
	return polls, found, sc.Err()
}

func (s *scenario) countedPollFound(ctx context.Context) error {
	polls, found, err := s.pollMetrics(ctx)
	if err != nil {
		return err
	}
	if found < 1 || polls["found"] < 1 {
		return fmt.Errorf("flotilla_poll_found_total %v, flotilla_polls_total %v: want the version found counted", found, polls)
	}
	return nil
}

// polledNothingNew waits (at most a minute) until flotilla has polled the
// registry n more times, each finding nothing newer than what the webhooks
// brought.
func (s *scenario) polledNothingNew(ctx context.Context, n int) error {
	before, found, err := s.pollMetrics(ctx)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		polls, foundNow, err := s.pollMetrics(ctx)
		if err != nil {
			return err
		}
		if foundNow != found || polls["found"] != before["found"] || polls["repeat"] != before["repeat"] {
			return fmt.Errorf("a poll fed a version in (polls %v, before %v): the webhook had brought it", polls, before)
		}
		if polls["current"] >= before["current"]+float64(n) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after a minute flotilla polled %v times (%v), want %d more", polls["current"]-before["current"], polls, n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (s *scenario) refreshRun(ctx context.Context, app string) error {
	out, err := s.flotillaCLI(ctx, "refresh", app, "--token", s.w.apiToken)
	s.w.lastOutput = out
	return err
}

func (s *scenario) refreshFound(version string) error {
	want := fmt.Sprintf("newest: %s (%s), fed in as a push", version, s.w.digests[version])
	if !strings.Contains(s.w.lastOutput, want) {
		return fmt.Errorf("flotilla refresh printed %q, want %q", s.w.lastOutput, want)
	}
	return nil
}

// pushValueWithoutWebhook sets key to value in the deployments
// repository's file at path, commits and pushes it, and delivers no
// webhook (a git host that does not retry, as GitHub): that commit.
func (s *scenario) pushValueWithoutWebhook(ctx context.Context, key, value, path string) error {
	r := s.w.git
	file := filepath.Join(r.work, path)
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	values := map[string]any{}
	if err := yaml.Unmarshal(b, &values); err != nil {
		return err
	}
	values[key] = value
	if b, err = yaml.Marshal(values); err != nil {
		return err
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{{"add", path}, {"commit", "-m", "set " + key + " in " + path}, {"push", "origin", "main"}} {
		if _, err := git(ctx, r.work, args...); err != nil {
			return err
		}
	}
	head, err := git(ctx, r.work, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	r.commits["that"] = strings.TrimSpace(head)
	return nil
}

func (s *scenario) apiSaysCommitSource(ctx context.Context, source string) error {
	commit := s.w.git.commits["that"]
	id, err := s.rolloutID(ctx, commitVersion(commit))
	if err != nil {
		return err
	}
	var ro struct{ Digest, Source string }
	if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
		return err
	}
	if ro.Source != source || ro.Digest != commit {
		return fmt.Errorf("the API has rollout %s of commit %s from %q, want commit %s from %q", id, ro.Digest, ro.Source, commit, source)
	}
	return nil
}

// rebuildWithoutNotification pushes version again as a new image (a new
// digest under the same tag), and sends no notification for it.
func (s *scenario) rebuildWithoutNotification(version string) error {
	old := s.w.digests[version]
	delete(s.w.pushes, version)
	if _, err := s.push(version); err != nil {
		return err
	}
	if s.w.digests[version] == old {
		return fmt.Errorf("the rebuilt %s has the old digest %s", version, old)
	}
	return nil
}

// rebuiltStarts are the rollout.started of version at its current digest
// (the rebuilt one) the sink saw.
func (s *scenario) rebuiltStarts(version string) []events.RolloutStarted {
	var out []events.RolloutStarted
	for _, e := range s.w.sink.all() {
		if e.Type() != events.TypeRolloutStarted {
			continue
		}
		if p, err := events.Decode[events.RolloutStarted](e); err == nil && p.Tag == version && p.Digest == s.w.digests[version] {
			out = append(out, p)
		}
	}
	return out
}

// rebuiltStartsWithin waits, at most seconds, for a rollout of version's
// rebuilt digest to start, and reads in the API what brought it.
func (s *scenario) rebuiltStartsWithin(ctx context.Context, version string, seconds int, source string) error {
	wctx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second)
	defer cancel()
	digest := s.w.digests[version]
	e, err := s.w.sink.waitFor(wctx, "rollout of the rebuilt "+version+" started", func(e cloudevents.Event) bool {
		p, err := events.Decode[events.RolloutStarted](e)
		return e.Type() == events.TypeRolloutStarted && err == nil && p.Tag == version && p.Digest == digest
	})
	if err != nil {
		return fmt.Errorf("no rollout of the rebuilt %s (%s) started within %d s: %w", version, digest, seconds, err)
	}
	id := events.RolloutID(e)
	var ro struct{ Tag, Digest, Source string }
	if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
		return err
	}
	if ro.Source != source || ro.Tag != version || ro.Digest != digest {
		return fmt.Errorf("the API has rollout %s of %s@%s from %q, want %s@%s from %q", id, ro.Tag, ro.Digest, ro.Source, version, digest, source)
	}
	return nil
}

func (s *scenario) rebuiltRollouts(want int, version string) error {
	if got := s.rebuiltStarts(version); len(got) != want {
		return fmt.Errorf("%d rollouts of the rebuilt %s (%s) started (%v), want %d", len(got), version, s.w.digests[version], got, want)
	}
	return nil
}
