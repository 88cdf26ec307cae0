package features

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cucumber/godog"
	"k8s.io/client-go/tools/clientcmd"
)

func (s *scenario) registerInstallSteps(sc *godog.ScenarioContext) {
	sc.Step("^`flotilla config check --live` reports the configuration valid and clusters \"([^\"]*)\" ready$", s.configCheckReady)
	sc.Step("^`flotilla config check --live` of the configuration with a cluster \"([^\"]*)\" whose API server does not answer fails naming it$", s.configCheckUnreachable)
	sc.Step("^`flotilla config check` of the configuration with a wave naming cluster \"([^\"]*)\" the fleet lacks fails with the field's path$", s.configCheckInvalid)
}

// configCheck runs `flotilla config check` on a config and returns its
// output and exit code.
func configCheck(ctx context.Context, cfgPath string, live bool) (string, int, error) {
	args := []string{"config", "check", "--config", cfgPath, "--timeout", "5s"}
	if live {
		args = append(args, "--live")
	}
	return runFlotilla(ctx, args...)
}

func (s *scenario) configCheckReady(ctx context.Context, clusters string) error {
	out, code, err := configCheck(ctx, s.w.flotilla.config, true)
	if err != nil {
		return err
	}
	if code != 0 || !strings.Contains(out, ": valid: ") {
		return fmt.Errorf("config check exited %d:\n%s", code, out)
	}
	for _, c := range strings.Split(clusters, ",") {
		if !strings.Contains(out, "cluster "+c+": ready (Kubernetes v1.34") {
			return fmt.Errorf("config check does not report %s ready:\n%s", c, out)
		}
	}
	return nil
}

// editedConfig writes a copy of the scenario's config changed by edit.
func (s *scenario) editedConfig(name string, edit func(cfg map[string]any) error) (string, error) {
	return s.editedConfigOf(s.w.flotilla.config, name, edit)
}

func (s *scenario) configCheckUnreachable(ctx context.Context, name string) error {
	fleet := func(cfg map[string]any) (map[string]any, []any) {
		f, _ := cfg["fleet"].(map[string]any)
		cl, _ := f["clusters"].([]any)
		return f, cl
	}
	path, err := s.editedConfig("unreachable.yaml", func(cfg map[string]any) error {
		f, clusters := fleet(cfg)
		if len(clusters) == 0 {
			return errors.New("the config has no clusters")
		}
		first, _ := clusters[0].(map[string]any)
		kc, _ := first["kubeconfig"].(string)
		// The first cluster's kubeconfig, pointed at a port nobody serves.
		raw, err := clientcmd.LoadFromFile(kc)
		if err != nil {
			return err
		}
		for _, c := range raw.Clusters {
			c.Server = "https://127.0.0.1:1"
		}
		dead := filepath.Join(s.w.dir, name+".kubeconfig")
		if err := clientcmd.WriteToFile(*raw, dead); err != nil {
			return err
		}
		f["clusters"] = append(clusters, map[string]any{"name": name, "kubeconfig": dead})
		waves, _ := f["waves"].([]any)
		last, _ := waves[len(waves)-1].(map[string]any)
		names, _ := last["clusters"].([]any)
		last["clusters"] = append(names, name)
		return nil
	})
	if err != nil {
		return err
	}
	out, code, err := configCheck(ctx, path, true)
	if err != nil {
		return err
	}
	if code != 1 || !strings.Contains(out, "cluster "+name+": unreachable at https://127.0.0.1:1") || !strings.Contains(out, "1 cluster(s) not ready") {
		return fmt.Errorf("config check exited %d, want 1 naming %s unreachable:\n%s", code, name, out)
	}
	return nil
}

func (s *scenario) configCheckInvalid(ctx context.Context, name string) error {
	path, err := s.editedConfig("invalid.yaml", func(cfg map[string]any) error {
		f, _ := cfg["fleet"].(map[string]any)
		waves, _ := f["waves"].([]any)
		first, _ := waves[0].(map[string]any)
		names, _ := first["clusters"].([]any)
		first["clusters"] = append(names, name)
		return nil
	})
	if err != nil {
		return err
	}
	out, code, err := configCheck(ctx, path, false)
	if err != nil {
		return err
	}
	if code != 1 || !strings.Contains(out, "fleet.waves[0].clusters[") || !strings.Contains(out, name) {
		return fmt.Errorf("config check exited %d, want 1 naming fleet.waves[0].clusters[...] %q:\n%s", code, name, out)
	}
	return nil
}
