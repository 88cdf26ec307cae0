package localfleet

import (
	"context"
	"crypto/tls"
	_ "embed"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"knative.dev/pkg/apis"

	"github.com/tektoncd/pipeline/pkg/apis/pipeline/pod"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	tektonclient "github.com/tektoncd/pipeline/pkg/client/clientset/versioned"
)

//go:embed testdata/hello/main.go
var helloSource []byte

// TestRealNode runs pods in real containers, on real nodes of two clusters
// at once: a static Go binary pushed to the node's loopback registry as a
// one-layer image, pulled by digest, made Ready by an HTTP readiness probe,
// its output read through the API server's pods/log, and its server
// reached from the host on the pod's IP and, in c1, through a ClusterIP
// Service (kube-proxy); c2's Tekton runs a TaskRun there, from Tekton's
// own images the node serves; c1's pods reach a server on the host's loopback at
// the node's address (HostLoopback), as the host does, and the rules that
// make it so are gone with the node.
func TestRealNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a fleet and real nodes (containerd, runc, kubelet)")
	}
	bins := binaries{dir: BinDir()}
	if err := bins.check(Options{}); err != nil {
		t.Fatalf("%v\n(make test builds them first)", err)
	}
	if err := checkRealNodeHost(bins, true); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	f, err := Up(ctx, Options{Dir: t.TempDir(), Clusters: 2, NoFlagger: true, Tekton: true, DieWithParent: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Down(context.Background()) })
	node1 := startRealNode(ctx, t, f, "c1", RealNodeOptions{KubeProxy: true, HostLoopback: true, Logger: log})
	node2 := startRealNode(ctx, t, f, "c2", RealNodeOptions{Logger: log})

	bin := filepath.Join(t.TempDir(), "hello")
	if err := BuildStatic(ctx, helloSource, bin); err != nil {
		t.Fatal(err)
	}
	pod1 := runHello(ctx, t, f, node1, bin)
	runHello(ctx, t, f, node2, bin)
	runTaskRun(ctx, t, f, node2)

	cs := clientset(t, f, "c1")
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: pod1.Namespace},
		Spec: corev1.ServiceSpec{
			Selector: pod1.Labels,
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if svc, err = cs.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// kube-proxy programs the Service once the EndpointSlice controller
	// has listed the pod: poll until it answers. Until then the packets
	// follow the host's default route, where something else may answer.
	url := fmt.Sprintf("http://%s:80/", svc.Spec.ClusterIP)
	start := time.Now()
	var body string
	var lastErr error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		body, lastErr = httpGet(ctx, url)
		return lastErr == nil, nil
	})
	if err != nil {
		t.Fatalf("reaching Service %s from the host: %v (last error %v)\n--- kube-proxy:\n%s", url, err, lastErr, tail(node1, "kube-proxy"))
	}
	t.Logf("Service %s answered %q after %s", url, strings.TrimSpace(body), time.Since(start).Round(time.Millisecond))
	if want := "ok from hello"; !strings.Contains(body, want) {
		t.Errorf("Service answered %q, want %q", body, want)
	}
	checkHostLoopback(ctx, t, node1, pod1)
}

// checkHostLoopback serves on the host's loopback and reaches it at the
// node's address from the pod (through hello's /fetch) and from the host.
func checkHostLoopback(ctx context.Context, t *testing.T, node *RealNode, pod *corev1.Pod) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "loopback of the host") }))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	alias := "http://" + net.JoinHostPort(node.Gateway, port) + "/"
	for _, via := range []string{fmt.Sprintf("http://%s:8080/fetch?url=%s", pod.Status.PodIP, url.QueryEscape(alias)), alias} {
		body, err := httpGet(ctx, via)
		if err != nil || !strings.Contains(body, "loopback of the host") {
			t.Errorf("GET %s: %q, %v; want the host's loopback server", via, body, err)
		}
	}
}

func clientset(t *testing.T, f *Fleet, cluster string) kubernetes.Interface {
	t.Helper()
	c, ok := f.Cluster(cluster)
	if !ok {
		t.Fatalf("no cluster %s", cluster)
	}
	cfg, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// startRealNode starts a real node, stopped when the test ends, and checks
// it is Ready by a kubelet of the API servers' version (kwok reports
// "kwok-0.7.0" as its kubelet's) on containerd, and that the kubelet
// refuses anonymous requests (the pods can reach its address).
func startRealNode(ctx context.Context, t *testing.T, f *Fleet, cluster string, o RealNodeOptions) *RealNode {
	t.Helper()
	start := time.Now()
	node, err := f.StartRealNode(ctx, cluster, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("real node %s Ready in %s", node.Name, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := node.Stop(ctx); err != nil {
			t.Errorf("stopping node %s: %v", node.Name, err)
		}
		if out, err := exec.CommandContext(ctx, "iptables", "-w", "-t", "nat", "-S").Output(); err != nil {
			t.Error(err)
		} else if strings.Contains(string(out), node.loopbackComment()) {
			t.Errorf("the node's loopback rules outlived it:\n%s", out)
		}
		// The fleet lives on without the node (a reused fleet is
		// restarted when one of its processes is dead).
		if !f.Running() {
			t.Errorf("fleet not running after node %s stopped", node.Name)
		}
	})
	kn, err := clientset(t, f, cluster).CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var reason string
	for _, c := range kn.Status.Conditions {
		if c.Type == corev1.NodeReady {
			reason = c.Reason
		}
	}
	if reason != "KubeletReady" || kn.Status.NodeInfo.KubeletVersion != "v"+KubeVersion || kn.Status.NodeInfo.ContainerRuntimeVersion == "" {
		t.Errorf("node Ready reason %q, kubelet %q, runtime %q; want KubeletReady, v%s, containerd", reason, kn.Status.NodeInfo.KubeletVersion, kn.Status.NodeInfo.ContainerRuntimeVersion, KubeVersion)
	}
	t.Logf("node %s: kubelet %s, %s, pods on %s, taints %v", node.Name, kn.Status.NodeInfo.KubeletVersion, kn.Status.NodeInfo.ContainerRuntimeVersion, node.PodSubnet, kn.Spec.Taints)
	if _, err := httpsGetInsecure(ctx, fmt.Sprintf("https://%s:%d/pods", kn.Status.Addresses[0].Address, node.KubeletPort)); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("anonymous GET of the kubelet's /pods: %v, want 401 Unauthorized", err)
	}
	return node
}

// runHello runs the binary hello on the node, as an image pushed to the
// node's registry, and checks the pod becomes Running and Ready, that its
// log holds what hello printed, and that the host reaches it on its IP.
func runHello(ctx context.Context, t *testing.T, f *Fleet, node *RealNode, bin string) *corev1.Pod {
	t.Helper()
	image, err := PushBinary(ctx, node.Registry+"/test/hello", bin)
	if err != nil {
		t.Fatal(err)
	}
	cs := clientset(t, f, node.Cluster)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: metav1.NamespaceDefault, Labels: map[string]string{"app": "hello"}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{RealNodeLabel: "true"},
			Tolerations:  []corev1.Toleration{{Key: RealNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers: []corev1.Container{{
				Name:  "hello",
				Image: image,
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1,
				},
			}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
	if _, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var got *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err = cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.Phase == corev1.PodRunning && podReady(got), nil
	})
	if err != nil {
		t.Fatalf("waiting for the pod Running and Ready on %s: %v\nstatus: %+v\n--- kubelet:\n%s\n--- containerd:\n%s", node.Name, err, got.Status, tail(node, "kubelet"), tail(node, "containerd"))
	}
	t.Logf("pod %s Running and Ready on %s at %s in %s", got.Name, got.Spec.NodeName, got.Status.PodIP, time.Since(start).Round(time.Millisecond))
	if got.Spec.NodeName != node.Name {
		t.Errorf("pod ran on %q, want the real node %q", got.Spec.NodeName, node.Name)
	}

	logs, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the pod's log through the API server: %v", err)
	}
	t.Logf("pod log: %s", strings.TrimSpace(string(logs)))
	if !strings.Contains(string(logs), "hello from a real container on hello") {
		t.Errorf("pod log = %q, want the line hello printed", logs)
	}

	body, err := httpGet(ctx, fmt.Sprintf("http://%s:8080/", got.Status.PodIP))
	if err != nil {
		t.Fatalf("reaching the pod from the host: %v", err)
	}
	if want := "ok from hello"; !strings.Contains(body, want) {
		t.Errorf("pod answered %q, want %q", body, want)
	}
	return got
}

// tail is the end of the log of one of the node's processes.
func tail(n *RealNode, process string) string {
	p, _ := n.Process(process)
	return p.Tail(30)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// httpGet GETs url on a new connection each time: before kube-proxy
// programs a Service, its address follows the host's default route, where
// this sandbox's egress proxy answers 404 and keeps the connection alive;
// reusing that connection would bypass the DNAT rules for good.
func httpGet(ctx context.Context, url string) (string, error) {
	return get(ctx, url, &http.Transport{DisableKeepAlives: true})
}

// httpsGetInsecure GETs from a server whose certificate is self-signed (the
// kubelet's).
func httpsGetInsecure(ctx context.Context, url string) (string, error) {
	return get(ctx, url, &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}) //nolint:gosec // the kubelet's self-signed certificate, on this host
}

func get(ctx context.Context, url string, transport *http.Transport) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	client := &http.Client{Transport: transport}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %q", url, resp.Status, b)
	}
	return string(b), err
}

// testWriter sends a logger's lines to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// runTaskRun runs a TaskRun of one step on the node, with Tekton's nop
// image as the step (the node serves Tekton's images): Tekton's "prepare"
// init container copies its entrypoint, which then runs the step; the
// TaskRun succeeds, and the kubelet saw both exit 0.
func runTaskRun(ctx context.Context, t *testing.T, f *Fleet, node *RealNode) {
	t.Helper()
	c, _ := f.Cluster(node.Cluster)
	cfg, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	tc, err := tektonclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := &tektonv1.TaskRun{
		ObjectMeta: metav1.ObjectMeta{Name: "nop", Namespace: metav1.NamespaceDefault},
		Spec: tektonv1.TaskRunSpec{
			TaskSpec: &tektonv1.TaskSpec{Steps: []tektonv1.Step{{Name: "nop", Image: TektonImage("nop"), Command: []string{"/ko-app/nop"}}}},
			PodTemplate: &pod.Template{
				NodeSelector: map[string]string{RealNodeLabel: "true"},
				Tolerations:  []corev1.Toleration{{Key: RealNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			},
		},
	}
	if _, err := tc.TektonV1().TaskRuns(tr.Namespace).Create(ctx, tr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var got *tektonv1.TaskRun
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err = tc.TektonV1().TaskRuns(tr.Namespace).Get(ctx, tr.Name, metav1.GetOptions{})
		return err == nil && got.IsDone(), err
	})
	if err != nil {
		t.Fatalf("waiting for the TaskRun on %s: %v\n--- kubelet:\n%s", node.Name, err, tail(node, "kubelet"))
	}
	if cond := got.Status.GetCondition(apis.ConditionSucceeded); !cond.IsTrue() {
		t.Fatalf("TaskRun ended %s: %s\n--- kubelet:\n%s", cond.GetReason(), cond.GetMessage(), tail(node, "kubelet"))
	}
	p, err := clientset(t, f, node.Cluster).CoreV1().Pods(tr.Namespace).Get(ctx, got.Status.PodName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("TaskRun %s succeeded on %s in %s", got.Name, p.Spec.NodeName, time.Since(start).Round(time.Millisecond))
	if p.Spec.NodeName != node.Name {
		t.Errorf("the TaskRun's pod ran on %q, want the real node %q", p.Spec.NodeName, node.Name)
	}
	for _, st := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 {
			t.Errorf("container %s (%s): %+v, want terminated with exit code 0", st.Name, st.Image, st.State)
		}
	}
}
