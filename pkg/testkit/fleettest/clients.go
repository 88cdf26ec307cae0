package fleettest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	flaggerclient "github.com/fluxcd/flagger/pkg/client/clientset/versioned"
	tektonclient "github.com/tektoncd/pipeline/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
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

// CreateNamespace creates a namespace named prefix-<random> and waits for
// its default ServiceAccount: the controller-manager makes it a moment
// later, and a pod created before it is refused (Tekton fails a TaskRun
// whose pod it could not create: this once failed CI).
func (c *Clients) CreateNamespace(ctx context.Context, prefix string) (string, error) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + hex.EncodeToString(b)}}
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return "", fmt.Errorf("waiting for the default ServiceAccount of namespace %s: %w", ns.Name, err)
	}
	return ns.Name, nil
}
