package features

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cucumber/godog"
	"sigs.k8s.io/yaml"
)

func (s *scenario) registerSeedSteps(sc *godog.ScenarioContext) {
	sc.Step("^`flotilla config check` runs on \"([^\"]*)\" with its secrets in the environment$", s.checkExample)
	sc.Step("^`flotilla config check` runs on \"([^\"]*)\" with \"([^\"]*)\" set to \"([^\"]*)\"$", s.checkEditedExample)
	sc.Step(`^it reports the configuration valid$`, s.checkReportedValid)
	sc.Step(`^it fails naming "([^"]*)" because "([^"]*)"$`, s.checkFailedNaming)
}

// exampleSecrets are the environment variables the examples read their
// secrets from.
var exampleSecrets = []string{
	"FLOTILLA_REGISTRY_TOKEN", "FLOTILLA_GITHUB_SECRET", "FLOTILLA_FLAGGER_TOKEN", "FLOTILLA_DEPLOYMENTS_TOKEN",
	"FLOTILLA_API_TOKEN", "FLOTILLA_RELEASE_BOT_TOKEN", "GIT_API_TOKEN",
}

// repoFile is a file of the repository (the features run in features/).
func repoFile(rel string) string { return filepath.Join("..", rel) }

func (s *scenario) runCheck(ctx context.Context, path string) error {
	cmd := exec.CommandContext(ctx, flotillaBin, "config", "check", "--config", path)
	cmd.Env = os.Environ()
	for _, e := range exampleSecrets {
		cmd.Env = append(cmd.Env, e+"=secret-of-"+strings.ToLower(e))
	}
	out, err := cmd.CombinedOutput()
	s.checkOut, s.checkCode = string(out), 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return err
		}
		s.checkCode = ee.ExitCode()
	}
	return nil
}

func (s *scenario) checkExample(ctx context.Context, file string) error {
	return s.checkEditedExample(ctx, file, "", "")
}

// checkEditedExample checks a copy of an example whose clusters are the
// fleet's (the examples name the kubeconfigs of `make fleet-up`'s), with
// one field set (none when path is "").
func (s *scenario) checkEditedExample(ctx context.Context, file, path, value string) error {
	b, err := os.ReadFile(repoFile(file))
	if err != nil {
		return err
	}
	var cfg any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return err
	}
	f, _ := cfg.(map[string]any)["fleet"].(map[string]any)
	clusters, _ := f["clusters"].([]any)
	for _, c := range clusters {
		m := c.(map[string]any)
		cl, ok := s.fleet().Cluster(fmt.Sprint(m["name"]))
		if !ok {
			return fmt.Errorf("%s names cluster %v, which the fleet lacks", file, m["name"])
		}
		m["kubeconfig"] = cl.Kubeconfig
	}
	if path != "" {
		var v any
		if err := yaml.Unmarshal([]byte(value), &v); err != nil {
			return err
		}
		if err := setPath(cfg, path, v); err != nil {
			return err
		}
	}
	if b, err = yaml.Marshal(cfg); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "flotilla-seed-*")
	if err != nil {
		return err
	}
	s.onCleanup(func() { _ = os.RemoveAll(dir) })
	p := filepath.Join(dir, filepath.Base(file))
	if err := os.WriteFile(p, b, 0o600); err != nil {
		return err
	}
	return s.runCheck(ctx, p)
}

// setPath sets a field of a decoded YAML document by its path as
// flotilla reports it ("applications[0].workload.apiVersion").
func setPath(doc any, path string, v any) error {
	parts := strings.Split(path, ".")
	cur := doc
	for i, part := range parts {
		name, idx := part, -1
		if j := strings.IndexByte(part, '['); j >= 0 {
			n, err := strconv.Atoi(strings.TrimSuffix(part[j+1:], "]"))
			if err != nil {
				return fmt.Errorf("path %s: %w", path, err)
			}
			name, idx = part[:j], n
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return fmt.Errorf("path %s: %s is not a map", path, strings.Join(parts[:i], "."))
		}
		last := i == len(parts)-1
		if idx < 0 {
			if last {
				m[name] = v
				return nil
			}
			if m[name] == nil {
				m[name] = map[string]any{}
			}
			cur = m[name]
			continue
		}
		l, ok := m[name].([]any)
		if !ok || idx >= len(l) {
			return fmt.Errorf("path %s: no %s", path, part)
		}
		if last {
			l[idx] = v
			return nil
		}
		cur = l[idx]
	}
	return nil
}

func (s *scenario) checkReportedValid() error {
	if s.checkCode != 0 || !strings.Contains(s.checkOut, ": valid: ") {
		return fmt.Errorf("config check exited %d:\n%s", s.checkCode, s.checkOut)
	}
	return nil
}

func (s *scenario) checkFailedNaming(path, reason string) error {
	if s.checkCode == 0 {
		return fmt.Errorf("config check passed:\n%s", s.checkOut)
	}
	for _, l := range strings.Split(s.checkOut, "\n") {
		if strings.Contains(l, path+": ") && strings.Contains(l, reason) {
			return nil
		}
	}
	return fmt.Errorf("config check exited %d without naming %s (%s):\n%s", s.checkCode, path, reason, s.checkOut)
}
