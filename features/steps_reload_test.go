package features

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cucumber/godog"
	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
)

// The live reload of the config file (README "Reloading the
// configuration"): the steps edit the file flotilla serves while it runs,
// as a person would, and read what follows from the clusters.
func (s *scenario) registerReloadSteps(sc *godog.ScenarioContext) {
	sc.Step(`^an edit of the config file adds the application "([^"]*)" that tracks "([^"]*)"$`, s.editAddApplication)
	sc.Step(`^an edit of the config file makes wave (\d+) need (\d+) approvals?$`, s.editWaveApprovals)
	sc.Step(`^an edit of the config file makes wave (\d+) bake for (\d+) seconds$`, s.editWaveBake)
	sc.Step(`^an edit of the config file labels cluster "([^"]*)" "([^"]*)"$`, s.editClusterLabel)
	sc.Step(`^an edit of the config file puts "([^"]*)" on track "([^"]*)"$`, s.editTrack)
	sc.Step(`^an edit of the config file adds cluster "([^"]*)" labelled "([^"]*)"$`, s.editAddCluster)
	sc.Step(`^an edit of the config file removes cluster "([^"]*)"$`, s.editRemoveCluster)
	sc.Step(`^the rollout of "([^"]*)" shows cluster "([^"]*)" removed from the fleet$`, func(ctx context.Context, version, cluster string) error {
		return s.clusterShownRemoved(ctx, version, cluster, "file changed")
	})
	sc.Step(`^the rollout of "([^"]*)" shows cluster "([^"]*)" removed from the fleet by "([^"]*)"$`, s.clusterShownRemoved)
	sc.Step(`^the edited config file is saved$`, s.saveConfigEdits)
	sc.Step(`^flotilla applies the edited config$`, s.editApplied)
	sc.Step(`^flotilla refuses the edited config as "(invalid|restart_needed)", an error in its log naming "([^"]*)"$`, s.editRefused)
	sc.Step(`^the primary of "([^"]*)" in clusters "([^"]*)" runs version "([^"]*)" by digest$`, s.primariesOfInRun)
	sc.Step(`^the workload "([^"]*)" in clusters "([^"]*)" still runs its first image$`, s.stillFirstImage)
	sc.Step(`^the rollout of "([^"]*)" waits for an approval of wave (\d+)$`, s.waitsForApproval)
	sc.Step(`^the canary in cluster "([^"]*)" began its analysis only after those in clusters "([^"]*)" succeeded$`, s.analysedAfter)
}

// configEdit changes the config file's document.
type configEdit func(doc map[string]any) error

// pendingEdits are each scenario's edits not saved yet, by world.
var pendingEdits sync.Map // *world -> []configEdit

func (s *scenario) addEdit(e configEdit) {
	prev, _ := pendingEdits.Load(s.w)
	edits, _ := prev.([]configEdit)
	pendingEdits.Store(s.w, append(edits, e))
}

func (s *scenario) editAddApplication(app, repo string) error {
	s.w.second = &secondApp{name: app, repo: repo}
	s.addEdit(func(doc map[string]any) error {
		apps, _ := doc["applications"].([]any)
		if len(apps) == 0 {
			return fmt.Errorf("the config file has no application")
		}
		first, _ := apps[0].(map[string]any)
		track, _ := first["track"].(string)
		doc["applications"] = append(apps, s.w.appConfig(app, repo, track, s.w.flotilla.listen))
		return nil
	})
	return nil
}

// wave is the n-th wave of the document.
func wave(doc map[string]any, n int) (map[string]any, error) {
	fleet, _ := doc["fleet"].(map[string]any)
	waves, _ := fleet["waves"].([]any)
	if n < 1 || n > len(waves) {
		return nil, fmt.Errorf("the config file has no wave %d", n)
	}
	w, _ := waves[n-1].(map[string]any)
	return w, nil
}

func (s *scenario) editWaveApprovals(n, approvals int) error {
	s.addEdit(func(doc map[string]any) error {
		w, err := wave(doc, n)
		if err == nil {
			w["approvals"] = approvals
		}
		return err
	})
	return nil
}

func (s *scenario) editWaveBake(n, seconds int) error {
	s.addEdit(func(doc map[string]any) error {
		w, err := wave(doc, n)
		switch {
		case err != nil:
		case seconds == 0:
			delete(w, "bakeTime")
		default:
			w["bakeTime"] = fmt.Sprintf("%ds", seconds)
		}
		return err
	})
	return nil
}

func (s *scenario) editClusterLabel(name, label string) error {
	k, v, ok := strings.Cut(label, "=")
	if !ok {
		return fmt.Errorf("label %q: want key=value", label)
	}
	s.addEdit(func(doc map[string]any) error {
		fleet, _ := doc["fleet"].(map[string]any)
		clusters, _ := fleet["clusters"].([]any)
		for _, c := range clusters {
			if m, _ := c.(map[string]any); m["name"] == name {
				labels, _ := m["labels"].(map[string]any)
				if labels == nil {
					labels = map[string]any{}
				}
				labels[k] = v
				m["labels"] = labels
				return nil
			}
		}
		return fmt.Errorf("the config file has no cluster %q", name)
	})
	return nil
}

// editAddCluster adds a cluster of the local fleet to the file's
// fleet.clusters with labels (the waves' selectors take it); the
// scenario's last wave has it from then on (its Then steps read it).
func (s *scenario) editAddCluster(name, list string) error {
	cl, ok := s.fleet().Cluster(name)
	if !ok {
		return fmt.Errorf("the fleet has no cluster %s", name)
	}
	labels, err := parseLabels(list)
	if err != nil {
		return err
	}
	c, err := s.clientsFor(name)
	if err != nil {
		return err
	}
	w := s.w
	w.clusters = append(w.clusters, c)
	w.waves[len(w.waves)-1] = append(w.waves[len(w.waves)-1], name)
	s.addEdit(func(doc map[string]any) error {
		fleet, _ := doc["fleet"].(map[string]any)
		clusters, _ := fleet["clusters"].([]any)
		fleet["clusters"] = append(clusters, map[string]any{"name": name, "kubeconfig": cl.Kubeconfig, "labels": labels})
		return nil
	})
	return nil
}

// editRemoveCluster takes a cluster out of the file's fleet.clusters; the
// scenario's waves no longer have it (its Then steps leave it out).
func (s *scenario) editRemoveCluster(name string) error {
	w := s.w
	w.clusters = slices.DeleteFunc(w.clusters, func(c *fleettest.Clients) bool { return c.Name == name })
	for i := range w.waves {
		w.waves[i] = slices.DeleteFunc(w.waves[i], func(n string) bool { return n == name })
	}
	s.addEdit(func(doc map[string]any) error {
		fleet, _ := doc["fleet"].(map[string]any)
		clusters, _ := fleet["clusters"].([]any)
		n := len(clusters)
		clusters = slices.DeleteFunc(clusters, func(c any) bool { m, _ := c.(map[string]any); return m["name"] == name })
		if len(clusters) == n {
			return fmt.Errorf("the config file has no cluster %q", name)
		}
		fleet["clusters"] = clusters
		return nil
	})
	return nil
}

// clusterShownRemoved reads the rollout from the API: the cluster left it
// as Removed, saying why (what removed it: source).
func (s *scenario) clusterShownRemoved(ctx context.Context, version, cluster, source string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	var ro rollout.Rollout
	if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
		return err
	}
	c, _, err := ro.Cluster(cluster)
	if err != nil {
		return err
	}
	if c.Phase != rollout.ClusterRemoved || !strings.Contains(c.Message, "removed from the fleet's configuration ("+source+")") {
		return fmt.Errorf("cluster %s of the rollout of %s: %s %q, want Removed, saying it left the configuration", cluster, version, c.Phase, c.Message)
	}
	return nil
}

func (s *scenario) editTrack(app, track string) error {
	s.addEdit(func(doc map[string]any) error {
		apps, _ := doc["applications"].([]any)
		for _, a := range apps {
			if m, _ := a.(map[string]any); m["name"] == app {
				m["track"] = track
				return nil
			}
		}
		return fmt.Errorf("the config file has no application %q", app)
	})
	return nil
}

// saveConfigEdits applies the pending edits to the file flotilla serves
// and saves it as editors do: a new file renamed over the old one.
func (s *scenario) saveConfigEdits() error {
	prev, _ := pendingEdits.LoadAndDelete(s.w)
	edits, _ := prev.([]configEdit)
	path := s.w.flotilla.config
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return err
	}
	for _, e := range edits {
		if err := e(doc); err != nil {
			return err
		}
	}
	if b, err = yaml.Marshal(doc); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".swp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// reloads is flotilla_config_reloads_total{result}.
func (s *scenario) reloads(ctx context.Context, result string) (float64, error) {
	return s.reconcileMetric(ctx, `flotilla_config_reloads_total{result="`+result+`"}`)
}

// editApplied waits for flotilla to apply the saved file (read every 3 s
// by default) and to say so in its log: every replica in scale-out mode,
// each of which reads the file for itself.
func (s *scenario) editApplied(ctx context.Context) error {
	if err := s.eachReloaded(ctx, "applied"); err != nil {
		return err
	}
	if _, err := s.logLine("configuration reloaded"); err != nil {
		return err
	}
	for _, r := range []string{"invalid", "restart_needed"} {
		if n, err := s.reloads(ctx, r); err != nil || n > 0 {
			return fmt.Errorf("flotilla counts %v reloads %s (%v)", n, r, err)
		}
	}
	return nil
}

// eachReloaded waits up to 30 s until every flotilla process counts a
// reload with result.
func (s *scenario) eachReloaded(ctx context.Context, result string) error {
	deadline := time.Now().Add(30 * time.Second)
	for i, p := range s.processes() {
		for {
			n, err := processMetric(ctx, p, `flotilla_config_reloads_total{result="`+result+`"}`)
			if err != nil {
				return err
			}
			if n >= 1 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("flotilla (process %d) counted no reload %s within 30 s:\n%s", i, result, s.w.flotilla.logs(20))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

func (s *scenario) editRefused(ctx context.Context, result, names string) error {
	if err := s.eachReloaded(ctx, result); err != nil {
		return err
	}
	line, err := s.logLine("configuration reload refused")
	if err != nil {
		return err
	}
	if !strings.Contains(line, `"level":"ERROR"`) || !strings.Contains(line, names) {
		return fmt.Errorf("flotilla's refusal is not an error naming %q: %s", names, line)
	}
	if n, err := s.reloads(ctx, "applied"); err != nil || n > 0 {
		return fmt.Errorf("flotilla counts %v reloads applied (%v)", n, err)
	}
	return nil
}

// logLine is the first line of flotilla's log holding text.
// logLine returns the first line of flotilla's log holding text: the
// first replica's where every replica's log must hold one.
func (s *scenario) logLine(text string) (string, error) {
	first := ""
	for i, p := range s.processes() {
		line, err := findLine(p.logPath, text)
		if err != nil {
			return "", err
		}
		if line == "" {
			return "", fmt.Errorf("flotilla's log (process %d) has no line %q:\n%s", i, text, s.w.flotilla.logs(20))
		}
		if i == 0 {
			first = line
		}
	}
	return first, nil
}

// findLine returns the first line of the file at path holding text, or "".
func findLine(path, text string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), text) {
			return sc.Text(), nil
		}
	}
	return "", sc.Err()
}

func (s *scenario) primariesOfInRun(ctx context.Context, app, names, version string) error {
	saved := s.w.workload
	s.w.workload = app
	defer func() { s.w.workload = saved }()
	return s.withRepo(app, func() error { return s.primariesInRun(ctx, names, version) })
}

func (s *scenario) stillFirstImage(ctx context.Context, workload, names string) error {
	for _, n := range strings.Split(names, ",") {
		c, err := s.clientsFor(n)
		if err != nil {
			return err
		}
		got, err := s.imageOf(ctx, c, workload)
		if err != nil {
			return err
		}
		if !strings.HasSuffix(got, ":0.1.0") {
			return fmt.Errorf("the workload %s in %s runs %s, want its first image", workload, n, got)
		}
	}
	return nil
}

func (s *scenario) waitsForApproval(ctx context.Context, version string, n int) error {
	want := fmt.Sprintf("wave %d ", n)
	deadline := time.Now().Add(2 * time.Minute)
	last := ""
	for time.Now().Before(deadline) {
		id, err := s.rolloutID(ctx, version)
		if err != nil {
			return err
		}
		var ro struct{ Waiting string }
		if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
			return err
		}
		if last = ro.Waiting; strings.HasPrefix(last, want) && strings.Contains(last, "approval") {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the rollout of %s waits for %q, want an approval of wave %d", version, last, n)
}

// analysedAfter checks, from the watched canaries, that the analysis of
// the canary in cluster began (phase Progressing) only after every canary
// of the others had succeeded: it was in a later wave than all of them.
func (s *scenario) analysedAfter(cluster, others string) error {
	log := s.w.canaries
	if log == nil {
		return fmt.Errorf("no step watched the canaries")
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	// The first phase seen after since (the watch begins with the phase
	// the canary had, Succeeded from the rollout before).
	first := func(name string, phase flaggerv1.CanaryPhase, since time.Time) (time.Time, error) {
		for _, p := range log.phases[name] {
			if p.phase == phase && !p.at.Before(since) {
				return p.at, nil
			}
		}
		return time.Time{}, fmt.Errorf("the canary in %s was never %s (phases %v)", name, phase, log.phases[name])
	}
	began, err := first(cluster, flaggerv1.CanaryPhaseProgressing, time.Time{})
	if err != nil {
		return err
	}
	for _, o := range strings.Split(others, ",") {
		progressing, err := first(o, flaggerv1.CanaryPhaseProgressing, time.Time{})
		if err != nil {
			return err
		}
		done, err := first(o, flaggerv1.CanaryPhaseSucceeded, progressing)
		if err != nil {
			return err
		}
		if !began.After(done) {
			return fmt.Errorf("the canary in %s began its analysis at %s, before the one in %s succeeded at %s: they were in one wave",
				cluster, began.Format(time.StampMilli), o, done.Format(time.StampMilli))
		}
	}
	return nil
}
