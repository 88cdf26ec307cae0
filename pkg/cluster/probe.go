package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// FlaggerGroupVersion is the API of Flagger's Canary.
const FlaggerGroupVersion = "flagger.app/v1beta1"

// Probe is what a cluster answered to Reach.
type Probe struct {
	// Version is the API server's Kubernetes version.
	Version string
	// Flagger tells whether Flagger's Canary resource is served.
	Flagger bool
}

// Reach asks a cluster's API server for its version and whether it serves
// Flagger's Canary, within ctx.
func Reach(ctx context.Context, cfg *rest.Config) (Probe, error) {
	cfg = rest.CopyConfig(cfg)
	if dl, ok := ctx.Deadline(); ok {
		cfg.Timeout = max(time.Millisecond, time.Until(dl))
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return Probe{}, err
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return Probe{}, fmt.Errorf("reaching the API server: %w", err)
	}
	p := Probe{Version: v.GitVersion}
	res, err := dc.ServerResourcesForGroupVersion(FlaggerGroupVersion)
	switch {
	case apierrors.IsNotFound(err):
		return p, nil
	case err != nil:
		return p, fmt.Errorf("reading %s: %w", FlaggerGroupVersion, err)
	}
	p.Flagger = slices.ContainsFunc(res.APIResources, func(r metav1.APIResource) bool { return r.Name == "canaries" })
	return p, nil
}
