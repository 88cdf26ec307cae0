package localfleet

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/flotilla-cd/flotilla/pkg/kube"
)

// StartFlagger runs Flagger in a cluster of a fleet started with NoFlagger
// as the Deployment namespace/name there says (`flotilla fleet bootstrap`
// applied it; kwok only pretends to run its pod): the container's
// arguments, and the token of the Deployment's ServiceAccount, so that
// Flagger runs with the rights bootstrap gave it. Only -kubeconfig and
// -port are the fleet's. It waits until Flagger is healthy.
func (f *Fleet) StartFlagger(ctx context.Context, cluster, namespace, name string) (Process, error) {
	idx := slices.IndexFunc(f.Clusters, func(c Cluster) bool { return c.Name == cluster })
	if idx < 0 {
		return Process{}, fmt.Errorf("the fleet has no cluster %q", cluster)
	}
	c := f.Clusters[idx]
	cfg, err := c.RESTConfig()
	if err != nil {
		return Process{}, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Process{}, err
	}
	// Flagger exits when its CRDs are not served yet.
	crdCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := kube.WaitCRDsEstablished(crdCtx, cfg, "canaries.flagger.app", "metrictemplates.flagger.app", "alertproviders.flagger.app"); err != nil {
		return Process{}, err
	}
	d, err := cs.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Process{}, fmt.Errorf("reading Flagger's Deployment: %w", err)
	}
	ci := slices.IndexFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "flagger" })
	if ci < 0 {
		return Process{}, fmt.Errorf("no container flagger in Deployment %s/%s", namespace, name)
	}
	sa := d.Spec.Template.Spec.ServiceAccountName
	tok, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return Process{}, fmt.Errorf("requesting a token of ServiceAccount %s/%s: %w", namespace, sa, err)
	}
	kc := filepath.Join(f.Dir, c.Name, "flagger.kubeconfig")
	if err := writeKubeconfig(kc, c.Name, c.APIServer, tok.Status.Token); err != nil {
		return Process{}, err
	}
	args := slices.DeleteFunc(slices.Clone(d.Spec.Template.Spec.Containers[ci].Args), func(a string) bool {
		return strings.HasPrefix(a, "-kubeconfig=") || strings.HasPrefix(a, "-port=")
	})
	args = append(args, "-kubeconfig="+kc, "-port="+strconv.Itoa(c.FlaggerPort))
	bins := binaries{dir: f.BinDir}
	p, err := startProcess(ctx, f.Dir, c.Name+"-flagger", bins.flagger(c.StockFlagger), args, f.proxyEnv(c.Name), f.DieWithParent)
	if err != nil {
		return p, err
	}
	if err := f.record(idx, p); err != nil {
		return p, err
	}
	return p, waitFlagger(ctx, p, c)
}
