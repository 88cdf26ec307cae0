package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/deploy/tools/internal/proc"
)

// startKeel runs one Keel out of cluster with a cluster's kubeconfig, as
// its chart runs it but for --no-incluster (its documented flag for a Keel
// outside the cluster). Settings that are not Keel's defaults:
//   - KEEL_HTTP_PORT: the port of its webhook server (a patch of
//     deploy/tools/peers/build.sh: one Keel per cluster on one machine);
//   - XDG_DATA_HOME: where its SQLite database goes (the chart mounts /data);
//   - INSECURE_REGISTRY=true: the chart's insecureRegistry, since the
//     loopback registries speak plain HTTP; without it Keel's polling asks
//     for https:// and fails.
//
// Polling stays on (POLL, default true) at its default schedule (@every 1m):
// it only watches workloads labelled keel.sh/trigger=poll.
func startKeel(ctx context.Context, dir, bin, kubeconfig string) (*proc.Proc, string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	addr, err := proc.FreeAddr(ctx)
	if err != nil {
		return nil, "", err
	}
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	// env sets the environment and execs Keel: the process is Keel's.
	argv := []string{"/usr/bin/env",
		"KEEL_HTTP_PORT=" + port, "XDG_DATA_HOME=" + dir, "INSECURE_REGISTRY=true",
		bin, "--no-incluster", "--kubeconfig=" + kubeconfig}
	p, err := proc.Start(ctx, "keel", filepath.Join(dir, "keel.log"), argv...)
	if err != nil {
		return nil, "", err
	}
	if err := p.WaitHTTP(ctx, "http://"+addr+"/healthz", 60*time.Second); err != nil {
		p.Stop(5 * time.Second)
		return nil, "", fmt.Errorf("keel with %s: %w", kubeconfig, err)
	}
	return p, addr, nil
}
