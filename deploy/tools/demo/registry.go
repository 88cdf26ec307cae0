package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/deploy/tools/internal/proc"
)

const dockerRegistryBin = "/usr/bin/docker-registry"

// ensureDockerRegistry installs Debian's docker-registry package (CNCF
// distribution 2.8.x) when it is missing: apt-cache policy first (is there
// such a package?), then apt-get update && apt-get install.
func ensureDockerRegistry(ctx context.Context, logf func(string, ...any)) error {
	if _, err := os.Stat(dockerRegistryBin); err == nil {
		return nil
	}
	apt := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("%s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	hasCandidate := func() (bool, string, error) {
		out, err := apt("apt-cache", "policy", "docker-registry")
		return strings.Contains(out, "Candidate:") && !strings.Contains(out, "Candidate: (none)"), out, err
	}
	ok, _, err := hasCandidate()
	if err != nil {
		return err
	}
	logf("docker-registry is missing: apt-get update && apt-get install -y docker-registry")
	if _, err := apt("apt-get", "update", "-qq"); err != nil {
		return err
	}
	if !ok {
		// The package lists may have been stale: ask again after the update.
		ok, out, err := hasCandidate()
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("no docker-registry package in the configured Debian mirrors:\n%s", out)
		}
	}
	if _, err := apt("apt-get", "install", "-y", "-qq", "--no-install-recommends", "docker-registry"); err != nil {
		return err
	}
	if _, err := os.Stat(dockerRegistryBin); err != nil {
		return fmt.Errorf("docker-registry installed but %s is missing", dockerRegistryBin)
	}
	return nil
}

func dockerRegistryVersion(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, dockerRegistryBin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(out))
	return f[len(f)-1]
}

// registryConfig is a distribution configuration: filesystem storage in dir,
// listening on addr, notifying hookURL with a bearer token.
func registryConfig(dir, addr, hookURL, token string) ([]byte, error) {
	return yaml.Marshal(map[string]any{
		"version": 0.1,
		"log":     map[string]any{"level": "info", "formatter": "text", "fields": map[string]any{"service": "registry"}},
		"storage": map[string]any{
			"filesystem": map[string]any{"rootdirectory": filepath.Join(dir, "registry-data")},
			"delete":     map[string]any{"enabled": true},
		},
		"http": map[string]any{"addr": addr, "secret": randomHex(16)},
		"notifications": map[string]any{
			"endpoints": []map[string]any{{
				"name":      "flotilla",
				"url":       hookURL,
				"headers":   map[string][]string{"Authorization": {"Bearer " + token}},
				"timeout":   "2s",
				"threshold": 3,
				"backoff":   "500ms",
			}},
		},
	})
}

// startRegistry runs docker-registry with a generated configuration and
// waits until it serves /v2/.
func startRegistry(ctx context.Context, dir, addr, hookURL, token string) (*proc.Proc, error) {
	cfg, err := registryConfig(dir, addr, hookURL, token)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "registry.yaml")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		return nil, err
	}
	p, err := proc.Start(ctx, "docker-registry", filepath.Join(dir, "registry.log"), dockerRegistryBin, "serve", path)
	if err != nil {
		return nil, err
	}
	if err := p.WaitHTTP(ctx, "http://"+addr+"/v2/", 20*time.Second); err != nil {
		p.Stop(5 * time.Second)
		return nil, err
	}
	return p, nil
}
