package features

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/cucumber/godog"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// registerKubectlCLISteps are the steps of cli.feature: the CLI's -o
// formats and usage errors, run with the features' flotilla binary.
func (s *scenario) registerKubectlCLISteps(sc *godog.ScenarioContext) {
	sc.Step("^`flotilla get rollouts -o yaml` prints the rollout of \"([^\"]*)\" as YAML with the digest every cluster's primary runs$", s.getRolloutsYAML)
	sc.Step("^`flotilla ([^`]*)` exits 2, prints nothing and names the (?:formats|kinds) \"([^\"]*)\"$", s.cliUsageError)
}

// getRolloutsYAML reads `get rollouts -o yaml` strictly as the API's
// rollouts, and holds the rollout of version against the clusters: the
// digest of its image is what each cluster's primary Deployment runs, and
// it lists each cluster Succeeded.
func (s *scenario) getRolloutsYAML(ctx context.Context, version string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	out, err := s.flotillaCLI(ctx, "get", "rollouts", "-o", "yaml")
	if err != nil {
		return err
	}
	if t := strings.TrimSpace(out); t == "" || t[0] == '[' || t[0] == '{' || strings.HasPrefix(t, "ID ") {
		return fmt.Errorf("get rollouts -o yaml printed no block YAML:\n%s", out)
	}
	var ros []rollout.Rollout
	if err := yaml.UnmarshalStrict([]byte(out), &ros); err != nil {
		return fmt.Errorf("get rollouts -o yaml is not the API's rollouts: %w\n%s", err, out)
	}
	var r *rollout.Rollout
	for i := range ros {
		if ros[i].ID == id {
			r = &ros[i]
		}
	}
	if r == nil || r.Digest == "" || r.Tag != version {
		return fmt.Errorf("get rollouts -o yaml has no rollout %s of %s with a digest:\n%s", id, version, out)
	}
	phases := map[string]rollout.ClusterPhase{}
	for _, w := range r.Waves {
		for _, c := range w.Clusters {
			phases[c.Name] = c.Phase
		}
	}
	for _, c := range s.w.clusters {
		img, err := s.imageOf(ctx, c, s.w.workload+"-primary")
		if err != nil {
			return err
		}
		if _, digest, _ := strings.Cut(img, "@"); digest != r.Digest {
			return fmt.Errorf("the YAML's rollout %s has digest %s, the primary in %s runs %s", id, r.Digest, c.Name, img)
		}
		if phases[c.Name] != rollout.ClusterSucceeded {
			return fmt.Errorf("the YAML's rollout %s lists %s %q, want %s:\n%s", id, c.Name, phases[c.Name], rollout.ClusterSucceeded, out)
		}
	}
	return nil
}

// cliUsageError runs a flotilla command that is a usage error: it exits
// 2, prints nothing on stdout, and its error names each of names.
func (s *scenario) cliUsageError(ctx context.Context, line, names string) error {
	args := append(strings.Fields(line), "--server", s.w.flotilla.url())
	cmd := exec.CommandContext(ctx, flotillaBin, args...)
	cmd.Env = s.cliEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || stdout.Len() > 0 {
		return fmt.Errorf("flotilla %s: %v, stdout %q, stderr %q: want exit 2 and nothing on stdout", line, err, stdout.String(), stderr.String())
	}
	for _, n := range strings.Split(names, ",") {
		if !strings.Contains(stderr.String(), n) {
			return fmt.Errorf("flotilla %s: stderr %q does not name %s", line, stderr.String(), n)
		}
	}
	return nil
}
