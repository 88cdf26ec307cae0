package kube

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig loads a client configuration from a kubeconfig file; context picks
// one of its contexts ("" means the current one).
func RESTConfig(kubeconfig, context string) (*rest.Config, error) {
	cfg, err := restConfig(kubeconfig, context)
	if err != nil {
		return nil, err
	}
	// Fleets of many clusters and tests that create objects in bursts would
	// otherwise queue behind client-go's default 5 QPS limit.
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}

// RESTConfigFromKubeconfig is RESTConfig of a kubeconfig's content (a
// discovered cluster's, made from its source), its current context.
func RESTConfigFromKubeconfig(data []byte) (*rest.Config, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}

func restConfig(kubeconfig, context string) (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %q: %w", kubeconfig, err)
	}
	return cfg, nil
}
