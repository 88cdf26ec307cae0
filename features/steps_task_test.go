package features

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/cucumber/godog"
	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pipelines/tasks"
)

type taskRun struct {
	result tasks.ApplyCanaryResult
	stderr string
	err    error
}

func (s *scenario) registerTaskSteps(sc *godog.ScenarioContext) {
	sc.Step("^`flotilla task apply-canary` sets \"([^\"]*)\" to \"([^\"]*)\" for rollout \"([^\"]*)\"$", s.runApplyCanary)
	sc.Step(`^the task reports the previous image "([^"]*)" and (a|no) change$`, s.taskReports)
	sc.Step(`^the task fails saying "([^"]*)" and "([^"]*)" and "([^"]*)"$`, s.taskFails)
}

// runApplyCanary runs the flotilla binary's task command against the
// scenario's cluster, with a Canary file like the one flotilla renders.
func (s *scenario) runApplyCanary(ctx context.Context, workload, image, rolloutID string) error {
	dir, err := os.MkdirTemp("", "flotilla-task-*")
	if err != nil {
		return err
	}
	s.onCleanup(func() { _ = os.RemoveAll(dir) })
	c := flaggerv1.Canary{
		TypeMeta:   metav1.TypeMeta{APIVersion: "flagger.app/v1beta1", Kind: "Canary"},
		ObjectMeta: metav1.ObjectMeta{Name: workload},
		Spec: flaggerv1.CanarySpec{
			Provider:  "kubernetes",
			TargetRef: flaggerv1.LocalObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: workload},
			Service:   flaggerv1.CanaryService{Port: 9898},
			Analysis:  &flaggerv1.CanaryAnalysis{Interval: "1s", Threshold: 1, Iterations: 2},
		},
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	canaryFile, resultFile := filepath.Join(dir, "canary.yaml"), filepath.Join(dir, "result.json")
	if err := os.WriteFile(canaryFile, b, 0o600); err != nil {
		return err
	}
	cl, _ := fleet.Cluster(s.cluster.Name)
	cmd := exec.CommandContext(ctx, flotillaBin, "task", "apply-canary",
		"--kubeconfig", cl.Kubeconfig, "--namespace", s.ns, "--workload", workload,
		"--image", image, "--rollout", rolloutID, "--canary-file", canaryFile, "--result-file", resultFile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	run := &taskRun{}
	if run.err = cmd.Run(); run.err == nil {
		out, err := os.ReadFile(resultFile)
		if err != nil {
			return fmt.Errorf("the task wrote no result file: %w", err)
		}
		if err := json.Unmarshal(out, &run.result); err != nil {
			return fmt.Errorf("decoding the task result %q: %w", out, err)
		}
	}
	run.stderr = stderr.String()
	s.task = run
	return nil
}

func (s *scenario) taskReports(previous, change string) error {
	if s.task.err != nil {
		return fmt.Errorf("the task failed: %w: %s", s.task.err, s.task.stderr)
	}
	want := tasks.ApplyCanaryResult{PreviousImage: previous, Changed: change == "a"}
	if s.task.result.PreviousImage != want.PreviousImage || s.task.result.Changed != want.Changed || len(s.task.result.Pruned) != 0 {
		return fmt.Errorf("the task reported %+v, want %+v", s.task.result, want)
	}
	return nil
}

func (s *scenario) taskFails(a, b, c string) error {
	words := []string{a, b, c}
	if s.task.err == nil {
		return fmt.Errorf("the task succeeded, want a failure")
	}
	for _, w := range words {
		if !strings.Contains(s.task.stderr, w) {
			return fmt.Errorf("the task's error %q does not say %q", s.task.stderr, w)
		}
	}
	return nil
}

func (s *scenario) registerCLISteps(sc *godog.ScenarioContext) {
	sc.Step("^`flotilla get rollouts` lists the rollout of \"([^\"]*)\" as \"([^\"]*)\"$", s.getRolloutsLists)
	sc.Step("^`flotilla describe rollout` of \"([^\"]*)\" shows every cluster \"([^\"]*)\"$", s.describeShows)
	sc.Step("^`flotilla describe rollout` of \"([^\"]*)\" shows cluster \"([^\"]*)\" \"([^\"]*)\" and every other cluster \"([^\"]*)\"$", s.describeShowsOne)
}

// flotillaCLI runs a flotilla client command against the scenario's server.
func (s *scenario) flotillaCLI(ctx context.Context, args ...string) (string, error) {
	args = append(args, "--server", s.w.flotilla.url())
	cmd := exec.CommandContext(ctx, flotillaBin, args...)
	cmd.Env = s.cliEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("flotilla %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

func (s *scenario) getRolloutsLists(ctx context.Context, version, phase string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	row, out, err := s.getRolloutsRow(ctx, id)
	if err != nil {
		return err
	}
	if row["TAG"] != version || row["PHASE"] != phase {
		return fmt.Errorf("get rollouts shows %s with tag %s phase %s, want tag %s phase %s:\n%s", id, row["TAG"], row["PHASE"], version, phase, out)
	}
	return nil
}

func (s *scenario) describeShows(ctx context.Context, version, state string) error {
	return s.describeShowsStates(ctx, version, "", "", state)
}

// describeShowsOne checks that describe shows cluster in state one and
// every other cluster in state others (a cluster that failed its wave
// apart from those reverted because of it).
func (s *scenario) describeShowsOne(ctx context.Context, version, cluster, one, others string) error {
	return s.describeShowsStates(ctx, version, cluster, one, others)
}

func (s *scenario) describeShowsStates(ctx context.Context, version, cluster, one, others string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	out, err := s.flotillaCLI(ctx, "describe", "rollout", id)
	if err != nil {
		return err
	}
	states, err := describedStates(out)
	if err != nil {
		return err
	}
	for _, c := range s.w.clusters {
		want := others
		if c.Name == cluster {
			want = one
		}
		got, ok := states[c.Name]
		if !ok {
			return fmt.Errorf("describe does not show cluster %s:\n%s", c.Name, out)
		}
		if got != want {
			return fmt.Errorf("describe shows %s as %q, want %q:\n%s", c.Name, got, want, out)
		}
	}
	return nil
}

// describedStates reads the STATE column of `flotilla describe rollout`'s
// clusters table (a state may be words: "Failed, reverted"), by cluster.
func describedStates(out string) (map[string]string, error) {
	lines := strings.Split(out, "\n")
	var cluster, state, flagger int
	for i, line := range lines {
		if strings.Contains(line, "CLUSTER") && strings.Contains(line, "STATE") && strings.Contains(line, "FLAGGER") {
			cluster, state, flagger = strings.Index(line, "CLUSTER"), strings.Index(line, "STATE"), strings.Index(line, "FLAGGER")
			got := map[string]string{}
			for _, row := range lines[i+1:] {
				if len(row) < flagger {
					continue
				}
				got[strings.TrimSpace(row[cluster:state])] = strings.TrimSpace(row[state:flagger])
			}
			return got, nil
		}
	}
	return nil, fmt.Errorf("describe shows no clusters table:\n%s", out)
}

// cliEnv is the environment of the flotilla commands a step runs against
// the scenario's flotilla: the user's, with the scenario's API token in
// FLOTILLA_TOKEN (every read needs one, #31; a step's --token wins).
func (s *scenario) cliEnv() []string {
	return append(os.Environ(), "FLOTILLA_TOKEN="+s.w.apiToken)
}
