package features

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/cucumber/godog"
	"sigs.k8s.io/yaml"
)

// The steps of a cluster whose labels change in flotilla's config (the
// application's waves take it: its labels now match the waves' and the
// application's selectors, and it is caught up), and of the kind of
// rollout `flotilla get rollouts` shows.
func (s *scenario) registerLabelSteps(sc *godog.ScenarioContext) {
	sc.Step(`^flotilla is restarted with cluster "([^"]*)" labelled "([^"]*)" in its config$`, s.restartWithLabels)
	sc.Step(`^flotilla is restarted with cluster "([^"]*)" labelled "([^"]*)", which the application's waves now take$`, s.restartLabelsMatch)
	sc.Step("^`flotilla get rollouts` lists the rollout of \"([^\"]*)\" as \"([^\"]*)\", of kind \"([^\"]*)\"$", s.getRolloutsKind)
	sc.Step("^`flotilla get rollouts` lists that rollout as kind \"([^\"]*)\"$", s.thatRolloutKind)
}

// parseLabels reads "k=v,k2=v2".
func parseLabels(list string) (map[string]any, error) {
	out := map[string]any{}
	for _, kv := range strings.Split(list, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("label %q: want key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

// relabel stops flotilla, puts cluster in its config's fleet.clusters with
// exactly labels (adding it if it is not there), and starts it again. The
// waves are left as they are: a wave's selector takes the cluster or not.
func (s *scenario) relabel(ctx context.Context, cluster, list string) error {
	w := s.w
	cl, ok := s.fleet().Cluster(cluster)
	if !ok {
		return fmt.Errorf("the fleet has no cluster %s", cluster)
	}
	labels, err := parseLabels(list)
	if err != nil {
		return err
	}
	w.flotilla.stop()
	b, err := os.ReadFile(w.flotilla.config)
	if err != nil {
		return err
	}
	cfg := map[string]any{}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return err
	}
	fl := cfg["fleet"].(map[string]any)
	clusters, _ := fl["clusters"].([]any)
	found := false
	for _, c := range clusters {
		if m, ok := c.(map[string]any); ok && m["name"] == cluster {
			m["labels"], found = labels, true
		}
	}
	if !found {
		fl["clusters"] = append(clusters, map[string]any{"name": cluster, "kubeconfig": cl.Kubeconfig, "labels": labels})
	}
	if b, err = yaml.Marshal(cfg); err != nil {
		return err
	}
	if err := os.WriteFile(w.flotilla.config, b, 0o600); err != nil {
		return err
	}
	return w.flotilla.start(ctx)
}

// restartWithLabels relabels cluster; the scenario's waves stay as they
// were (the application does not take it).
func (s *scenario) restartWithLabels(ctx context.Context, cluster, labels string) error {
	return s.relabel(ctx, cluster, labels)
}

// restartLabelsMatch relabels cluster so that the application's last
// wave takes it, and counts it in the scenario's last wave for the checks
// of every cluster.
func (s *scenario) restartLabelsMatch(ctx context.Context, cluster, labels string) error {
	if err := s.relabel(ctx, cluster, labels); err != nil {
		return err
	}
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	s.w.clusters = append(s.w.clusters, c)
	s.w.waves[len(s.w.waves)-1] = append(s.w.waves[len(s.w.waves)-1], cluster)
	return nil
}

// getRolloutsRow runs `flotilla get rollouts` and reads rollout id's row by
// the table's header (every column but the last, WAITING, is one word).
func (s *scenario) getRolloutsRow(ctx context.Context, id string) (map[string]string, string, error) {
	out, err := s.flotillaCLI(ctx, "get", "rollouts")
	if err != nil {
		return nil, "", err
	}
	lines := strings.Split(out, "\n")
	header := strings.Fields(lines[0])
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) < len(header) || f[0] != id {
			continue
		}
		row := map[string]string{}
		for i, h := range header {
			row[h] = f[i]
		}
		return row, out, nil
	}
	return nil, out, fmt.Errorf("get rollouts does not list %s:\n%s", id, out)
}

// getRolloutsKind checks the KIND `flotilla get rollouts` shows for the
// rollout of version.
func (s *scenario) getRolloutsKind(ctx context.Context, version, phase, kind string) error {
	if err := s.getRolloutsLists(ctx, version, phase); err != nil {
		return err
	}
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	return s.rowKind(ctx, id, kind)
}

// thatRolloutKind checks the KIND `flotilla get rollouts` shows for the
// catch-up's or revert's rollout a step found.
func (s *scenario) thatRolloutKind(ctx context.Context, kind string) error {
	return s.rowKind(ctx, s.w.reconcileState().rolloutID, kind)
}

func (s *scenario) rowKind(ctx context.Context, id, kind string) error {
	row, out, err := s.getRolloutsRow(ctx, id)
	if err != nil {
		return err
	}
	if row["KIND"] != kind {
		return fmt.Errorf("get rollouts shows %s of kind %q, want %q:\n%s", id, row["KIND"], kind, out)
	}
	return nil
}
