package prune_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/cluster"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/kube"
	"github.com/flotilla-cd/flotilla/pkg/prune"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

// fleet is one cluster (a real kube-apiserver with Flagger's CRDs and a
// Flagger controller), started by TestMain unless the tests run -short;
// FLOTILLA_FLEET_DIR reuses a running fleet instead.
var fleet *localfleet.Fleet

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(fleettest.Main(m, fleettest.Options{Clusters: 1}, &fleet))
}

// before is the config whose objects the test applies: shop autoscales, has
// a load tester and two custom metrics; cart is plain; api lives in the
// second namespace. %[1]s and %[2]s are the test's namespaces.
const before = `
- name: shop
  image: registry.example.com/demo/shop
  namespace: %[1]s
  workload: {name: shop}
  service: {port: 9898}
  delivery:
    testLoader: true
    autoscale: {minReplicas: 2, maxReplicas: 4}
    trafficAnalysis:
      metrics:
        - name: errors
          thresholdRange: {max: 1}
          customMetric:
            provider: {address: http://prometheus.test}
            query: sum(rate(errors_total[{{ interval }}]))
        - name: latency
          thresholdRange: {max: 500}
          customMetric:
            provider: {address: http://prometheus.test}
            query: histogram_quantile(0.99, rate(latency_bucket[{{ interval }}]))
      webhooks:
        command: ["hey -z 10s http://shop-canary.%[1]s:9898/"]
- name: cart
  image: registry.example.com/demo/cart
  namespace: %[1]s
  workload: {name: cart}
  service: {port: 8080}
- name: api
  image: registry.example.com/demo/api
  namespace: %[2]s
  workload: {name: api}
  service: {port: 8080}
`

// after removes cart, takes autoscale, the load tester and the errors
// metric from shop, and moves api to the first namespace and another
// workload.
const after = `
- name: shop
  image: registry.example.com/demo/shop
  namespace: %[1]s
  workload: {name: shop}
  service: {port: 9898}
  delivery:
    trafficAnalysis:
      metrics:
        - name: latency
          thresholdRange: {max: 500}
          customMetric:
            provider: {address: http://prometheus.test}
            query: histogram_quantile(0.99, rate(latency_bucket[{{ interval }}]))
- name: api
  image: registry.example.com/demo/api
  namespace: %[1]s
  workload: {name: api-v2}
  service: {port: 8080}
`

var (
	canaries        = flaggerv1.SchemeGroupVersion.WithResource("canaries")
	metricTemplates = flaggerv1.SchemeGroupVersion.WithResource("metrictemplates")
	hpas            = autoscalingv2.SchemeGroupVersion.WithResource("horizontalpodautoscalers")
	deployments     = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	services        = corev1.SchemeGroupVersion.WithResource("services")
)

// TestPrune applies what before renders to a real API server, prunes with
// after, and checks that exactly what after no longer renders is gone: never
// an object without flotilla's labels, nor one Flagger made from flotilla's.
// A second cluster that is down fails its part of the prune only.
func TestPrune(t *testing.T) {
	if fleet == nil {
		t.Skip("needs a cluster: run without -short (FLOTILLA_FLEET_DIR reuses a running fleet)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := fleet.Clusters[0]
	cl, err := fleettest.NewClients(c)
	if err != nil {
		t.Fatal(err)
	}
	nsA, nsB := cl.Namespace(ctx, t, "prune"), cl.Namespace(ctx, t, "prune")

	cfg := parse(t, c, fmt.Sprintf(before, nsA, nsB))
	applier, err := kube.NewApplier(cl.Config, "flotilla-test")
	if err != nil {
		t.Fatal(err)
	}
	for _, app := range cfg.Applications {
		objs, err := canary.Render(app, canary.Input{Instance: cfg.Server.Instance, Cluster: c.Name, Rollout: "r1"}).Unstructured()
		if err != nil {
			t.Fatal(err)
		}
		if err := applier.Apply(ctx, objs...); err != nil {
			t.Fatalf("applying %s: %v", app.Name, err)
		}
	}
	shopCanary, err := cl.Flagger.FlaggerV1beta1().Canaries(nsA).Get(ctx, "shop", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Look-alikes prune must leave: an HPA named as flotilla would name
	// cart's, without labels; a load tester's service labelled managed-by
	// only; and the primary's HPA as Flagger makes it, with the labels of
	// shop's and the canary as its controller.
	lookAlike := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "cart", Namespace: nsA},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "cart"},
			MaxReplicas:    2,
		},
	}
	primary := lookAlike.DeepCopy()
	primary.Name, primary.Labels = "shop-primary", canary.Labels("shop")
	primary.Labels[canary.LabelInstance] = cfg.Server.Instance
	primary.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(shopCanary, flaggerv1.SchemeGroupVersion.WithKind(flaggerv1.CanaryKind))}
	// Another flotilla's object, for an application this one never had.
	other := lookAlike.DeepCopy()
	other.Name, other.Labels = "other-instance", canary.Labels("cart")
	other.Labels[canary.LabelInstance] = "someone-else"
	for _, h := range []*autoscalingv2.HorizontalPodAutoscaler{lookAlike, primary, other} {
		if _, err := cl.Kube.AutoscalingV2().HorizontalPodAutoscalers(nsA).Create(ctx, h, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	unowned := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "loadtester-cart", Namespace: nsA, Labels: map[string]string{canary.LabelManagedBy: canary.ManagedBy}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}
	if _, err := cl.Kube.CoreV1().Services(nsA).Create(ctx, unowned, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	cfg = parse(t, c, fmt.Sprintf(after, nsA, nsB))
	set, err := cluster.NewSet(cfg.Fleet.Clusters)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	opts := prune.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))}
	if os.Getenv(fleettest.EnvFleetDir) != "" {
		// A fleet others may use: prune only what this test made.
		opts.Namespaces = []string{nsA, nsB}
	}
	rep, err := prune.Prune(ctx, cfg, set, opts)
	if err == nil || !strings.Contains(err.Error(), "pruning cluster down:") || strings.Contains(err.Error(), "cluster "+c.Name) {
		t.Errorf("Prune error = %v, want one for cluster down only", err)
	}

	removed, notRendered := prune.ReasonApplicationRemoved, prune.ReasonNotRendered
	want := []prune.Object{
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: nsA, Name: "loadtester-shop", Application: "shop", Reason: notRendered},
		{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", Namespace: nsA, Name: "shop", Application: "shop", Reason: notRendered},
		{APIVersion: "flagger.app/v1beta1", Kind: "Canary", Namespace: nsA, Name: "cart", Application: "cart", Reason: removed},
		{APIVersion: "flagger.app/v1beta1", Kind: "Canary", Namespace: nsB, Name: "api", Application: "api", Reason: notRendered},
		{APIVersion: "flagger.app/v1beta1", Kind: "MetricTemplate", Namespace: nsA, Name: "shop-errors", Application: "shop", Reason: notRendered},
		{APIVersion: "v1", Kind: "Service", Namespace: nsA, Name: "loadtester-shop", Application: "shop", Reason: notRendered},
	}
	if diff := cmp.Diff(sorted(want), sorted(rep.Deleted[c.Name])); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
	if len(rep.Deleted) != 1 {
		t.Errorf("deleted in clusters %v, want %s only", rep.Deleted, c.Name)
	}
	for _, o := range want {
		if line := fmt.Sprintf("msg=pruned cluster=%s kind=%s namespace=%s name=%s application=%s", c.Name, o.Kind, o.Namespace, o.Name, o.Application); !strings.Contains(log.String(), line) {
			t.Errorf("no %q in the log:\n%s", line, log.String())
		}
	}

	gone := []object{
		{deployments, nsA, "loadtester-shop"}, {services, nsA, "loadtester-shop"}, {hpas, nsA, "shop"},
		{metricTemplates, nsA, "shop-errors"}, {canaries, nsA, "cart"}, {canaries, nsB, "api"},
	}
	kept := []object{
		{canaries, nsA, "shop"}, {metricTemplates, nsA, "shop-latency"},
		{hpas, nsA, "cart"}, {hpas, nsA, "shop-primary"}, {hpas, nsA, "other-instance"}, {services, nsA, "loadtester-cart"},
	}
	for _, o := range gone {
		_, err := cl.Dynamic.Resource(o.gvr).Namespace(o.ns).Get(ctx, o.name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s %s/%s: %v, want it gone", o.gvr.Resource, o.ns, o.name, err)
		}
	}
	for _, o := range kept {
		u, err := cl.Dynamic.Resource(o.gvr).Namespace(o.ns).Get(ctx, o.name, metav1.GetOptions{})
		if err != nil || u.GetDeletionTimestamp() != nil {
			t.Errorf("%s %s/%s: %v, want it kept", o.gvr.Resource, o.ns, o.name, err)
		}
	}

	// Nothing is left to prune.
	rep, err = prune.Prune(ctx, cfg, set, opts)
	if n := len(rep.Deleted[c.Name]); n != 0 {
		t.Errorf("a second prune deleted %v (error %v), want nothing", rep.Deleted[c.Name], err)
	}
}

type object struct {
	gvr      schema.GroupVersionResource
	ns, name string
}

// parse parses a config of the fleet's cluster and one that is down, with
// the applications apps (YAML of a sequence).
func parse(t *testing.T, c localfleet.Cluster, apps string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	// Nothing listens on port 1: the cluster is down.
	down := "apiVersion: v1\nkind: Config\nclusters: [{name: down, cluster: {server: \"https://127.0.0.1:1\"}}]\n" +
		"contexts: [{name: down, context: {cluster: down, user: down}}]\ncurrent-context: down\nusers: [{name: down, user: {}}]\n"
	if err := os.WriteFile(filepath.Join(dir, "down"), []byte(down), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`receivers: [{name: flagger, type: flagger, insecure: true}]
fleet:
  clusters: [{name: %s, kubeconfig: %s}, {name: down, kubeconfig: down}]
  waves: [{clusters: [%[1]s, down]}]
applications:
%[3]s`, c.Name, c.Kubeconfig, apps)
	cfg, err := config.Parse([]byte(doc), dir)
	if err != nil {
		t.Fatalf("parsing config: %v", err)
	}
	return cfg
}

func sorted(objs []prune.Object) []prune.Object {
	objs = slices.Clone(objs)
	slices.SortFunc(objs, func(a, b prune.Object) int {
		return strings.Compare(a.APIVersion+a.Kind+a.Namespace+a.Name, b.APIVersion+b.Kind+b.Namespace+b.Name)
	})
	return objs
}
