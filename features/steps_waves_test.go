package features

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cucumber/godog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
)

func (s *scenario) registerWaveSteps(sc *godog.ScenarioContext) {
	sc.Step(`^clusters "([^"]*)" are labelled "([^"]*)"$`, s.labelClusters)
	sc.Step(`^the application goes only to clusters labelled "([^"]*)"$`, s.selectClusters)
	sc.Step(`^wave (\d+) is the clusters labelled "([^"]*)"$`, s.waveSelector)
	sc.Step(`^wave (\d+) rolls out (\d+) clusters? at a time$`, s.waveMaxParallel)
	sc.Step(`^wave (\d+) may lose (\d+) clusters?$`, s.waveMaxFailures)
	sc.Step(`^the canaries in clusters "([^"]*)" are watched$`, s.watchCanaries)
	sc.Step(`^the primary in clusters "([^"]*)" runs version "([^"]*)" by digest$`, s.primariesInRun)
	sc.Step(`^clusters "([^"]*)" have no canary of the application$`, s.noCanaryIn)
	sc.Step(`^no two canaries in clusters "([^"]*)" were progressing at once$`, s.neverTwoProgressing)
	sc.Step(`^the rollout of "([^"]*)" names cluster "([^"]*)" as failed within the budget$`, s.namesWithinBudget)
	sc.Step(`^wave (\d+) bakes for (\d+) seconds$`, s.waveBakes)
	sc.Step(`^wave (\d+) of the rollout of "([^"]*)" is baking$`, s.waveBaking)
	sc.Step(`^the workload "([^"]*)" in cluster "([^"]*)" is changed, so that Flagger analyses it again$`, s.touchWorkload)
	sc.Step(`^the rollout of "([^"]*)" failed naming the bake of cluster "([^"]*)"$`, s.failedInBake)
	sc.Step(`^the application queues newer versions$`, s.queueNewVersions)
	sc.Step(`^the rollout of "([^"]*)" is "([^"]*)"$`, s.rolloutInPhase)
	sc.Step(`^the analysis gate passes again in cluster "([^"]*)"$`, s.gatePassesIn)
	sc.Step(`^the application rolls out only versions "([^"]*)"$`, s.semverConstraint)
	sc.Step(`^version "([^"]*)" built (\d+) minutes ago is pushed$`, s.pushBuilt)
	sc.Step(`^the application rolls out only tags matching "([^"]*)", compared as "([^"]*)"$`, s.tagFilter)
	sc.Step(`^the application never rolls out tags matching "([^"]*)"$`, s.denyTags)
	sc.Step(`^version "([^"]*)" is built again and pushed$`, s.rebuildVersion)
	sc.Step(`^the primary in every cluster comes to run the rebuilt "([^"]*)" by digest$`, s.primariesComeToRun)
	sc.Step(`^the canaries ask a confirm-rollout gate first, which opens$`, s.confirmRolloutGate)
	sc.Step(`^the confirm-rollout gate was asked in cluster "([^"]*)" while its canary was "([^"]*)"$`, s.confirmAskedIn)
}

// confirmGate is a confirm-rollout gate that always opens, and records the
// cluster and canary phase of every call.
type confirmGate struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []string // cluster/phase
}

func (s *scenario) confirmRolloutGate() error {
	g := &confirmGate{}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p struct {
			Phase    string            `json:"phase"`
			Metadata map[string]string `json:"metadata"`
		}
		_ = json.NewDecoder(r.Body).Decode(&p)
		g.mu.Lock()
		g.calls = append(g.calls, p.Metadata["cluster"]+"/"+p.Phase)
		g.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	s.onCleanup(g.srv.Close)
	s.w.confirm = g
	return nil
}

// confirmAskedIn checks that Flagger asked the confirm-rollout gate of a
// cluster while the canary was still in phase (a phase left over from the
// revision before: what the next one's first events carry).
func (s *scenario) confirmAskedIn(cluster, phase string) error {
	s.w.confirm.mu.Lock()
	defer s.w.confirm.mu.Unlock()
	if !slices.Contains(s.w.confirm.calls, cluster+"/"+phase) {
		return fmt.Errorf("the confirm-rollout gate was asked %v, never in cluster %s while %s", s.w.confirm.calls, cluster, phase)
	}
	return nil
}

func (s *scenario) gatePassesIn(cluster string) error {
	s.w.gate.mu.Lock()
	defer s.w.gate.mu.Unlock()
	delete(s.w.gate.fail, cluster)
	return nil
}

// rebuildVersion pushes a new image under a tag pushed before: a new
// digest, as a rebuilt or moved tag has.
func (s *scenario) rebuildVersion(ctx context.Context, version string) error {
	old := s.w.digests[version]
	delete(s.w.pushes, version)
	if err := s.pushVersion(ctx, version); err != nil {
		return err
	}
	if s.w.digests[version] == old {
		return fmt.Errorf("the rebuilt %s has the old digest %s", version, old)
	}
	return nil
}

func (s *scenario) primariesComeToRun(ctx context.Context, version string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := s.primariesRun(ctx, version)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (s *scenario) queueNewVersions() error {
	s.w.onNewVersion = "queue"
	return nil
}

// rolloutInPhase waits until the API lists the rollout of version in phase.
func (s *scenario) rolloutInPhase(ctx context.Context, version, phase string) error {
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		var ros []struct{ ID, Tag, Phase, Reason string }
		if err := s.getJSON(ctx, "/api/v1/rollouts", &ros); err != nil {
			return err
		}
		for _, ro := range ros {
			if ro.Tag == version {
				if ro.Phase == phase {
					return nil
				}
				last = ro.Phase + ": " + ro.Reason
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the rollout of %s is not %s after 2 minutes (last: %q)", version, phase, last)
}

func (s *scenario) waveBakes(wave, seconds int) error {
	s.wavePolicy(wave, "bakeTime", fmt.Sprintf("%ds", seconds))
	return nil
}

// apiRollout is what the steps read of a rollout from flotilla's API.
type apiRollout struct {
	Phase  string
	Reason string
	Waves  []struct {
		BakingUntil time.Time
		Clusters    []struct{ Name, Phase string }
	}
}

func (s *scenario) apiRollout(ctx context.Context, version string) (apiRollout, error) {
	var ro apiRollout
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return ro, err
	}
	return ro, s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro)
}

func (s *scenario) waveBaking(ctx context.Context, wave int, version string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		ro, err := s.apiRollout(ctx, version)
		if err != nil {
			return err
		}
		if len(ro.Waves) >= wave && !ro.Waves[wave-1].BakingUntil.IsZero() {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("wave %d of the rollout of %s did not start baking", wave, version)
}

// touchWorkload changes the workload's pod template, a new revision Flagger
// analyses.
func (s *scenario) touchWorkload(ctx context.Context, name, cluster string) error {
	c, err := clientsFor(cluster)
	if err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"features.flotilla.dev/touched":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	_, err = c.Kube.AppsV1().Deployments(s.w.namespace).Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

func (s *scenario) failedInBake(ctx context.Context, version, cluster string) error {
	ro, err := s.apiRollout(ctx, version)
	if err != nil {
		return err
	}
	if !strings.Contains(ro.Reason, "cluster "+cluster+" failed: failed during the wave's bake") {
		return fmt.Errorf("rollout of %s is %s, reason %q; want it to name %s's failure during the bake", version, ro.Phase, ro.Reason, cluster)
	}
	return nil
}

func (s *scenario) labelClusters(names, label string) error {
	k, v, ok := strings.Cut(label, "=")
	if !ok {
		return fmt.Errorf("label %q: want key=value", label)
	}
	if s.w.clusterLabels == nil {
		s.w.clusterLabels = map[string]map[string]string{}
	}
	for _, n := range strings.Split(names, ",") {
		if s.w.clusterLabels[n] == nil {
			s.w.clusterLabels[n] = map[string]string{}
		}
		s.w.clusterLabels[n][k] = v
	}
	return nil
}

func (s *scenario) selectClusters(label string) error {
	k, v, ok := strings.Cut(label, "=")
	if !ok {
		return fmt.Errorf("label %q: want key=value", label)
	}
	s.w.appSelector = map[string]any{"matchLabels": map[string]string{k: v}}
	return nil
}

func (s *scenario) wavePolicy(wave int, field string, value any) {
	if s.w.wavePolicies == nil {
		s.w.wavePolicies = map[int]map[string]any{}
	}
	if s.w.wavePolicies[wave-1] == nil {
		s.w.wavePolicies[wave-1] = map[string]any{}
	}
	s.w.wavePolicies[wave-1][field] = value
}

func (s *scenario) waveMaxParallel(wave, n int) error {
	s.wavePolicy(wave, "maxParallel", n)
	return nil
}

func (s *scenario) waveMaxFailures(wave, n int) error {
	s.wavePolicy(wave, "maxFailures", n)
	return nil
}

// canaryLog records every phase the watched canaries went through, as the
// clusters' API servers reported them.
type canaryLog struct {
	mu     sync.Mutex
	phases map[string][]phaseAt // cluster -> phases in order
}

type phaseAt struct {
	at    time.Time
	phase flaggerv1.CanaryPhase
}

func (s *scenario) watchCanaries(ctx context.Context, names string) error {
	log := &canaryLog{phases: map[string][]phaseAt{}}
	s.w.canaries = log
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.onCleanup(cancel)
	for _, n := range strings.Split(names, ",") {
		c, err := clientsFor(n)
		if err != nil {
			return err
		}
		wi, err := c.Flagger.FlaggerV1beta1().Canaries(s.w.namespace).Watch(wctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("watching canaries in %s: %w", n, err)
		}
		go func() {
			defer wi.Stop()
			for ev := range wi.ResultChan() {
				cd, ok := ev.Object.(*flaggerv1.Canary)
				if !ok || ev.Type == watch.Deleted || cd.Name != s.w.workload {
					continue
				}
				log.mu.Lock()
				log.phases[n] = append(log.phases[n], phaseAt{time.Now(), cd.Status.Phase})
				log.mu.Unlock()
			}
		}()
	}
	return nil
}

// neverTwoProgressing checks, from the watched phases, that the analyses
// (phase Progressing) of the clusters never overlapped, and that each
// cluster had one.
func (s *scenario) neverTwoProgressing(names string) error {
	log := s.w.canaries
	if log == nil {
		return fmt.Errorf("no step watched the canaries")
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	type span struct {
		cluster    string
		start, end time.Time
	}
	var spans []span
	for _, n := range strings.Split(names, ",") {
		var sp span
		for _, p := range log.phases[n] {
			if p.phase != flaggerv1.CanaryPhaseProgressing {
				if !sp.start.IsZero() && sp.end.IsZero() {
					sp.end = p.at
				}
				continue
			}
			if sp.start.IsZero() {
				sp = span{cluster: n, start: p.at}
			}
		}
		if sp.start.IsZero() {
			return fmt.Errorf("the canary in %s was never seen progressing (phases %v)", n, log.phases[n])
		}
		if sp.end.IsZero() {
			return fmt.Errorf("the canary in %s is still progressing", n)
		}
		spans = append(spans, sp)
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start.Compare(b.start) })
	for i := 1; i < len(spans); i++ {
		if spans[i].start.Before(spans[i-1].end) {
			return fmt.Errorf("the canaries in %s and %s were progressing at once (%s from %s to %s, %s from %s)",
				spans[i-1].cluster, spans[i].cluster, spans[i-1].cluster, spans[i-1].start.Format(time.StampMilli),
				spans[i-1].end.Format(time.StampMilli), spans[i].cluster, spans[i].start.Format(time.StampMilli))
		}
	}
	return nil
}

// primaryImages reads the image of the primary in each named cluster.
func (s *scenario) primaryImages(ctx context.Context, names string) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range strings.Split(names, ",") {
		c, err := clientsFor(n)
		if err != nil {
			return nil, err
		}
		if out[n], err = s.imageOf(ctx, c, s.w.workload+"-primary"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *scenario) primariesInRun(ctx context.Context, names, version string) error {
	want, err := s.ref(version)
	if err != nil {
		return err
	}
	got, err := s.primaryImages(ctx, names)
	for n, img := range got {
		if img != want {
			return fmt.Errorf("primary in %s runs %s, want %s (version %s)", n, img, want, version)
		}
	}
	return err
}

func (s *scenario) noCanaryIn(ctx context.Context, names string) error {
	for _, n := range strings.Split(names, ",") {
		c, err := clientsFor(n)
		if err != nil {
			return err
		}
		list, err := c.Flagger.FlaggerV1beta1().Canaries(s.w.namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("cluster %s has canary %s", n, list.Items[0].Name)
		}
		got, err := s.imageOf(ctx, c, s.w.workload)
		if err != nil {
			return err
		}
		if !strings.HasSuffix(got, ":0.1.0") {
			return fmt.Errorf("the workload in %s runs %s, want its first image", n, got)
		}
	}
	return nil
}

func (s *scenario) namesWithinBudget(ctx context.Context, version, cluster string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	var ro struct {
		Phase  string
		Reason string
		Waves  []struct {
			Clusters []struct{ Name, Phase string }
		}
	}
	if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
		return err
	}
	if ro.Phase != "Succeeded" || !strings.Contains(ro.Reason, "within its failure budget") || !strings.Contains(ro.Reason, "cluster "+cluster+" failed") {
		return fmt.Errorf("rollout %s is %s, reason %q; want Succeeded, naming %s within the budget", id, ro.Phase, ro.Reason, cluster)
	}
	return nil
}

func (s *scenario) semverConstraint(constraint string) error {
	s.w.semver = constraint
	return nil
}

func (s *scenario) denyTags(pattern string) error {
	s.w.denyTags = append(s.w.denyTags, pattern)
	return nil
}

func (s *scenario) tagFilter(pattern, extract string) error {
	s.w.tagFilter = map[string]string{"pattern": pattern, "extract": extract}
	return nil
}

func (s *scenario) pushBuilt(ctx context.Context, version string, minutes int) error {
	body, err := s.pushBuiltAt(version, time.Now().Add(-time.Duration(minutes)*time.Minute).Truncate(time.Second))
	if err != nil {
		return err
	}
	return s.notify(ctx, body)
}

// waveSelector makes a wave select its clusters by a label rather than
// list them (the step naming the waves still names them, for the checks).
func (s *scenario) waveSelector(wave int, label string) error {
	k, v, ok := strings.Cut(label, "=")
	if !ok {
		return fmt.Errorf("label %q: want key=value", label)
	}
	s.wavePolicy(wave, "clusters", []string{})
	s.wavePolicy(wave, "selector", map[string]any{"matchLabels": map[string]string{k: v}})
	return nil
}
