package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tektoncd/pipeline/pkg/apis/pipeline/pod"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

// TestExampleConfig parses config/example.yaml as it is, except that its
// kubeconfig paths under /tmp/flotilla-fleet, which a local fleet would
// create, are pointed at files in a temporary directory: Parse checks that
// kubeconfigs exist, like Load.
func TestExampleConfig(t *testing.T) {
	const fleetDir = "/tmp/flotilla-fleet/"
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), fleetDir) {
		t.Fatalf("example.yaml names no kubeconfig under %s", fleetDir)
	}
	tmp := t.TempDir()
	for _, c := range []string{"c1", "c2", "c3"} {
		writeFile(t, filepath.Join(tmp, c, "kubeconfig"), "apiVersion: v1\nkind: Config\n")
	}
	data = []byte(strings.ReplaceAll(string(data), fleetDir, tmp+"/"))
	t.Setenv("FLOTILLA_REGISTRY_TOKEN", "registry-token")
	t.Setenv("FLOTILLA_GITHUB_SECRET", "github-secret")
	t.Setenv("FLOTILLA_FLAGGER_TOKEN", "flagger-token")
	t.Setenv("FLOTILLA_DEPLOYMENTS_TOKEN", "deployments-token")
	t.Setenv("FLOTILLA_API_TOKEN", "api-token")

	got, err := Parse(data, filepath.Join("..", "..", "config"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := &Config{
		Server: Server{
			Listen:          "127.0.0.1:8080",
			DataDir:         "/tmp/flotilla-data",
			ExternalURL:     "http://127.0.0.1:8080",
			Instance:        "flotilla",
			Workers:         16,
			Retention:       &Duration{Duration: 168 * time.Hour},
			DedupeWindow:    Duration{Duration: 24 * time.Hour},
			DedupeMaxEvents: ptr.To(1000000),
			APIToken:        &Secret{Env: "FLOTILLA_API_TOKEN"},
			APITokenValue:   "api-token",
		},
		Receivers: []Receiver{
			{Name: "registry", Type: "distribution", Secret: &Secret{Env: "FLOTILLA_REGISTRY_TOKEN"}, SecretValue: "registry-token"},
			{Name: "github", Type: "github", Secret: &Secret{Env: "FLOTILLA_GITHUB_SECRET"}, SecretValue: "github-secret"},
			{Name: "flagger", Type: "flagger", Secret: &Secret{Env: "FLOTILLA_FLAGGER_TOKEN"}, SecretValue: "flagger-token"},
		},
		Fleet: Fleet{
			Executor: "embedded",
			Clusters: []Cluster{
				{Name: "c1", Kubeconfig: filepath.Join(tmp, "c1", "kubeconfig"), Labels: map[string]string{"env": "canary"}},
				{Name: "c2", Kubeconfig: filepath.Join(tmp, "c2", "kubeconfig"), Labels: map[string]string{"env": "prod"}},
				{Name: "c3", Kubeconfig: filepath.Join(tmp, "c3", "kubeconfig"), Labels: map[string]string{"env": "prod"}},
			},
			Waves: []Wave{
				{Name: "canary", Clusters: []string{"c1"}, Members: []string{"c1"}},
				{Name: "prod", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
					MaxParallel: ptr.To(intstr.FromInt32(2)), Members: []string{"c2", "c3"}},
			},
			WavePolicy:    WavePolicy{MaxParallel: ptr.To(intstr.FromString("100%")), MaxFailures: ptr.To(intstr.FromInt32(0)), BakeTime: &Duration{}, Approvals: ApprovalsOf(0), RequireSignature: ptr.To(true)},
			MetricsServer: "http://prometheus.monitoring:9090",
			Poll:          Poll{Interval: &Duration{5 * time.Minute}},
			Reconcile:     Reconcile{Interval: &Duration{time.Minute}},
		},
		Applications: []Application{{
			Name:  "podinfo",
			Image: "127.0.0.1:5000/demo/podinfo",
			ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"canary", "prod"}}}},
			Track: TrackMinorVersion, OnNewVersion: OnNewVersionSupersede, DriftPolicy: DriftPolicyReport, Semver: ">=1.0.0", DenyTags: []string{`1\.4\.2`, ".*-debug"},
			Namespace: "demo",
			Workload:  Workload{Kind: "Deployment", Name: "podinfo", Container: "podinfo"},
			Service:   Service{Port: 9898, PortDiscovery: ptr.To(true)},
			Delivery: Delivery{
				Strategy:         "blueGreen",
				Provider:         "kubernetes",
				Interval:         Duration{10 * time.Second},
				Iterations:       2,
				Threshold:        1,
				ProgressDeadline: Duration{2 * time.Minute},
				Deadline:         Duration{10 * time.Minute},
				Webhooks:         []Webhook{},
			},
		}, {
			Name: "frontend",
			Source: &Source{Git: &GitSource{
				URL: "https://git.example.com/platform/deployments.git", Branch: "main", Tags: "frontend-v[0-9.]+", Render: "helm",
				Helm: &HelmRelease{Chart: "charts/frontend", DefaultValues: []string{"environments/{cluster}/defaults.yaml"},
					ValuesFile: "clusters/{cluster}/frontend/values.yaml", Values: map[string]any{"replicaCount": float64(2)}, ReleaseName: "frontend"},
				AllowedImages: []string{`registry\.example\.com/web/.*`}, Prune: ptr.To(true),
				Token: &Secret{Env: "FLOTILLA_DEPLOYMENTS_TOKEN"}, TokenValue: "deployments-token",
			}},
			Track: TrackMinorVersion, OnNewVersion: OnNewVersionSupersede,
			Namespace: "web",
			Workload:  Workload{Kind: "Deployment", Name: "frontend"},
			Service:   Service{Port: 8080, PortDiscovery: ptr.To(true)},
			Delivery: Delivery{Strategy: "blueGreen", Provider: "kubernetes", Interval: Duration{30 * time.Second}, Iterations: 4,
				Threshold: 5, ProgressDeadline: Duration{10 * time.Minute}},
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("example config (-want +got):\n%s", diff)
	}
}

// TestExampleReferenceBlocks loads the commented applications at the end
// of config/example.yaml ("#  - name: ..." blocks, for reference) as
// entries of the example's applications: each must be a valid config.
func TestExampleReferenceBlocks(t *testing.T) {
	const fleetDir = "/tmp/flotilla-fleet/"
	data, tmp := exampleFixture(t)
	var blocks [][]string
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "#  - name: "):
			blocks = append(blocks, []string{line[1:]})
		case len(blocks) > 0 && strings.HasPrefix(line, "#    "):
			blocks[len(blocks)-1] = append(blocks[len(blocks)-1], line[1:])
		case len(blocks) > 0 && !strings.HasPrefix(line, "#"):
			blocks[len(blocks)-1] = append(blocks[len(blocks)-1], "") // ends the block
		}
	}
	if len(blocks) < 2 {
		t.Fatalf("found %d reference applications in example.yaml, want the Istio one and the GitOps one", len(blocks))
	}
	base := strings.ReplaceAll(string(data), fleetDir, tmp+"/")
	i := strings.Index(base, "\napplications:\n")
	if i < 0 {
		t.Fatal("example.yaml has no applications: section")
	}
	for _, b := range blocks {
		name := strings.TrimPrefix(b[0], "  - name: ")
		t.Run(name, func(t *testing.T) {
			doc := base[:i] + "\napplications:\n" + strings.Join(b, "\n") + "\n" + base[i+len("\napplications:\n"):]
			if _, err := Parse([]byte(doc), filepath.Join("..", "..", "config")); err != nil {
				t.Errorf("reference application %s:\n%v", name, err)
			}
		})
	}
}

// TestExamples loads every configuration of config/examples (the seeds'
// examples), its kubeconfigs under /tmp/flotilla-fleet pointed at files of
// a temporary directory.
func TestExamples(t *testing.T) {
	const fleetDir = "/tmp/flotilla-fleet/"
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("found %d examples, want podinfo on Istio and on Kuma at least", len(files))
	}
	tmp := t.TempDir()
	for _, c := range []string{"c1", "c2", "c3"} {
		writeFile(t, filepath.Join(tmp, c, "kubeconfig"), "apiVersion: v1\nkind: Config\n")
	}
	t.Setenv("FLOTILLA_REGISTRY_TOKEN", "registry-token")
	t.Setenv("FLOTILLA_FLAGGER_TOKEN", "flagger-token")
	t.Setenv("FLOTILLA_API_TOKEN", "api-token")
	t.Setenv("FLOTILLA_GITHUB_SECRET", "github-secret")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			data = []byte(strings.ReplaceAll(string(data), fleetDir, tmp+"/"))
			c, err := Parse(data, filepath.Dir(f))
			if err != nil {
				t.Fatal(err)
			}
			if c.Server.AuthNotice() != "" {
				t.Errorf("the example would refuse every reader: %s", c.Server.AuthNotice())
			}
			switch filepath.Base(f) {
			case "release-set-images.yaml":
				// A release set of image members: the set's application
				// built of them, the api its lead, no source.
				set, ok := c.Application("shop")
				if !ok || set.Set == nil || set.Source != nil || set.Workload.Name != "shop-api" || len(set.Set.Members) != 2 {
					t.Errorf("the set shop: %+v (found %t), want a set of 2 image members led by shop-api", set, ok)
				}
				return
			case "release-set-mixed.yaml":
				// A release set of git and image members: led by the git
				// api, its source the git members' repository.
				set, ok := c.Application("shop")
				if !ok || set.Set == nil || !set.Set.Mixed() || set.Git() == nil || set.Workload.Name != "shop-api" || len(set.Set.Members) != 3 {
					t.Errorf("the set shop: %+v (found %t), want a set of 3 git and image members led by shop-api", set, ok)
				}
				return
			case "release-set-mixed-frontend-lead.yaml":
				// Led by its image member, the frontend: the source is
				// still the git members' repository.
				set, ok := c.Application("shop")
				if !ok || set.Set == nil || !set.Set.Mixed() || set.Git() == nil || set.Workload.Name != "shop-frontend" || len(set.Set.Members) != 3 || set.Set.Members[0].Name != "shop-frontend" {
					t.Errorf("the set shop: %+v (found %t), want a set of 3 git and image members led by shop-frontend, its source the repository", set, ok)
				}
				return
			}
			if a := c.Applications[0]; a.Namespace != "webapp" || a.Service.Name != "backend" || !a.Delivery.TestLoader {
				t.Errorf("Kurator's block not applied: namespace %q, service %q, testLoader %t", a.Namespace, a.Service.Name, a.Delivery.TestLoader)
			}
		})
	}
}

// TestExampleRegistries loads config/example.yaml with its commented
// registries block uncommented, its Docker config file made: a valid
// config with the block's values.
func TestExampleRegistries(t *testing.T) {
	const fleetDir = "/tmp/flotilla-fleet/"
	data, tmp := exampleFixture(t)
	dockerConfig := filepath.Join(tmp, ".dockerconfigjson")
	writeFile(t, dockerConfig, `{"auths": {"registry.example.com": {"auth": "dTpw"}}}`)
	var block []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case line == "# registries:":
			in = true
		case in && !strings.HasPrefix(line, "#"):
			in = false
		}
		if in {
			block = append(block, strings.TrimPrefix(strings.TrimPrefix(line, "#"), " "))
		}
	}
	if len(block) < 3 {
		t.Fatalf("found no commented registries block in example.yaml: %q", block)
	}
	doc := strings.ReplaceAll(string(data), fleetDir, tmp+"/") + "\n" + strings.Join(block, "\n") + "\n"
	doc = strings.ReplaceAll(doc, "/etc/flotilla/registries/regcred/.dockerconfigjson", dockerConfig)
	c, err := Parse([]byte(doc), filepath.Join("..", "..", "config"))
	if err != nil {
		t.Fatalf("example.yaml with its registries block:\n%v", err)
	}
	want := &Registries{DockerConfigFiles: []string{dockerConfig}, Providers: []string{"aws"}}
	if diff := cmp.Diff(want, c.Registries); diff != "" {
		t.Errorf("registries (-want +got)\n%s", diff)
	}
}

// TestExampleTekton loads config/example.yaml with its commented tekton
// block uncommented, executor tekton: a valid config with the block's
// values.
func TestExampleTekton(t *testing.T) {
	const fleetDir = "/tmp/flotilla-fleet/"
	data, tmp := exampleFixture(t)
	var block []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case line == "  # tekton:":
			in = true
		case in && !strings.HasPrefix(line, "  #   "):
			in = false
		}
		if in {
			block = append(block, "  "+strings.TrimPrefix(line, "  # "))
		}
	}
	if len(block) < 3 {
		t.Fatalf("found no commented tekton block in example.yaml: %q", block)
	}
	doc := strings.ReplaceAll(string(data), fleetDir, tmp+"/")
	if strings.Count(doc, "\n  executor: embedded\n") != 1 {
		t.Fatal("example.yaml does not set fleet.executor: embedded once")
	}
	doc = strings.Replace(doc, "\n  executor: embedded\n", "\n  executor: tekton\n"+strings.Join(block, "\n")+"\n", 1)
	c, err := Parse([]byte(doc), filepath.Join("..", "..", "config"))
	if err != nil {
		t.Fatalf("example.yaml with its tekton block:\n%v", err)
	}
	want := &TektonExecutor{
		Cluster: "c1", Namespace: "flotilla", ServiceAccount: "flotilla-steps", Labels: map[string]string{"team": "platform"},
		ManageSecrets: ptr.To(true),
		PodTemplate: &pod.Template{
			NodeSelector:     map[string]string{"node-pool": "ci"},
			Tolerations:      []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ci", Effect: corev1.TaintEffectNoSchedule}},
			SecurityContext:  &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532)},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}},
		},
	}
	if diff := cmp.Diff(want, c.Fleet.Tekton); diff != "" {
		t.Errorf("fleet.tekton (-want +got)\n%s", diff)
	}
}

// exampleFixture is config/example.yaml and a directory holding the
// kubeconfigs its clusters name (under /tmp/flotilla-fleet/ in the file),
// with the environment variables its secrets read set.
func exampleFixture(t *testing.T) (data []byte, dir string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	for _, c := range []string{"c1", "c2", "c3"} {
		writeFile(t, filepath.Join(dir, c, "kubeconfig"), "apiVersion: v1\nkind: Config\n")
	}
	t.Setenv("FLOTILLA_REGISTRY_TOKEN", "registry-token")
	t.Setenv("FLOTILLA_GITHUB_SECRET", "github-secret")
	t.Setenv("FLOTILLA_FLAGGER_TOKEN", "flagger-token")
	t.Setenv("FLOTILLA_DEPLOYMENTS_TOKEN", "deployments-token")
	t.Setenv("FLOTILLA_API_TOKEN", "api-token")
	return data, dir
}
