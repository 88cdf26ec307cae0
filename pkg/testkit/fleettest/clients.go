package fleettest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	flaggerclient "github.com/fluxcd/flagger/pkg/client/clientset/versioned"
	tektonclient "github.com/tektoncd/pipeline/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

// Clients talk to one cluster of the fleet.
type Clients struct {
	Name    string
	Config  *rest.Config
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	Flagger flaggerclient.Interface
	Tekton  tektonclient.Interface
}

// NewClients builds clients for c.
func NewClients(c localfleet.Cluster) (*Clients, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	cl := &Clients{Name: c.Name, Config: cfg}
	if cl.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if cl.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if cl.Flagger, err = flaggerclient.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if cl.Tekton, err = tektonclient.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return cl, nil
}

// Namespace creates a namespace with a unique name derived from prefix and
// deletes it when the test ends.
func (c *Clients) Namespace(ctx context.Context, tb testing.TB, prefix string) string {
	tb.Helper()
	ns, err := c.CreateNamespace(ctx, prefix)
	if err != nil {
		tb.Fatalf("creating namespace in %s: %v", c.Name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	return ns
}

// CreateNamespace creates a namespace named prefix-<random>.
func (c *Clients) CreateNamespace(ctx context.Context, prefix string) (string, error) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + hex.EncodeToString(b)}}
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	return ns.Name, nil
}
