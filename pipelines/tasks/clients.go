package tasks

import (
	"fmt"
	"runtime"
	"sync"
	"weak"

	flaggerclient "github.com/fluxcd/flagger/pkg/client/clientset/versioned"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// clients are the Kubernetes and Flagger clients of one cluster's config.
type clients struct {
	kube    kubernetes.Interface
	flagger flaggerclient.Interface
}

// made keeps the clients made of each config while the config lives: the
// embedded executor hands every run of a cluster the same *rest.Config
// (pkg/cluster.Set's, until a reload replaces it), and making the clients
// again for each run of a 1,000-cluster wave was a tenth of the CPU
// flotilla spent starting the wave (BENCHMARKS.md, "One wave of 1,000
// clusters"). A config no longer referenced elsewhere is dropped with its
// clients (weak keys; clientsets copy the config they are made of).
var made sync.Map // weak.Pointer[rest.Config] -> *clients

// clientsFor returns the Kubernetes and Flagger clients of a cluster a
// task writes to.
func clientsFor(cfg *rest.Config) (kubernetes.Interface, flaggerclient.Interface, error) {
	key := weak.Make(cfg)
	if c, ok := made.Load(key); ok {
		return c.(*clients).kube, c.(*clients).flagger, nil
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("creating kubernetes client: %w", err)
	}
	fl, err := flaggerclient.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("creating flagger client: %w", err)
	}
	if _, loaded := made.LoadOrStore(key, &clients{kube: kube, flagger: fl}); !loaded {
		runtime.AddCleanup(cfg, func(k weak.Pointer[rest.Config]) { made.Delete(k) }, key)
	}
	return kube, fl, nil
}
