package features

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cucumber/godog"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
	"github.com/flotilla-cd/flotilla/pkg/testkit/meshmetrics"
)

func (s *scenario) registerAnalysisSteps(sc *godog.ScenarioContext) {
	sc.Step(`^the "([^"]*)" CRDs are installed in clusters "([^"]*)"$`, s.crdsInstalled)
	sc.Step(`^the Flagger of cluster "([^"]*)" runs with -mesh-provider "([^"]*)"$`, s.flaggerMeshProvider)
	sc.Step(`^flotilla serving the application "([^"]*)" that tracks "([^"]*)" on track "([^"]*)" in waves "([^"]*)" then "([^"]*)" with delivery:$`, s.flotillaServingDelivery)
	sc.Step(`^the application's validation is:$`, s.validationIs)
	sc.Step(`^flotilla serving the application "([^"]*)" that tracks "([^"]*)" on track "([^"]*)" in waves "([^"]*)" then "([^"]*)" with Kurator's rollout block:$`, s.flotillaServingKurator)
	sc.Step(`^the Service of the load tester flotilla installs for "([^"]*)" reaches the fleet's load tester in clusters "([^"]*)"$`, s.loadTesterRouted)
	sc.Step(`^the mesh reports the workload "([^"]*)" (healthy|failing)$`, s.meshReports)
	sc.Step(`^the application's own metrics report the workload "([^"]*)" (healthy|failing)$`, s.appMetricsReport)
	sc.Step(`^the (HTTPRoute|VirtualService|TrafficSplit|HTTPProxy|TraefikService|TrafficRoute|Ingress) "([^"]*)" is watched in cluster "([^"]*)"$`, s.watchRoute)
	sc.Step(`^in cluster "([^"]*)" the canary's weight went ((?:\d+, )*\d+) and back to 0$`, s.weightWent)
	sc.Step(`^in cluster "([^"]*)" the requests with header "([^"]*)" exactly "([^"]*)" went to the canary during the analysis$`, s.headerMatchWent)
	sc.Step(`^in cluster "([^"]*)" the traffic was mirrored to "([^"]*)" during the analysis$`, s.mirrored)
	sc.Step(`^every cluster of the waves has the DestinationRules "([^"]*)" and "([^"]*)"$`, s.destinationRules)
	sc.Step(`^in every cluster of the waves the VirtualService "([^"]*)" serves the hosts "([^"]*)"$`, s.virtualServiceHosts)
	sc.Step(`^Flagger of cluster "([^"]*)" halted the analysis on "([^"]*)"$`, s.checkFailed)
	sc.Step(`^Flagger of cluster "([^"]*)" passed every metric check$`, s.checksPassed)
	sc.Step(`^every cluster of the waves has the MetricTemplate "([^"]*)" querying the fleet's Prometheus$`, s.metricTemplate)
	sc.Step(`^an Ingress "([^"]*)" routes "([^"]*)" to the workload's service in every cluster of the waves$`, s.ingressEverywhere)
	sc.Step(`^a load test target$`, s.loadTestTarget)
	sc.Step(`^the load test target received requests from hey$`, s.loadTestReceived)
	sc.Step(`^the load tester's log shows the command for "([^"]*)" in the application's namespace$`, s.loadTesterLog)
	sc.Step(`^in every cluster of the waves the HorizontalPodAutoscaler "([^"]*)" scales Deployment "([^"]*)" from (\d+) to (\d+) replicas$`, s.primaryHPA)
}

// flaggerMeshProvider reads the arguments of the cluster's running Flagger.
func (s *scenario) flaggerMeshProvider(cluster, want string) error {
	c, ok := s.fleet().Cluster(cluster)
	if !ok {
		return fmt.Errorf("the fleet has no cluster %q", cluster)
	}
	for _, p := range c.Processes {
		if p.Name != cluster+"-flagger" {
			continue
		}
		if !s.fleet().ProcessRunning(p) {
			return fmt.Errorf("the Flagger of %s is not running", cluster)
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
		if err != nil {
			return err
		}
		args := strings.Split(string(b), "\x00")
		if !slices.Contains(args, "-mesh-provider="+want) {
			return fmt.Errorf("the Flagger of %s runs %q, not -mesh-provider=%s", cluster, args, want)
		}
		return nil
	}
	return fmt.Errorf("the fleet runs no Flagger in %s", cluster)
}

// oneAtATime serialises the scenarios of a provider whose routing
// objects are cluster-scoped (kuma's TrafficRoute, named after the canary:
// two scenarios' "podinfo" canaries in their own namespaces would share
// one, and Flagger would move its weights for both): one at a time, from
// its CRDs step to its end.
var oneAtATime = map[string]exclusive{"kuma": newExclusive()}

func (s *scenario) crdsInstalled(ctx context.Context, set, clusters string) error {
	if e, ok := oneAtATime[set]; ok {
		if err := s.take(ctx, e, set+"'s cluster-scoped routing"); err != nil {
			return err
		}
		// Its canaries' TrafficRoutes outlive the namespace: gone before
		// the next scenario starts.
		s.onCleanup(func() { s.deleteTrafficRoutes(clusters) })
	}
	for _, c := range strings.Split(clusters, ",") {
		if err := s.fleet().InstallCRDs(ctx, c, localfleet.CRDSet(set)); err != nil {
			return err
		}
	}
	return nil
}

// deleteTrafficRoutes deletes the scenario's workload's TrafficRoute
// (cluster-scoped, no owner) from clusters.
func (s *scenario) deleteTrafficRoutes(clusters string) {
	if s.w == nil || s.w.workload == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range strings.Split(clusters, ",") {
		c, err := clientsFor(name)
		if err != nil {
			continue
		}
		err = c.Dynamic.Resource(routeGVRs["TrafficRoute"]).Delete(ctx, s.w.workload, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			fmt.Fprintf(os.Stderr, "deleting TrafficRoute %s in %s: %v\n", s.w.workload, name, err)
		}
	}
}

// expand fills a docstring's placeholders: the fleet's Prometheus and load
// tester, and the scenario's load test target.
func (s *scenario) expand(text string) string {
	r := strings.NewReplacer(
		"{{prometheus}}", s.fleet().PrometheusURL,
		"{{loadtester}}", s.fleet().LoadTesterURL,
		"{{target}}", s.w.loadTarget.url(),
	)
	return r.Replace(text)
}

func (s *scenario) flotillaServingDelivery(ctx context.Context, app, repo, track, wave1, wave2 string, doc *godog.DocString) error {
	var d map[string]any
	if err := yaml.Unmarshal([]byte(s.expand(doc.Content)), &d); err != nil {
		return fmt.Errorf("the delivery: %w", err)
	}
	s.w.delivery = d
	return s.flotillaServing(ctx, app, repo, track, wave1, wave2)
}

// flotillaServingKurator serves an application whose fields are Kurator's
// rollout block as the step gives it: its rolloutPolicy is the delivery, to
// which only the scenario's gate and report webhooks are added.
func (s *scenario) flotillaServingKurator(ctx context.Context, app, repo, track, wave1, wave2 string, doc *godog.DocString) error {
	var block map[string]any
	if err := yaml.Unmarshal([]byte(s.expand(doc.Content)), &block); err != nil {
		return fmt.Errorf("the rollout block: %w", err)
	}
	s.w.kurator = block
	return s.flotillaServing(ctx, app, repo, track, wave1, wave2)
}

// applyKurator lays the scenario's Kurator block over an application.
func (w *world) applyKurator(a map[string]any) {
	if w.kurator == nil {
		return
	}
	delivery, _ := a["delivery"].(map[string]any)
	delete(a, "delivery")
	for k, v := range w.kurator {
		a[k] = v
	}
	if wl, ok := a["workload"].(map[string]any); ok && wl["namespace"] == "{{namespace}}" {
		wl["namespace"] = w.namespace
		delete(a, "namespace")
	}
	if rp, ok := a["rolloutPolicy"].(map[string]any); ok {
		rp["webhooks"] = delivery["webhooks"]
	}
}

func (s *scenario) loadTesterRouted(app, clusters string) error {
	u, err := url.Parse(s.fleet().LoadTesterURL)
	if err != nil {
		return err
	}
	for _, c := range strings.Split(clusters, ",") {
		if err := s.fleet().RouteService(c, s.w.namespace, config.LoadTesterPrefix+app, u.Host); err != nil {
			return err
		}
	}
	return nil
}

func (s *scenario) validationIs(doc *godog.DocString) error {
	var v map[string]any
	if err := yaml.Unmarshal([]byte(s.expand(doc.Content)), &v); err != nil {
		return fmt.Errorf("the validation: %w", err)
	}
	s.w.validation = v
	return nil
}

// mergeDelivery lays a scenario's delivery over the default one: its keys
// replace the default's, and a null removes one.
func mergeDelivery(base, over map[string]any) {
	for k, v := range over {
		if v == nil {
			delete(base, k)
			continue
		}
		base[k] = v
	}
}

var (
	meshOnce sync.Once
	mesh     *meshmetrics.Exporter
	errMesh  error
)

// meshExporter starts the package's mesh metrics, which the fleet's
// Prometheus scrapes; scenarios set their own workloads (namespaces differ).
func meshExporter() (*meshmetrics.Exporter, error) {
	meshOnce.Do(func() {
		mesh, errMesh = meshmetrics.Start(context.Background())
		if errMesh == nil {
			errMesh = fleet.AddScrapeTarget("features-mesh", mesh.Addr())
		}
	})
	return mesh, errMesh
}

// meshReports sets the workload's traffic on the mesh metrics exporter
// (every provider's series at once) and waits until Prometheus has scraped
// Istio's at the new success rate.
func (s *scenario) meshReports(ctx context.Context, workload, health string) error {
	q := fmt.Sprintf(`sum(rate(istio_requests_total{destination_workload_namespace=%q,destination_workload=%q,response_code!~"5.*"}[5s])) / sum(rate(istio_requests_total{destination_workload_namespace=%q,destination_workload=%q}[5s]))`,
		s.w.namespace, workload, s.w.namespace, workload)
	return s.reportTraffic(ctx, workload, health, q)
}

// appMetricsReport is meshReports for an application without a mesh: it
// waits for the application's own request histogram of its pods, which
// Flagger's kubernetes provider reads.
func (s *scenario) appMetricsReport(ctx context.Context, workload, health string) error {
	sel := fmt.Sprintf(`kubernetes_namespace=%q,kubernetes_pod_name=~%q`, s.w.namespace, workload+"-[0-9a-zA-Z]+(-[0-9a-zA-Z]+)")
	q := fmt.Sprintf(`sum(rate(http_request_duration_seconds_count{%s,status!~"5.*"}[5s])) / sum(rate(http_request_duration_seconds_count{%s}[5s]))`, sel, sel)
	return s.reportTraffic(ctx, workload, health, q)
}

// reportTraffic sets the workload's traffic, healthy or failing, and waits
// until the success rate query q reads it from Prometheus: Flagger reads
// what Prometheus scraped.
func (s *scenario) reportTraffic(ctx context.Context, workload, health, q string) error {
	e, err := meshExporter()
	if err != nil {
		return err
	}
	t := meshmetrics.Healthy
	if health == "failing" {
		t = meshmetrics.Failing
	}
	w := meshmetrics.Workload{Namespace: s.w.namespace, Name: workload}
	e.Set(w, t)
	s.onCleanup(func() { e.Remove(w) })
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		v, ok, err := promQuery(ctx, s.fleet().PrometheusURL, q)
		if err != nil || !ok {
			return false, nil //nolint:nilerr // not scraped yet
		}
		return v > t.SuccessRate-0.05 && v < t.SuccessRate+0.05, nil
	})
}

// promQuery runs an instant query and returns its single value.
func promQuery(ctx context.Context, base, q string) (float64, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query?query="+url.QueryEscape(q), nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer func() { _ = resp.Body.Close() }()
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value []any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, false, err
	}
	if r.Status != "success" || len(r.Data.Result) != 1 || len(r.Data.Result[0].Value) != 2 {
		return 0, false, nil
	}
	str, _ := r.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	return v, err == nil, nil
}

var routeGVRs = map[string]schema.GroupVersionResource{
	"HTTPRoute":       {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"},
	"VirtualService":  {Group: "networking.istio.io", Version: "v1beta1", Resource: "virtualservices"},
	"DestinationRule": {Group: "networking.istio.io", Version: "v1beta1", Resource: "destinationrules"},
	"MetricTemplate":  {Group: "flagger.app", Version: "v1beta1", Resource: "metrictemplates"},
	"TrafficSplit":    {Group: "split.smi-spec.io", Version: "v1alpha1", Resource: "trafficsplits"},
	"HTTPProxy":       {Group: "projectcontour.io", Version: "v1", Resource: "httpproxies"},
	"TraefikService":  {Group: "traefik.containo.us", Version: "v1alpha1", Resource: "traefikservices"},
	"TrafficRoute":    {Group: "kuma.io", Version: "v1alpha1", Resource: "trafficroutes"},
	"Ingress":         {Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"},
}

// clusterScoped are the routing kinds without a namespace.
var clusterScoped = map[string]bool{"TrafficRoute": true}

// routeLog records every version of a routing object (its spec and
// annotations), as the cluster's API server reported them.
type routeLog struct {
	kind     string
	mu       sync.Mutex
	versions []map[string]any
}

func (l *routeLog) all() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.versions)
}

// specs are the spec of every version.
func (l *routeLog) specs() []map[string]any {
	var out []map[string]any
	for _, v := range l.all() {
		sp, _ := v["spec"].(map[string]any)
		out = append(out, sp)
	}
	return out
}

func (s *scenario) watchRoute(ctx context.Context, kind, name, cluster string) error {
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	log := &routeLog{kind: kind}
	if s.w.routes == nil {
		s.w.routes = map[string]*routeLog{}
	}
	s.w.routes[cluster] = log
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.onCleanup(cancel)
	ns := s.w.namespace
	if clusterScoped[kind] {
		ns = ""
	}
	wi, err := c.Dynamic.Resource(routeGVRs[kind]).Namespace(ns).Watch(wctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	if err != nil {
		return fmt.Errorf("watching %s %s in %s: %w", kind, name, cluster, err)
	}
	go func() {
		defer wi.Stop()
		for ev := range wi.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			v := map[string]any{"spec": u.Object["spec"], "annotations": u.GetAnnotations()}
			log.mu.Lock()
			if n := len(log.versions); n == 0 || !reflect.DeepEqual(log.versions[n-1], v) {
				log.versions = append(log.versions, v)
			}
			log.mu.Unlock()
		}
	}()
	return nil
}

// weightOf reads a weight written as a number or a string (SMI's
// TrafficSplit v1alpha1 weight is a Kubernetes quantity).
func weightOf(v any) int64 {
	switch w := v.(type) {
	case int64:
		return w
	case float64:
		return int64(w)
	case string:
		n, err := strconv.ParseInt(w, 10, 64)
		if err != nil {
			return -1
		}
		return n
	}
	return -1
}

// backendWeight finds, in a list of backends, the weight of the one whose
// key field names the canary.
func backendWeight(list []any, key, canary string) int64 {
	for _, b := range list {
		m, _ := b.(map[string]any)
		if name, _, _ := unstructured.NestedString(m, strings.Split(key, ".")...); name == canary {
			return weightOf(m["weight"])
		}
	}
	return -1
}

// canaryWeight is the weight a routing object gives the canary (in its
// first route, where it has several), -1 when it names none.
func canaryWeight(kind string, version map[string]any, canary, namespace string) int64 {
	spec, _ := version["spec"].(map[string]any)
	first := func(path ...string) map[string]any {
		l, _, _ := unstructured.NestedSlice(spec, path...)
		if len(l) == 0 {
			return nil
		}
		m, _ := l[0].(map[string]any)
		return m
	}
	switch kind {
	case "HTTPRoute":
		refs, _, _ := unstructured.NestedSlice(first("rules"), "backendRefs")
		return backendWeight(refs, "name", canary)
	case "VirtualService":
		routes, _, _ := unstructured.NestedSlice(first("http"), "route")
		return backendWeight(routes, "destination.host", canary)
	case "TrafficSplit":
		backends, _, _ := unstructured.NestedSlice(spec, "backends")
		return backendWeight(backends, "service", canary)
	case "HTTPProxy":
		services, _, _ := unstructured.NestedSlice(first("routes"), "services")
		return backendWeight(services, "name", canary)
	case "TraefikService":
		services, _, _ := unstructured.NestedSlice(spec, "weighted", "services")
		return backendWeight(services, "name", canary)
	case "TrafficRoute":
		split, _, _ := unstructured.NestedSlice(spec, "conf", "split")
		for _, sp := range split {
			m, _ := sp.(map[string]any)
			if d, _, _ := unstructured.NestedString(m, "destination", "kuma.io/service"); strings.HasPrefix(d, canary+"_"+namespace+"_") {
				return weightOf(m["weight"])
			}
		}
	case "Ingress":
		a, _ := version["annotations"].(map[string]string)
		if a["nginx.ingress.kubernetes.io/canary"] == "true" {
			return weightOf(a["nginx.ingress.kubernetes.io/canary-weight"])
		}
	}
	return -1
}

func (s *scenario) routeLogOf(cluster string) (*routeLog, error) {
	l := s.w.routes[cluster]
	if l == nil {
		return nil, fmt.Errorf("no step watched a route in %s", cluster)
	}
	return l, nil
}

func (s *scenario) weightWent(cluster, steps string) error {
	l, err := s.routeLogOf(cluster)
	if err != nil {
		return err
	}
	var want []int64
	for _, f := range strings.Split(steps, ", ") {
		n, _ := strconv.ParseInt(f, 10, 64)
		want = append(want, n)
	}
	canary := s.w.workload + "-canary"
	var seen, moves []int64
	for _, v := range l.all() {
		w := canaryWeight(l.kind, v, canary, s.w.namespace)
		seen = append(seen, w)
		if w > 0 && (len(moves) == 0 || moves[len(moves)-1] != w) {
			moves = append(moves, w)
		}
	}
	if len(seen) == 0 {
		return fmt.Errorf("the watched %s never existed in %s", l.kind, cluster)
	}
	if !slices.Equal(moves, want) {
		return fmt.Errorf("the canary's weight went %v, want %v (every version of the %s: %v)", moves, want, l.kind, seen)
	}
	// A route that names no canary (-1) sends it nothing.
	if last := seen[len(seen)-1]; last > 0 {
		return fmt.Errorf("the canary's weight ended at %d, want 0 (every version: %v)", last, seen)
	}
	return nil
}

func (s *scenario) headerMatchWent(cluster, header, value string) error {
	l, err := s.routeLogOf(cluster)
	if err != nil {
		return err
	}
	canary := s.w.workload + "-canary"
	var sawMatch bool
	for _, spec := range l.specs() {
		rules, _, _ := unstructured.NestedSlice(spec, "rules")
		if len(rules) < 2 {
			continue
		}
		first := rules[0].(map[string]any)
		matches, _, _ := unstructured.NestedSlice(first, "matches")
		if !matchesHeader(matches, header, value) {
			continue
		}
		sawMatch = true
		if canaryWeight(l.kind, map[string]any{"spec": spec}, canary, s.w.namespace) == 100 {
			return nil
		}
	}
	if !sawMatch {
		return fmt.Errorf("no version of the HTTPRoute matched header %s=%s in its first rule: %v", header, value, l.all())
	}
	return fmt.Errorf("the rule matching %s=%s never sent all its requests to %s: %v", header, value, canary, l.all())
}

func matchesHeader(matches []any, header, value string) bool {
	for _, m := range matches {
		hs, _, _ := unstructured.NestedSlice(m.(map[string]any), "headers")
		for _, h := range hs {
			hm := h.(map[string]any)
			if strings.EqualFold(fmt.Sprint(hm["name"]), header) && hm["value"] == value && (hm["type"] == nil || hm["type"] == "Exact") {
				return true
			}
		}
	}
	return false
}

func (s *scenario) mirrored(cluster, host string) error {
	l, err := s.routeLogOf(cluster)
	if err != nil {
		return err
	}
	for _, spec := range l.specs() {
		http, _, _ := unstructured.NestedSlice(spec, "http")
		if len(http) == 0 {
			continue
		}
		if h, _, _ := unstructured.NestedString(http[0].(map[string]any), "mirror", "host"); h == host {
			return nil
		}
	}
	return fmt.Errorf("no version of the VirtualService mirrored to %s: %v", host, l.all())
}

func (s *scenario) destinationRules(ctx context.Context, a, b string) error {
	for _, c := range s.w.clusters {
		for _, name := range []string{a, b} {
			u, err := c.Dynamic.Resource(routeGVRs["DestinationRule"]).Namespace(s.w.namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("DestinationRule %s in %s: %w", name, c.Name, err)
			}
			if h, _, _ := unstructured.NestedString(u.Object, "spec", "host"); h != name {
				return fmt.Errorf("DestinationRule %s in %s is for host %q, want %q", name, c.Name, h, name)
			}
		}
	}
	return nil
}

func (s *scenario) virtualServiceHosts(ctx context.Context, name, hosts string) error {
	for _, c := range s.w.clusters {
		u, err := c.Dynamic.Resource(routeGVRs["VirtualService"]).Namespace(s.w.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("VirtualService %s in %s: %w", name, c.Name, err)
		}
		got, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "hosts")
		for _, h := range strings.Split(hosts, ",") {
			if !slices.Contains(got, h) {
				return fmt.Errorf("VirtualService %s in %s serves %v, not %s", name, c.Name, got, h)
			}
		}
	}
	return nil
}

// checkFailed finds Flagger's warning that a metric check failed among the
// canary's events: "Halt <canary> advancement <what> <value> < <min>",
// what is "success rate" for the built-in check, the metric's name for a
// custom one.
func (s *scenario) checkFailed(ctx context.Context, cluster, metric string) error {
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	var msgs []string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		evs, err := c.Kube.CoreV1().Events(s.w.namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.kind", "Canary").String(),
		})
		if err != nil {
			return false, err
		}
		msgs = msgs[:0]
		for _, e := range evs.Items {
			msgs = append(msgs, e.Message)
			if e.Type == corev1.EventTypeWarning && strings.HasPrefix(e.Message, "Halt ") && strings.Contains(e.Message, " advancement "+metric+" ") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("Flagger of %s reported no failing %s check: %w (events: %q)", cluster, metric, err, msgs)
	}
	return nil
}

// checksPassed finds none of Flagger's warnings that a built-in check
// failed ("Halt <canary> advancement success rate ...", "... request
// duration ...") or found no series ("Halt advancement no values found for
// <provider> metric ...") among the canary's events.
func (s *scenario) checksPassed(ctx context.Context, cluster string) error {
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	evs, err := c.Kube.CoreV1().Events(s.w.namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.kind", "Canary").String(),
	})
	if err != nil {
		return err
	}
	for _, e := range evs.Items {
		if e.Type != corev1.EventTypeWarning || !strings.HasPrefix(e.Message, "Halt ") {
			continue
		}
		for _, failed := range []string{" advancement success rate ", " advancement request duration ", "no values found"} {
			if strings.Contains(e.Message, failed) {
				return fmt.Errorf("Flagger of %s halted the analysis: %q", cluster, e.Message)
			}
		}
	}
	return nil
}

func (s *scenario) metricTemplate(ctx context.Context, name string) error {
	for _, c := range s.w.clusters {
		u, err := c.Dynamic.Resource(routeGVRs["MetricTemplate"]).Namespace(s.w.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("MetricTemplate %s in %s: %w", name, c.Name, err)
		}
		addr, _, _ := unstructured.NestedString(u.Object, "spec", "provider", "address")
		if addr != s.fleet().PrometheusURL {
			return fmt.Errorf("MetricTemplate %s in %s queries %q, want the fleet's Prometheus %s", name, c.Name, addr, s.fleet().PrometheusURL)
		}
	}
	return nil
}

// ingressEverywhere makes the Ingress an nginx canary refers to
// (ingressRef): Flagger copies it into the canary Ingress.
func (s *scenario) ingressEverywhere(ctx context.Context, name, host string) error {
	for _, c := range s.w.clusters {
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.w.namespace},
			Spec: networkingv1.IngressSpec{
				IngressClassName: ptr.To("nginx"),
				Rules: []networkingv1.IngressRule{{
					Host: host,
					IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
						Paths: []networkingv1.HTTPIngressPath{{
							Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix),
							Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
								Name: s.w.workload, Port: networkingv1.ServiceBackendPort{Number: 9898},
							}},
						}},
					}},
				}},
			},
		}
		if _, err := c.Kube.NetworkingV1().Ingresses(s.w.namespace).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Ingress %s in %s: %w", name, c.Name, err)
		}
	}
	return nil
}

// loadTarget is an HTTP server standing for the canary's service, which
// the load tester's hey sends its requests to.
type loadTarget struct {
	srv      *httptest.Server
	fromHey  atomic.Int64
	requests atomic.Int64
}

func (t *loadTarget) url() string {
	if t == nil {
		return ""
	}
	return t.srv.URL + "/"
}

func (s *scenario) loadTestTarget() error {
	t := &loadTarget{}
	t.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.requests.Add(1)
		if strings.HasPrefix(r.UserAgent(), "hey/") {
			t.fromHey.Add(1)
		}
		_, _ = w.Write([]byte("ok\n"))
	}))
	s.onCleanup(t.srv.Close)
	s.w.loadTarget = t
	return nil
}

func (s *scenario) loadTestReceived() error {
	t := s.w.loadTarget
	if n := t.fromHey.Load(); n < 5 {
		return fmt.Errorf("the load test target received %d requests from hey (%d in all), want at least 5", n, t.requests.Load())
	}
	return nil
}

func (s *scenario) loadTesterLog(workload string) error {
	var logPath string
	for _, p := range s.fleet().Services {
		if p.Name == "loadtester" {
			logPath = p.Log
		}
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		return fmt.Errorf("reading the load tester's log: %w", err)
	}
	want := workload + "." + s.w.namespace
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, want) && strings.Contains(line, "hey ") {
			return nil
		}
	}
	return fmt.Errorf("the load tester's log (%s) names no hey command of %s", logPath, want)
}

func (s *scenario) primaryHPA(ctx context.Context, name, target string, minR, maxR int) error {
	for _, c := range s.w.clusters {
		h, err := c.Kube.AutoscalingV2().HorizontalPodAutoscalers(s.w.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("HorizontalPodAutoscaler %s in %s: %w", name, c.Name, err)
		}
		got := fmt.Sprintf("%s %s from %d to %d", h.Spec.ScaleTargetRef.Kind, h.Spec.ScaleTargetRef.Name, ptrOr(h.Spec.MinReplicas, 1), h.Spec.MaxReplicas)
		if want := fmt.Sprintf("Deployment %s from %d to %d", target, minR, maxR); got != want {
			return fmt.Errorf("HorizontalPodAutoscaler %s in %s scales %s, want %s", name, c.Name, got, want)
		}
	}
	return nil
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
