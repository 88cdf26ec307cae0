package kube

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig loads a client configuration from a kubeconfig file; context picks
// one of its contexts ("" means the current one).
func RESTConfig(kubeconfig, context string) (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %q: %w", kubeconfig, err)
	}
	// Fleets of many clusters and tests that create objects in bursts would
	// otherwise queue behind client-go's default 5 QPS limit.
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}
