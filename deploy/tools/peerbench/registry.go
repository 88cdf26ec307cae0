package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/deploy/tools/internal/proc"
	"github.com/flotilla-cd/flotilla/pkg/testkit/registrytest"
)

// registry is one Debian docker-registry (CNCF distribution).
type registry struct {
	dir  string
	host string
	p    *proc.Proc
}

// endpoint is one of distribution's notification endpoints.
type endpoint struct {
	name    string
	url     string
	headers map[string][]string
}

// newRegistry picks the registry's address; start runs it.
func newRegistry(ctx context.Context, dir string) (*registry, error) {
	if _, err := os.Stat(registrytest.Binary); err != nil {
		return nil, fmt.Errorf("docker-registry is not installed (make deps): %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	addr, err := proc.FreeAddr(ctx)
	if err != nil {
		return nil, err
	}
	return &registry{dir: dir, host: addr}, nil
}

// start runs docker-registry notifying each endpoint: distribution gives
// each its own queue and retries (the values of flotilla's demo and test
// kit: 2s timeout, threshold 3, back-off 500ms), so a slow receiver delays
// no other.
func (r *registry) start(ctx context.Context, endpoints []endpoint) error {
	c := map[string]any{
		"version": 0.1,
		"log":     map[string]any{"level": "info", "formatter": "text"},
		"storage": map[string]any{
			"filesystem": map[string]any{"rootdirectory": filepath.Join(r.dir, "data")},
			"delete":     map[string]any{"enabled": true},
		},
		"http": map[string]any{"addr": r.host, "secret": randomHex(16)},
	}
	if len(endpoints) > 0 {
		var eps []map[string]any
		for _, e := range endpoints {
			ep := map[string]any{"name": e.name, "url": e.url, "timeout": "2s", "threshold": 3, "backoff": "500ms"}
			if len(e.headers) > 0 {
				ep["headers"] = e.headers
			}
			eps = append(eps, ep)
		}
		c["notifications"] = map[string]any{"endpoints": eps}
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	path := filepath.Join(r.dir, "registry.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return err
	}
	if r.p, err = proc.Start(ctx, "docker-registry", filepath.Join(r.dir, "registry.log"), registrytest.Binary, "serve", path); err != nil {
		return err
	}
	return r.p.WaitHTTP(ctx, "http://"+r.host+"/v2/", 20*time.Second)
}

// restart stops the registry and starts it again at the same address with
// its storage, notifying the endpoints.
func (r *registry) restart(ctx context.Context, endpoints []endpoint) error {
	r.stop()
	return r.start(ctx, endpoints)
}

func (r *registry) stop() {
	if r.p != nil {
		r.p.Stop(5 * time.Second)
	}
}

// push writes a new random image for this machine's platform (Keel's
// polling checks it against the nodes') as repo:tag, and returns its digest
// and when its manifest PUT started (pushClock: the push's moment).
func (r *registry) push(ctx context.Context, repo, tag string) (string, time.Time, error) {
	img, err := random.Image(2048, 2)
	if err != nil {
		return "", time.Time{}, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return "", time.Time{}, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return "", time.Time{}, err
	}
	d, err := img.Digest()
	if err != nil {
		return "", time.Time{}, err
	}
	ref, err := name.NewTag(r.host+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		return "", time.Time{}, err
	}
	clock := newPushClock(remote.DefaultTransport)
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithTransport(clock)); err != nil {
		return "", time.Time{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	at := clock.manifestAt()
	if at.IsZero() {
		return "", time.Time{}, fmt.Errorf("pushing %s: no manifest PUT seen", ref)
	}
	return d.String(), at, nil
}
