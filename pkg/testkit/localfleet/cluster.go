package localfleet

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/pkg/kube"
)

// portsPerCluster is the size of each cluster's port block; servicePorts
// are the fleet-wide processes' (Prometheus, the load tester, the service
// proxy).
const (
	portsPerCluster = 6
	servicePorts    = 3
)

type clusterPorts struct {
	apiserver, flagger, tektonProbes, tektonHealth, tektonMetrics, tektonProfiling int
}

func newClusterPorts(p []int) clusterPorts {
	return clusterPorts{p[0], p[1], p[2], p[3], p[4], p[5]}
}

// FakeNode is the name of the kwok node in every cluster.
const FakeNode = "kwok-node-0"

type clusterStarter struct {
	fleet  *Fleet
	index  int
	opts   Options
	bins   binaries
	shared sharedFiles
	token  string
}

func (s clusterStarter) c() Cluster { return s.fleet.Clusters[s.index] }

func (s clusterStarter) dir(parts ...string) string {
	return filepath.Join(append([]string{s.fleet.Dir, s.c().Name}, parts...)...)
}

func (s clusterStarter) run(ctx context.Context, name, bin string, args []string, env ...string) (Process, error) {
	p, err := startProcess(ctx, s.fleet.Dir, s.c().Name+"-"+name, bin, args, env, s.opts.DieWithParent)
	if err != nil {
		return p, err
	}
	return p, s.fleet.record(s.index, p)
}

func (s clusterStarter) start(ctx context.Context) error {
	c, log := s.c(), s.opts.Logger.With("cluster", s.c().Name)
	if err := writeKubeconfig(c.Kubeconfig, c.Name, c.APIServer, s.token); err != nil {
		return err
	}
	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	log.Info("starting kube-apiserver", "url", c.APIServer)
	api, err := s.startAPIServer(ctx, cfg)
	if err != nil {
		return err
	}
	_ = api
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	log.Info("starting controller-manager, scheduler, kwok")
	if err := s.startControlPlane(ctx); err != nil {
		return err
	}
	kwok, err := s.startKwok(ctx, cs)
	if err != nil {
		return err
	}
	applier, err := kube.NewApplier(cfg, "flotilla-fleet")
	if err != nil {
		return err
	}
	var flagger Process
	if !s.opts.NoFlagger {
		log.Info("starting flagger", "stock", c.StockFlagger)
		if flagger, err = s.startFlagger(ctx, cfg, applier); err != nil {
			return err
		}
	}
	var tekton Process
	if c.Tekton {
		log.Info("starting tekton pipelines controller")
		if tekton, err = s.startTekton(ctx, cfg, applier); err != nil {
			return err
		}
	}
	if err := waitFor(ctx, kwok, 60*time.Second, c.Name+" node Ready and default service account", func(ctx context.Context) (bool, error) {
		return nodeReady(ctx, cs) && serviceAccountExists(ctx, cs), nil
	}); err != nil {
		return err
	}
	if !s.opts.NoFlagger {
		if err := waitFlagger(ctx, flagger, c); err != nil {
			return err
		}
	}
	if c.Tekton {
		if err := waitFor(ctx, tekton, 60*time.Second, c.Name+" tekton healthy", func(ctx context.Context) (bool, error) {
			return httpOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/readiness", c.ports.tektonProbes), ""), nil
		}); err != nil {
			return err
		}
	}
	log.Info("cluster ready")
	return nil
}

func (s clusterStarter) startAPIServer(ctx context.Context, cfg *rest.Config) (Process, error) {
	c := s.c()
	args := []string{
		"--etcd-servers=" + s.fleet.EtcdURL,
		"--etcd-prefix=/registry-" + c.Name,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.ports.apiserver),
		"--cert-dir=" + s.dir("certs"),
		"--token-auth-file=" + s.shared.tokens,
		"--client-ca-file=" + s.shared.clientCA,
		"--kubelet-client-certificate=" + s.shared.kubeletClientCert,
		"--kubelet-client-key=" + s.shared.kubeletClientKey,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + s.shared.saPub,
		"--service-account-signing-key-file=" + s.shared.saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--endpoint-reconciler-type=none",
		// A real node's kubelet (StartRealNode) registers its name as a
		// Hostname address, which does not resolve, next to its IP.
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--profiling=false",
		"--v=0",
		"--audit-policy-file=" + s.shared.auditPolicy,
		"--audit-log-path=" + c.AuditLog,
		"--audit-log-format=json",
		"--audit-log-maxsize=200",
		"--audit-log-maxbackup=1",
	}
	p, err := s.run(ctx, "kube-apiserver", s.bins.apiserver(), args)
	if err != nil {
		return p, err
	}
	rc, err := rest.RESTClientFor(withoutGroup(cfg))
	if err != nil {
		return p, fmt.Errorf("creating REST client: %w", err)
	}
	return p, waitFor(ctx, p, 90*time.Second, c.Name+" kube-apiserver ready", func(ctx context.Context) (bool, error) {
		body, err := rc.Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
}

// withoutGroup makes cfg usable with rest.RESTClientFor for raw paths.
func withoutGroup(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.NegotiatedSerializer = kubernetesCodecs()
	return c
}

func (s clusterStarter) kubeconfigFlags(prefix string, names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, prefix+n+"="+s.c().Kubeconfig)
	}
	return out
}

func (s clusterStarter) startControlPlane(ctx context.Context) error {
	cm := append(s.kubeconfigFlags("--", "kubeconfig", "authentication-kubeconfig", "authorization-kubeconfig"),
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--service-account-private-key-file="+s.shared.saKey,
		"--use-service-account-credentials=false",
		"--controllers=*",
		"--node-monitor-grace-period=120s",
		"--flex-volume-plugin-dir="+s.dir("flexvolume"),
	)
	if _, err := s.run(ctx, "kube-controller-manager", s.bins.controllerMgr(), cm); err != nil {
		return err
	}
	sched := append(s.kubeconfigFlags("--", "kubeconfig", "authentication-kubeconfig", "authorization-kubeconfig"),
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0")
	_, err := s.run(ctx, "kube-scheduler", s.bins.scheduler(), sched)
	return err
}

func (s clusterStarter) startKwok(ctx context.Context, cs kubernetes.Interface) (Process, error) {
	// A node lease left by an earlier kwok strands the node NotReady.
	if err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, FakeNode, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return Process{}, fmt.Errorf("deleting stale node lease: %w", err)
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        FakeNode,
			Labels:      map[string]string{"type": "kwok", "kubernetes.io/hostname": FakeNode, "kubernetes.io/os": "linux"},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("64"),
				corev1.ResourceMemory: resource.MustParse("256Gi"),
				corev1.ResourcePods:   resource.MustParse("1000"),
			},
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("64"),
				corev1.ResourceMemory: resource.MustParse("256Gi"),
				corev1.ResourcePods:   resource.MustParse("1000"),
			},
		},
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return Process{}, fmt.Errorf("creating fake node: %w", err)
	}
	args := []string{
		"--kubeconfig=" + s.c().Kubeconfig,
		// Only the fake node: a real node (StartRealNode) is its kubelet's.
		"--manage-single-node=" + FakeNode,
		"--node-port=0",
		"--node-lease-duration-seconds=40",
		"--config=" + s.shared.stages,
		"--server-address=",
	}
	return s.run(ctx, "kwok", s.bins.kwok(), args)
}

func (s clusterStarter) startFlagger(ctx context.Context, cfg *rest.Config, a *kube.Applier) (Process, error) {
	if err := applyFile(ctx, a, s.bins.flaggerCRD(), nil); err != nil {
		return Process{}, err
	}
	if err := kube.WaitCRDsEstablished(ctx, cfg, "canaries.flagger.app", "metrictemplates.flagger.app", "alertproviders.flagger.app"); err != nil {
		return Process{}, err
	}
	c := s.c()
	args := []string{
		"-kubeconfig=" + c.Kubeconfig,
		"-mesh-provider=" + cmp.Or(c.MeshProvider, "kubernetes"),
		"-metrics-server=" + cmp.Or(s.fleet.PrometheusURL, "http://127.0.0.1:1"),
		"-port=" + strconv.Itoa(c.FlaggerPort),
		"-cluster-name=" + c.Name,
		"-control-loop-interval=2s",
		"-log-level=info",
	}
	if s.opts.FlaggerEventWebhook != "" {
		args = append(args, "-event-webhook="+s.opts.FlaggerEventWebhook)
	}
	return s.run(ctx, "flagger", s.bins.flagger(c.StockFlagger), args, s.fleet.proxyEnv(c.Name)...)
}

func waitFlagger(ctx context.Context, p Process, c Cluster) error {
	return waitFor(ctx, p, 60*time.Second, c.Name+" flagger healthy", func(ctx context.Context) (bool, error) {
		return httpOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", c.FlaggerPort), ""), nil
	})
}

func (s clusterStarter) startTekton(ctx context.Context, cfg *rest.Config, a *kube.Applier) (Process, error) {
	dir := s.bins.tektonConfig()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return Process{}, fmt.Errorf("listing tekton config: %w", err)
	}
	crds, err := filepath.Glob(filepath.Join(dir, "crds", "*.yaml"))
	if err != nil {
		return Process{}, fmt.Errorf("listing tekton CRDs: %w", err)
	}
	// No conversion webhook runs here (v1 is the storage version), so the CRDs
	// go in without their conversion stanza.
	for _, f := range crds {
		if err := applyFile(ctx, a, f, func(o *unstructured.Unstructured) { unstructured.RemoveNestedField(o.Object, "spec", "conversion") }); err != nil {
			return Process{}, err
		}
	}
	// The namespace file sorts first (100-namespace.yaml), then the config maps.
	for _, f := range files {
		if err := applyFile(ctx, a, f, nil); err != nil {
			return Process{}, err
		}
	}
	if err := kube.WaitCRDsEstablished(ctx, cfg, "pipelineruns.tekton.dev", "taskruns.tekton.dev", "pipelines.tekton.dev", "tasks.tekton.dev", "customruns.tekton.dev", "stepactions.tekton.dev"); err != nil {
		return Process{}, err
	}
	c := s.c()
	env := []string{
		"SYSTEM_NAMESPACE=tekton-pipelines",
		"CONFIG_DEFAULTS_NAME=config-defaults",
		"CONFIG_LOGGING_NAME=config-logging",
		"CONFIG_OBSERVABILITY_NAME=config-observability",
		"CONFIG_FEATURE_FLAGS_NAME=feature-flags",
		"CONFIG_LEADERELECTION_NAME=config-leader-election-controller",
		"CONFIG_SPIRE=config-spire",
		"METRICS_DOMAIN=tekton.dev/pipeline",
		"METRICS_PROMETHEUS_HOST=127.0.0.1",
		"METRICS_PROMETHEUS_PORT=" + strconv.Itoa(c.ports.tektonMetrics),
		"PROFILING_PORT=" + strconv.Itoa(c.ports.tektonProfiling),
		"PROBES_PORT=" + strconv.Itoa(c.ports.tektonProbes),
		"KNATIVE_HEALTH_PROBES_PORT=" + strconv.Itoa(c.ports.tektonHealth),
		"KUBERNETES_MIN_VERSION=v1.28.0",
	}
	args := []string{"-kubeconfig=" + c.Kubeconfig, "-disable-ha"}
	for _, img := range []string{"entrypoint-image", "nop-image", "sidecarlogresults-image", "workingdirinit-image", "shell-image", "shell-image-win"} {
		args = append(args, "-"+img+"="+TektonImage(strings.TrimSuffix(img, "-image")))
	}
	return s.run(ctx, "tekton-controller", s.bins.tekton(), args, env...)
}

// applyFile applies every object of a YAML file, after an optional mutation.
func applyFile(ctx context.Context, a *kube.Applier, path string, mutate func(*unstructured.Unstructured)) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	objs, err := kube.Decode(b)
	if err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	for _, o := range objs {
		if mutate != nil {
			mutate(o)
		}
	}
	if err := a.Apply(ctx, objs...); err != nil {
		return fmt.Errorf("applying %s: %w", filepath.Base(path), err)
	}
	return nil
}

func nodeReady(ctx context.Context, cs kubernetes.Interface) bool {
	n, err := cs.CoreV1().Nodes().Get(ctx, FakeNode, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status != corev1.ConditionTrue {
				return false
			}
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady {
			return false
		}
	}
	return len(n.Status.Conditions) > 0
}

func serviceAccountExists(ctx context.Context, cs kubernetes.Interface) bool {
	_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
	return err == nil
}
