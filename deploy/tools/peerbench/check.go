package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

	"github.com/flotilla-cd/flotilla/deploy/tools/internal/proc"
)

// checkHook names the analysis check in every tool's Canary: a Flagger
// rollout webhook, called at every step of the analysis, the same for all.
const checkHook = "bench-check"

// version is one pushed version: its tag (as Keel and Flux write it) and
// digest (as flotilla does).
type version struct{ tag, digest string }

// checker serves the analysis check: it fails a version marked bad in the
// clusters marked failing, so that Flagger's analysis fails it there the
// same way whichever tool put it in the Deployment, and passes everything
// else. The cluster is the webhook's metadata (flotilla's Canary gives a
// webhook its cluster; the peers' Canaries are copies of each cluster's).
type checker struct {
	mu      sync.Mutex
	failing map[string]bool    // cluster -> the bad version fails there
	bad     map[string]version // namespace -> the version that fails
	// refused is when the check first failed the bad version, by
	// cluster/namespace.
	refused map[string]time.Time
	// current is the image of the namespace's Deployment (the canary's
	// target, which carries the version under analysis) in a cluster.
	current func(cluster, ns string) string
	srv     *http.Server
	url     string
}

// fails tells whether the analysis of img in the cluster fails.
func fails(cluster string, failing map[string]bool, bad version, img string) bool {
	if bad.tag == "" && bad.digest == "" {
		return false
	}
	return failing[cluster] && carries(img, bad.tag, bad.digest)
}

func newChecker(ctx context.Context, failing []string, current func(cluster, ns string) string) (*checker, error) {
	c := &checker{failing: map[string]bool{}, bad: map[string]version{}, refused: map[string]time.Time{}, current: current}
	for _, n := range failing {
		c.failing[n] = true
	}
	l, err := proc.Listen(ctx)
	if err != nil {
		return nil, err
	}
	c.url = "http://" + l.Addr().String() + "/check"
	c.srv = &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() { _ = c.srv.Serve(l) }()
	return c, nil
}

// setBad marks the namespace's version that fails.
func (c *checker) setBad(ns string, v version) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bad[ns] = v
}

// refusedIn is when the check first failed the namespace's bad version in
// the cluster.
func (c *checker) refusedIn(cluster, ns string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.refused[cluster+"/"+ns]
	return at, ok
}

func (c *checker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var p flaggerv1.CanaryWebhookPayload
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
		http.Error(w, "decoding Flagger's payload: "+err.Error(), http.StatusBadRequest)
		return
	}
	cluster := p.Metadata["cluster"]
	img := c.current(cluster, p.Namespace)
	c.mu.Lock()
	bad := c.bad[p.Namespace]
	c.mu.Unlock()
	if fails(cluster, c.failing, bad, img) {
		c.mu.Lock()
		if _, ok := c.refused[cluster+"/"+p.Namespace]; !ok {
			c.refused[cluster+"/"+p.Namespace] = time.Now()
		}
		c.mu.Unlock()
		http.Error(w, fmt.Sprintf("%s fails in %s (the bench's failing version)", shortImage(img), cluster), http.StatusForbidden)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (c *checker) stop() {
	if c != nil && c.srv != nil {
		_ = c.srv.Close()
	}
}
