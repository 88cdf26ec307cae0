package features

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/cucumber/godog"
)

func (s *scenario) registerGitOpsSteps(sc *godog.ScenarioContext) {
	sc.Step(`^the application keeps its image in a deployments repository$`, s.deploymentsRepository)
	sc.Step(`^the deployments repository pins version "([^"]*)" by digest for clusters "([^"]*)"$`, s.repositoryPins)
	sc.Step(`^its history names the rollout of "([^"]*)"$`, s.historyNamesRollout)
}

// seedKustomization is a cluster's overlay in the deployments repository,
// with comments flotilla must keep.
const seedKustomization = `# podinfo in %[1]s: flotilla keeps the image below in sync.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../base/podinfo   # shared by every cluster
images:
  - name: %[2]s # the tracked repository
    newTag: 0.9.0
`

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@localhost",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@localhost", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// deploymentsRepository makes a bare repository holding one kustomize
// overlay per fleet cluster, and configures the application to keep its
// image there.
func (s *scenario) deploymentsRepository(ctx context.Context) error {
	bare := filepath.Join(s.w.dir, "deployments.git")
	work := filepath.Join(s.w.dir, "seed")
	if _, err := git(ctx, s.w.dir, "init", "--bare", "--initial-branch=main", bare); err != nil {
		return err
	}
	if _, err := git(ctx, s.w.dir, "clone", bare, work); err != nil {
		return err
	}
	for _, c := range []string{"c1", "c2", "c3", "c4"} {
		dir := filepath.Join(work, "clusters", c, "podinfo")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		body := fmt.Sprintf(seedKustomization, c, s.w.regHost+"/demo/podinfo")
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(body), 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{{"checkout", "-b", "main"}, {"add", "."}, {"commit", "-m", "seed"}, {"push", "origin", "main"}} {
		if _, err := git(ctx, work, args...); err != nil {
			return err
		}
	}
	s.w.repoDir = bare
	s.w.gitops = map[string]any{"url": bare, "branch": "main", "paths": []string{"clusters/{cluster}/podinfo/kustomization.yaml"}}
	return nil
}

// clone clones the deployments repository afresh.
func (s *scenario) clone(ctx context.Context) (string, error) {
	dir, err := os.MkdirTemp(s.w.dir, "clone-")
	if err != nil {
		return "", err
	}
	_, err = git(ctx, s.w.dir, "clone", "--branch", "main", s.w.repoDir, dir)
	return dir, err
}

func (s *scenario) repositoryPins(ctx context.Context, version, clusters string) error {
	dir, err := s.clone(ctx)
	if err != nil {
		return err
	}
	digest := s.w.digests[version]
	for _, c := range strings.Split(clusters, ",") {
		b, err := os.ReadFile(filepath.Join(dir, "clusters", c, "podinfo", "kustomization.yaml"))
		if err != nil {
			return err
		}
		want := fmt.Sprintf(seedKustomization, c, s.w.regHost+"/demo/podinfo")
		want = strings.Replace(want, "newTag: 0.9.0", "newTag: "+version+"\n    digest: "+digest, 1)
		if string(b) != want {
			return fmt.Errorf("clusters/%s/podinfo/kustomization.yaml is\n%s\nwant (comments and order kept)\n%s", c, b, want)
		}
	}
	return nil
}

func (s *scenario) historyNamesRollout(ctx context.Context, version string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	out, err := git(ctx, s.w.dir, "--git-dir", s.w.repoDir, "log", "--format=%B", "main")
	if err != nil {
		return err
	}
	if !strings.Contains(out, id) || !strings.Contains(out, version) {
		return fmt.Errorf("no commit names rollout %s and version %s:\n%s", id, version, out)
	}
	return nil
}
