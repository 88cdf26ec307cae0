package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/deploy/tools/internal/proc"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

// flotillaPoll is flotilla's default registry poll (fleet.poll.interval),
// its safety net behind the webhooks, which the bench leaves as it is.
const flotillaPoll = config.DefaultRegistryPoll

// flotilla is one `flotilla serve` with one application.
type flotilla struct {
	dir, bin, cfg string
	addr          string
	registryToken string
	p             *proc.Proc
}

// newFlotilla writes the configuration of one flotilla delivering image to
// namespace through waves; start runs it. The delivery is the demo's
// (blue/green, 1s interval, 2 iterations: the fast Flagger build's
// minimum), without its gate, with the bench's analysis check as a
// rollout webhook at check: Flagger's analysis is the same Canary behind
// every tool (bench.copyCanaries).
func newFlotilla(ctx context.Context, dir, bin, image, namespace, check string, fleet *localfleet.Fleet, waves [][]string) (*flotilla, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	addr, err := proc.FreeAddr(ctx)
	if err != nil {
		return nil, err
	}
	f := &flotilla{dir: dir, bin: bin, addr: addr, registryToken: randomHex(16)}
	secret := func(name, value string) (map[string]string, error) {
		p := filepath.Join(dir, name)
		return map[string]string{"file": p}, os.WriteFile(p, []byte(value+"\n"), 0o600)
	}
	reg, err := secret("registry.token", f.registryToken)
	if err != nil {
		return nil, err
	}
	fl, err := secret("flagger.token", randomHex(16))
	if err != nil {
		return nil, err
	}
	api, err := secret("api.token", randomHex(16))
	if err != nil {
		return nil, err
	}
	var clusters []map[string]any
	var ws []map[string]any
	for i, names := range waves {
		ws = append(ws, map[string]any{"name": fmt.Sprintf("wave-%d", i+1), "clusters": names})
		for _, n := range names {
			c, ok := fleet.Cluster(n)
			if !ok {
				return nil, fmt.Errorf("the fleet has no cluster %s", n)
			}
			clusters = append(clusters, map[string]any{"name": n, "kubeconfig": c.Kubeconfig})
		}
	}
	cfg := map[string]any{
		"server": map[string]any{"listen": addr, "dataDir": filepath.Join(dir, "data"), "apiToken": api},
		"receivers": []map[string]any{
			{"name": "registry", "type": "distribution", "secret": reg},
			{"name": "flagger", "type": "flagger", "secret": fl},
		},
		"fleet": map[string]any{"clusters": clusters, "waves": ws},
		"applications": []map[string]any{{
			"name": workload, "image": image, "track": "MinorVersion", "namespace": namespace,
			"workload": map[string]any{"kind": "Deployment", "name": workload, "container": container},
			"service":  map[string]any{"port": 9898},
			"delivery": map[string]any{
				"strategy": "blueGreen", "interval": "1s", "iterations": 2, "threshold": 1, "progressDeadline": "2m",
				"webhooks": []map[string]any{{"name": checkHook, "type": "rollout", "url": check}},
			},
		}},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	f.cfg = filepath.Join(dir, "flotilla.yaml")
	return f, os.WriteFile(f.cfg, b, 0o600)
}

func (f *flotilla) start(ctx context.Context) error {
	var err error
	f.p, err = proc.Start(ctx, "flotilla", filepath.Join(f.dir, "flotilla.log"), f.bin, "serve", "--config", f.cfg)
	if err != nil {
		return err
	}
	return f.p.WaitHTTP(ctx, "http://"+f.addr+"/readyz", 30*time.Second)
}

func (f *flotilla) stop() {
	if f.p != nil {
		f.p.Stop(10 * time.Second)
	}
}
