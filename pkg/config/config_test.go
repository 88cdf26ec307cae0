package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

const testToken = "s3cret-token-value"

// sections builds a config document. Sections left empty get a minimal valid
// one; "-" leaves the section out.
type sections struct {
	server, events, receivers, fleet, applications string
}

func (s sections) doc() string {
	def := func(got, fallback string) string {
		switch got {
		case "":
			return fallback
		case "-":
			return ""
		}
		return got
	}
	return def(s.server, "") +
		def(s.events, "") +
		withFlagger(def(s.receivers, `receivers:
  - name: registry
    type: distribution
    secret: {env: FLOTILLA_TEST_TOKEN}
  - `+flaggerReceiver+`
`)) +
		def(s.fleet, `
fleet:
  clusters:
    - name: c1
      kubeconfig: c1.kubeconfig
  waves:
    - clusters: [c1]
`) +
		def(s.applications, `
applications:
  - name: podinfo
    image: registry.example.com/demo/podinfo
    workload: {name: podinfo}
    service: {port: 9898}
`)
}

// flaggerReceiver is the receiver withFlagger adds.
const flaggerReceiver = "{name: canaries, type: flagger, secret: {env: FLOTILLA_TEST_TOKEN}}"

// withFlagger adds a flagger receiver, which every config needs, to a
// receivers section that has none, after its receivers (so that their
// indexes in problems stay), unless the section is empty or absent.
func withFlagger(section string) string {
	switch {
	case strings.Contains(section, "type: flagger"), strings.TrimSpace(section) == "", strings.Contains(section, "receivers: []"):
		return section
	case strings.HasSuffix(section, "]\n"):
		return strings.TrimSuffix(section, "]\n") + ", " + flaggerReceiver + "]\n"
	}
	return strings.TrimRight(section, "\n") + "\n  - " + flaggerReceiver + "\n"
}

// testDir returns a directory holding kubeconfigs c1..c3.kubeconfig, with
// the test token in the environment.
func testDir(t *testing.T) string {
	t.Helper()
	t.Setenv("FLOTILLA_TEST_TOKEN", testToken)
	dir := t.TempDir()
	for _, c := range []string{"c1", "c2", "c3"} {
		writeFile(t, filepath.Join(dir, c+".kubeconfig"), "apiVersion: v1\nkind: Config\n")
	}
	return dir
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestParseDefaults(t *testing.T) {
	dir := testDir(t)
	got, err := Parse([]byte(sections{}.doc()), dir)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := &Config{
		Server: Server{
			Listen:          "127.0.0.1:8080",
			DataDir:         filepath.Join(dir, "flotilla-data"),
			Instance:        "flotilla",
			Workers:         16,
			Retention:       &Duration{Duration: 168 * time.Hour},
			DedupeWindow:    Duration{Duration: 24 * time.Hour},
			DedupeMaxEvents: ptr.To(1000000),
		},
		Receivers: []Receiver{{
			Name:        "registry",
			Type:        "distribution",
			Secret:      &Secret{Env: "FLOTILLA_TEST_TOKEN"},
			SecretValue: testToken,
		}, {
			Name:        "canaries",
			Type:        "flagger",
			Secret:      &Secret{Env: "FLOTILLA_TEST_TOKEN"},
			SecretValue: testToken,
		}},
		Fleet: Fleet{
			Executor:      "embedded",
			Clusters:      []Cluster{{Name: "c1", Kubeconfig: filepath.Join(dir, "c1.kubeconfig")}},
			Waves:         []Wave{{Name: "wave-1", Clusters: []string{"c1"}, Members: []string{"c1"}}},
			MetricsServer: DefaultMetricsServer,
			Poll:          Poll{Interval: &Duration{DefaultRegistryPoll}},
		},
		Applications: []Application{{
			Name:  "podinfo",
			Image: "registry.example.com/demo/podinfo",
			Track: TrackMinorVersion, OnNewVersion: OnNewVersionSupersede,
			Namespace: "default",
			Workload:  Workload{Kind: "Deployment", Name: "podinfo"},
			Service:   Service{Port: 9898, PortDiscovery: ptr.To(true)},
			Delivery: Delivery{
				Strategy:         "blueGreen",
				Provider:         "kubernetes",
				Interval:         Duration{time.Minute},
				Iterations:       10,
				Threshold:        5,
				ProgressDeadline: Duration{10 * time.Minute},
			},
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}

func TestParseDefaultsFields(t *testing.T) {
	dir := testDir(t)
	tests := []struct {
		name string
		doc  sections
		get  func(*Config) any
		want any
	}{{
		name: "externalURL is not derived at load: serve derives it from the bound address",
		doc:  sections{server: "server: {listen: '10.0.0.5:9090'}\n"},
		get:  func(c *Config) any { return c.Server.ExternalURL },
		want: "",
	}, {
		name: "explicit externalURL kept",
		doc:  sections{server: "server: {listen: ':9090', externalURL: 'https://flotilla.example.com'}\n"},
		get:  func(c *Config) any { return c.Server.ExternalURL },
		want: "https://flotilla.example.com",
	}, {
		name: "relative dataDir resolves against baseDir",
		doc:  sections{server: "server: {dataDir: state/db}\n"},
		get:  func(c *Config) any { return c.Server.DataDir },
		want: filepath.Join(dir, "state", "db"),
	}, {
		name: "absolute dataDir kept",
		doc:  sections{server: "server: {dataDir: /var/lib/flotilla/}\n"},
		get:  func(c *Config) any { return c.Server.DataDir },
		want: "/var/lib/flotilla",
	}, {
		name: "waves named by position",
		doc: sections{fleet: `
fleet:
  clusters:
    - {name: c1, kubeconfig: c1.kubeconfig}
    - {name: c2, kubeconfig: c2.kubeconfig}
    - {name: c3, kubeconfig: c3.kubeconfig}
  waves:
    - clusters: [c1]
    - {name: prod, clusters: [c2]}
    - clusters: [c3]
`},
		get: func(c *Config) any { return c.Fleet.Waves },
		want: []Wave{{Name: "wave-1", Clusters: []string{"c1"}, Members: []string{"c1"}}, {Name: "prod", Clusters: []string{"c2"}, Members: []string{"c2"}},
			{Name: "wave-3", Clusters: []string{"c3"}, Members: []string{"c3"}}},
	}, {
		name: "webhook type and timeout",
		doc: sections{applications: `
applications:
  - name: podinfo
    image: registry.example.com/demo/podinfo
    workload: {name: podinfo}
    service: {port: 9898}
    delivery:
      webhooks:
        - {name: load, url: 'http://loadtester/'}
        - {name: gate, type: confirm-promotion, url: 'https://gate.example.com/', timeout: 30s, metadata: {a: b}}
`},
		get: func(c *Config) any { return c.Applications[0].Delivery.Webhooks },
		want: []Webhook{
			{Name: "load", Type: "rollout", URL: "http://loadtester/", Timeout: Duration{10 * time.Second}},
			{Name: "gate", Type: "confirm-promotion", URL: "https://gate.example.com/", Timeout: Duration{30 * time.Second}, Metadata: map[string]string{"a": "b"}},
		},
	}, {
		name: "explicit delivery kept",
		doc: sections{applications: `
applications:
  - name: podinfo
    image: registry.example.com/demo/podinfo
    track: PatchLevel
    namespace: demo
    workload: {kind: Deployment, name: podinfo, container: app}
    service: {port: 9898}
    delivery: {strategy: blueGreen, interval: 10s, iterations: 2, threshold: 1, progressDeadline: 90s}
`},
		get: func(c *Config) any { return c.Applications[0] },
		want: Application{
			Name:  "podinfo",
			Image: "registry.example.com/demo/podinfo",
			Track: TrackPatchLevel, OnNewVersion: OnNewVersionSupersede,
			Namespace: "demo",
			Workload:  Workload{Kind: "Deployment", Name: "podinfo", Container: "app"},
			Service:   Service{Port: 9898, PortDiscovery: ptr.To(true)},
			Delivery: Delivery{
				Strategy:         "blueGreen",
				Provider:         "kubernetes",
				Interval:         Duration{10 * time.Second},
				Iterations:       2,
				Threshold:        1,
				ProgressDeadline: Duration{90 * time.Second},
			},
		},
	}, {
		name: "insecure receiver has no secret value",
		doc:  sections{receivers: "receivers: [{name: open, type: github, insecure: true}]\n"},
		get:  func(c *Config) any { return c.Receivers[0] },
		want: Receiver{Name: "open", Type: "github", Insecure: true},
	}, {
		name: "string fields take unquoted scalars",
		doc: sections{fleet: `
fleet:
  clusters:
    - name: c1
      kubeconfig: c1.kubeconfig
      context: 42
      labels: {zone: 1, canary: true}
  waves: [{clusters: [c1]}]
`},
		get:  func(c *Config) any { return c.Fleet.Clusters[0] },
		want: Cluster{Name: "c1", Kubeconfig: filepath.Join(dir, "c1.kubeconfig"), Context: "42", Labels: map[string]string{"zone": "1", "canary": "true"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.doc.doc()), dir)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tt.want, tt.get(c)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLookups(t *testing.T) {
	c := &Config{
		Receivers:    []Receiver{{Name: "registry"}, {Name: "github"}},
		Fleet:        Fleet{Clusters: []Cluster{{Name: "c1"}, {Name: "c2", Context: "two"}}},
		Applications: []Application{{Name: "a"}, {Name: "b", Image: "r.example.com/b"}},
	}
	if got, ok := c.Application("b"); !ok || got.Image != "r.example.com/b" {
		t.Errorf("Application(b) = %+v, %v", got, ok)
	}
	if got, ok := c.Cluster("c2"); !ok || got.Context != "two" {
		t.Errorf("Cluster(c2) = %+v, %v", got, ok)
	}
	if got, ok := c.Receiver("github"); !ok || got.Name != "github" {
		t.Errorf("Receiver(github) = %+v, %v", got, ok)
	}
	if _, ok := c.Application("zzz"); ok {
		t.Error("Application(zzz) found")
	}
	if _, ok := c.Cluster("zzz"); ok {
		t.Error("Cluster(zzz) found")
	}
	if _, ok := c.Receiver("zzz"); ok {
		t.Error("Receiver(zzz) found")
	}
}

func TestLoad(t *testing.T) {
	dir := testDir(t)
	t.Run("resolves paths against the file's directory", func(t *testing.T) {
		path := writeFile(t, filepath.Join(dir, "flotilla.yaml"), sections{}.doc())
		t.Chdir(t.TempDir()) // the working directory must not matter
		c, err := Load(path)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if diff := cmp.Diff(filepath.Join(dir, "c1.kubeconfig"), c.Fleet.Clusters[0].Kubeconfig); diff != "" {
			t.Errorf("kubeconfig (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(filepath.Join(dir, "flotilla-data"), c.Server.DataDir); diff != "" {
			t.Errorf("dataDir (-want +got):\n%s", diff)
		}
	})
	t.Run("git credential files resolve against the file's directory", func(t *testing.T) {
		writeFile(t, filepath.Join(dir, "git-token"), "s3cret\n")
		writeFile(t, filepath.Join(dir, "api-token"), "api\n")
		path := writeFile(t, filepath.Join(dir, "gitops.yaml"), sections{applications: withApp(`    gitops:
      url: https://git.example.com/shop/deploy.git
      paths: ['clusters/{cluster}/values.yaml']
      token: {file: git-token}
      mode: pullRequest
      pullRequest: {host: gitea, token: {file: api-token}}
`)}.doc())
		t.Chdir(t.TempDir())
		c, err := Load(path)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		g := c.Applications[0].GitOps
		got := []string{g.Token.File, g.TokenValue, g.PullRequest.Token.File, g.PullRequest.TokenValue}
		want := []string{filepath.Join(dir, "git-token"), "s3cret", filepath.Join(dir, "api-token"), "api"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("token file, value, API token file, value (-want +got):\n%s", diff)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(dir, "nope.yaml")
		_, err := Load(path)
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
			t.Errorf("Load = %v, want a not-exist error naming %s", err, path)
		}
	})
	t.Run("parse error names the file", func(t *testing.T) {
		path := writeFile(t, filepath.Join(dir, "typo.yaml"), "serve: {}\n")
		_, err := Load(path)
		want := `parsing config "` + path + `": line 1: unknown field "serve"`
		if err == nil || err.Error() != want {
			t.Errorf("Load = %v, want %s", err, want)
		}
	})
	t.Run("invalid config names the file and wraps a ValidationError", func(t *testing.T) {
		path := writeFile(t, filepath.Join(dir, "invalid.yaml"), sections{applications: "-"}.doc())
		_, err := Load(path)
		var verr *ValidationError
		if !errors.As(err, &verr) {
			t.Fatalf("Load = %v, want a *ValidationError", err)
		}
		want := []Problem{{"applications", "at least one application is required"}}
		if diff := cmp.Diff(want, verr.Problems); diff != "" {
			t.Errorf("problems (-want +got):\n%s", diff)
		}
		if !strings.HasPrefix(err.Error(), `validating config "`+path+`": applications: `) {
			t.Errorf("Load = %q, want it to name %s", err, path)
		}
	})
}

func TestExternalURLFor(t *testing.T) {
	tests := []struct{ listen, want string }{
		{"10.0.0.5:9090", "http://10.0.0.5:9090"},
		{":9090", "http://127.0.0.1:9090"},
		{"0.0.0.0:9090", "http://127.0.0.1:9090"},
		{"[::]:9090", "http://127.0.0.1:9090"},
		{"[fd00::1]:9090", "http://[fd00::1]:9090"},
		{"127.0.0.1:43211", "http://127.0.0.1:43211"},
	}
	for _, tt := range tests {
		if got := ExternalURLFor(tt.listen); got != tt.want {
			t.Errorf("ExternalURLFor(%q) = %q, want %q", tt.listen, got, tt.want)
		}
	}
}

// A wave's own policy fields win over the fleet's; requiredSoakTime is
// bakeTime under Kargo's name.
func TestWavePolicy(t *testing.T) {
	d := func(s time.Duration) *Duration { return &Duration{s} }
	fleet := WavePolicy{MaxParallel: ptr.To(intstr.FromString("50%")), MaxFailures: ptr.To(intstr.FromInt32(1)), BakeTime: d(time.Minute)}
	tests := []struct {
		name                   string
		wave                   Wave
		n                      int
		wantParallel, wantFail int
		wantBake               time.Duration
	}{
		{"the fleet's", Wave{}, 5, 3, 1, time.Minute},
		{"the wave's own", Wave{MaxParallel: ptr.To(intstr.FromInt32(1)), RequiredSoakTime: d(2 * time.Minute)}, 5, 1, 1, 2 * time.Minute},
		{"percentages round: up for parallel, down for failures", Wave{MaxFailures: ptr.To(intstr.FromString("30%"))}, 3, 2, 0, time.Minute},
		{"no bake for this wave", Wave{BakeTime: d(0)}, 1, 1, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.wave.Policy(fleet)
			par, fail := p.Limits(tt.n)
			if diff := cmp.Diff([]any{tt.wantParallel, tt.wantFail, tt.wantBake}, []any{par, fail, p.Bake()}); diff != "" {
				t.Errorf("maxParallel, maxFailures, bake (-want +got):\n%s", diff)
			}
		})
	}
}
