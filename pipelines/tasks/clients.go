package tasks

import (
	"fmt"
	"runtime"
	"sync"
	"weak"

	flaggerclient "github.com/fluxcd/flagger/pkg/client/clientset/versioned"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
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
	kube, err := kubernetes.NewForConfig(protobuf(cfg))
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

// protobuf is cfg speaking protobuf to the API server, as Kubernetes' own
// controllers do, for the built-in types a task reads and patches: the
// server encodes and the task decodes a Deployment in a fraction of the
// CPU JSON takes (a wave of 1,000 runs reads 1,000). Patch bodies stay
// what they are (strategic merge and apply patches are JSON); Flagger's
// custom resources have no protobuf and keep their JSON client.
func protobuf(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = apiruntime.ContentTypeProtobuf
	c.AcceptContentTypes = apiruntime.ContentTypeProtobuf + "," + apiruntime.ContentTypeJSON
	return c
}
