package config

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/render"
)

// kubecdSummary is what a KubeCD config made: each application's
// namespace, workload, clusters (with their environment) and tracked
// paths, the clusters' contexts and the waves.
func kubecdSummary(c *Config) []string {
	var out []string
	for _, cl := range c.Fleet.Clusters {
		out = append(out, "cluster "+cl.Name+" context="+cl.Context)
	}
	for _, w := range c.Fleet.Waves {
		out = append(out, "wave "+w.Name+": "+strings.Join(w.ClusterNames(), ","))
	}
	for _, a := range c.Applications {
		g := a.Git()
		s := "app " + a.Name + " ns=" + a.Namespace + " workload=" + a.Workload.Name + " render=" + g.Render + " port=" + strconv.Itoa(int(a.Service.Port)) + " in"
		for _, cl := range c.Fleet.Clusters {
			if a.Targets(cl) {
				s += " " + cl.Name + "(" + g.KubeCD.Environments[cl.Name] + ")"
			}
		}
		out = append(out, s)
	}
	return out
}

// TestExampleKubeCD loads config/examples/kubecd, the seed's KubeCD files
// as written there, as `flotilla config check --kubecd` does, and renders
// every release of it as a rollout would.
func TestExampleKubeCD(t *testing.T) {
	dir := filepath.Join("..", "..", "config", "examples", "kubecd")
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	writeFile(t, kubeconfig, "apiVersion: v1\nkind: Config\n")
	c, err := LoadKubeCD(dir, kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"cluster analytics context=gke_zedge-prod_us-central1-b_analytics",
		"wave analytics: analytics",
		"app clickhouse ns=default workload=clickhouse render=kubecd port=80 in analytics(analytics)",
		"app default-kafkaesque ns=default workload=kafkaesque render=kubecd port=80 in analytics(analytics)",
		"app kafka ns=default workload=kafka render=kubecd port=80 in analytics(analytics)",
		"app airflow-kafkaesque ns=airflow workload=kafkaesque render=kubecd port=80 in analytics(airflow)",
	}
	if d := cmp.Diff(want, kubecdSummary(c)); d != "" {
		t.Errorf("config (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{
		"release kafkaesque of environment analytics: trigger 0 tracks gcr.io/zedge-prod/kafkaesque (track Newest, now latest): a push of a tag the track accepts is committed to image.tag of kafkaesque in config/examples/kubecd/analytics/releases.yaml",
		"release kafka of environment analytics: trigger 0 tracks confluentinc/cp-kafka (track PatchLevel, now 4.0): a push of a tag the track accepts is committed to image.tag of kafka in config/examples/kubecd/analytics/releases.yaml",
		"release kafka of environment analytics: trigger 1 tracks confluentinc/cp-zookeeper (track PatchLevel, now 4.0.1): a push of a tag the track accepts is committed to zookeeper.image.tag of kafka in config/examples/kubecd/analytics/releases.yaml",
		"release kafkaesque of environment airflow: trigger 0 tracks gcr.io/zedge-prod/backend-api-browse (track Newest, now v20170911-0926): a push of a tag the track accepts is committed to image.tag of kafkaesque in config/examples/kubecd/analytics/airflow-releases.yaml",
	}, c.KubeCDNotices()); d != "" {
		t.Errorf("notices (-want +got):\n%s", d)
	}
	root := gitRoot(mustAbs(t, dir))
	rendered := map[string][]string{}
	for _, a := range c.Applications {
		k := a.Git().KubeCD
		objs, err := render.Render(render.Request{Dir: root, Kind: render.KubeCD, Chart: &render.Chart{
			Namespace: a.Namespace, KubeCD: &render.KubeCDRelease{EnvironmentsFile: k.EnvironmentsFile, Environment: k.Environments["analytics"], Release: k.Release},
		}})
		if err != nil {
			t.Fatalf("rendering %s: %v", a.Name, err)
		}
		for _, o := range objs {
			s := o.GetKind() + " " + o.GetName()
			if o.GetKind() == "Deployment" {
				cs, _, _ := unstructuredContainers(o.Object)
				s += " " + strings.Join(cs, " ")
			}
			rendered[a.Name] = append(rendered[a.Name], s)
		}
	}
	if d := cmp.Diff(map[string][]string{
		"clickhouse":         {"Deployment clickhouse yandex/clickhouse-server:1.1 DOMAIN=zedge.io", "StorageClass fast"},
		"default-kafkaesque": {"Deployment kafkaesque gcr.io/zedge-prod/kafkaesque:latest DOMAIN=zedge.io"},
		"kafka":              {"Deployment kafka confluentinc/cp-kafka:4.0 DOMAIN=zedge.io", "Deployment kafka-zookeeper confluentinc/cp-zookeeper:4.0.1"},
		"airflow-kafkaesque": {"Deployment kafkaesque gcr.io/zedge-prod/backend-api-browse:v20170911-0926 DOMAIN=zedge.io"},
	}, rendered); d != "" {
		t.Errorf("rendered (-want +got):\n%s", d)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// unstructuredContainers lists a Deployment's containers as
// "image env=value...".
func unstructuredContainers(obj map[string]any) ([]string, bool, error) {
	spec, _ := obj["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	pod, _ := tmpl["spec"].(map[string]any)
	cs, _ := pod["containers"].([]any)
	var out []string
	for _, c := range cs {
		m := c.(map[string]any)
		s := m["image"].(string)
		env, _ := m["env"].([]any)
		for _, e := range env {
			em := e.(map[string]any)
			s += " " + em["name"].(string) + "=" + em["value"].(string)
		}
		out = append(out, s)
	}
	return out, true, nil
}

// TestKubeCDConfig: a config's kubecd block over a two-environment
// repository (the fleet lists one of the clusters): clusters, waves in
// environment order, one application per release and namespace, the
// template's fields on each.
func TestKubeCDConfig(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	for p, content := range map[string]string{
		"kubeconfig":     "apiVersion: v1\nkind: Config\n",
		"repo/.git/HEAD": "ref: refs/heads/main\n",
		"repo/kubecd/environments.yaml": "environments:\n" +
			"  - {name: staging, clusterName: c1, kubeNamespace: apps, releasesFiles: [releases.yaml]}\n" +
			"  - {name: prod, clusterName: c2, kubeNamespace: apps, releasesFiles: [releases.yaml, prod.yaml]}\n" +
			"clusters:\n  - {name: c1, provider: {existingContext: {contextName: kind-c1}}}\n  - {name: c2, provider: {existingContext: {contextName: kind-c2}}}\n",
		"repo/kubecd/releases.yaml": "releases:\n  - {name: api, chart: {dir: charts/api}}\n",
		"repo/kubecd/prod.yaml":     "releases:\n  - {name: cache, chart: {reference: \"oci://127.0.0.1:5000/charts/redis\", version: 1.0.0}}\n",
	} {
		writeFile(t, filepath.Join(dir, p), content)
	}
	cfg := `receivers:
  - {name: github, type: github, secret: {env: KUBECD_TEST_SECRET}}
  - {name: flagger, type: flagger, secret: {env: KUBECD_TEST_SECRET}}
fleet:
  clusters:
    - {name: c1, kubeconfig: kubeconfig}
kubecd:
  dir: repo/kubecd
  kubeconfig: kubeconfig
  application:
    service: {port: 9898}
    source:
      git: {url: "https://git.example.com/deployments.git", branch: live}
`
	t.Setenv("KUBECD_TEST_SECRET", "s")
	c, err := Parse([]byte(cfg), dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{
		"cluster c1 context=",
		"cluster c2 context=kind-c2",
		"wave staging: c1",
		"wave prod: c2",
		"app api ns=apps workload=api render=kubecd port=9898 in c1(staging) c2(prod)",
		"app cache ns=apps workload=cache render=kubecd port=9898 in c2(prod)",
	}, kubecdSummary(c)); d != "" {
		t.Errorf("config (-want +got):\n%s", d)
	}
	g := c.Applications[0].Git()
	if g.URL != "https://git.example.com/deployments.git" || g.Branch != "live" {
		t.Errorf("source %s %s, want the template's", g.URL, g.Branch)
	}
	if c.Fleet.Clusters[1].Kubeconfig != kc {
		t.Errorf("c2's kubeconfig %s, want %s", c.Fleet.Clusters[1].Kubeconfig, kc)
	}
	if d := cmp.Diff([]string{"kubecd/charts/api", "kubecd/environments.yaml", "kubecd/prod.yaml", "kubecd/releases.yaml"}, g.TrackedPaths("c2")); d != "" {
		t.Errorf("tracked in c2 (-want +got):\n%s", d)
	}
	if got := c.Applications[1].Git().TrackedPaths("c1"); got != nil {
		t.Errorf("cache tracks %v in c1, where it is not", got)
	}
}

// TestKubeCDRefused: what the files give cannot be set in the template,
// and render kubecd cannot be set by hand; each problem names its field.
func TestKubeCDRefused(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "kubeconfig"), "apiVersion: v1\nkind: Config\n")
	writeFile(t, filepath.Join(dir, "k", "environments.yaml"), "environments:\n  - {name: e, provider: {minikube: {}}, releases: [r.yaml]}\n")
	writeFile(t, filepath.Join(dir, "k", "r.yaml"), "releases:\n  - {name: r, chart: {dir: c}, values: [{key: x, valueFrom: {gceResource: {}}}]}\n")
	for _, tc := range []struct {
		name, cfg string
		want      []string
	}{{
		name: "template fields the files give",
		cfg: `kubecd:
  dir: k
  kubeconfig: kubeconfig
  application:
    name: x
    image: registry.example.com/x
    namespace: y
    workload: {name: z}
    clusterSelector: {matchLabels: {a: b}}
    source: {git: {paths: [p], render: helm, helm: {chart: c}}}
`,
		want: []string{
			"kubecd.application.name: given by KubeCD's files: leave it out",
			"kubecd.application.image: given by KubeCD's files: leave it out",
			"kubecd.application.namespace: given by KubeCD's files: leave it out",
			"kubecd.application.workload.name: given by KubeCD's files: leave it out",
			"kubecd.application.clusterSelector: given by KubeCD's files: leave it out",
			"kubecd.application.source.git.paths: given by KubeCD's files: leave it out",
			"kubecd.application.source.git.render: given by KubeCD's files: leave it out",
			"kubecd.application.source.git.helm: given by KubeCD's files: leave it out",
			"kubecd: r.yaml: release r.values[0].valueFrom: refused: flotilla reads no cloud resource; set value",
		},
	}, {
		name: "a field of the files",
		cfg:  "kubecd: {dir: k, kubeconfig: kubeconfig}\n",
		want: []string{"kubecd: r.yaml: release r.values[0].valueFrom: refused: flotilla reads no cloud resource; set value"},
	}, {
		name: "no dir",
		cfg:  "kubecd: {kubeconfig: kubeconfig}\n",
		want: []string{"kubecd.dir: required: the checkout holding environments.yaml"},
	}, {
		name: "render kubecd by hand",
		cfg: `fleet:
  clusters: [{name: c1, kubeconfig: kubeconfig}]
  waves: [{clusters: [c1]}]
applications:
  - name: a
    source: {git: {url: "https://git.example.com/d.git", render: kubecd}}
    workload: {name: a}
    service: {port: 80}
`,
		want: []string{"applications[0].source.git.render: render kubecd is what kubecd: makes of KubeCD's files; use kubecd.dir"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.cfg), dir)
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("got %v, want a validation error", err)
			}
			var got []string
			for _, p := range verr.Problems {
				if strings.HasPrefix(p.Path, "kubecd") || strings.Contains(p.Message, "kubecd") {
					got = append(got, p.String())
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("problems (-want +got):\n%s\nall: %v", d, verr.Problems)
			}
		})
	}
}

// TestKubeCDTriggers: each image trigger is resolved against the
// release's values when flotilla starts (the repository it tracks, the tag
// it runs); a trigger flotilla cannot act on is refused by name: one
// whose repository the values do not give, one with nowhere to commit.
func TestKubeCDTriggers(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "kubeconfig"), "apiVersion: v1\nkind: Config\n")
	writeFile(t, filepath.Join(dir, "k", "environments.yaml"), "environments:\n  - {name: e, provider: {minikube: {}}, releases: [r.yaml]}\n")
	writeFile(t, filepath.Join(dir, "k", "c", "values.yaml"), "image: {repository: nginx, tag: \"1.25\"}\n")
	writeFile(t, filepath.Join(dir, "k", "r.yaml"), "releases:\n  - {name: web, chart: {dir: c}, triggers: [{image: {track: MinorVersion}}]}\n")
	writeFile(t, filepath.Join(dir, "bad", "environments.yaml"), "environments:\n  - {name: e, provider: {minikube: {}}, releases: [r.yaml]}\n")
	writeFile(t, filepath.Join(dir, "bad", "r.yaml"), "releases:\n  - {name: web, chart: {dir: c}, triggers: [{image: {track: Newest, repoValue: app.image}}]}\n")
	const url = "  application:\n    source: {git: {url: \"https://git.example.com/d.git\"}}\n"

	t.Setenv("KUBECD_TEST_SECRET", "s")
	const receivers = "receivers:\n  - {name: github, type: github, secret: {env: KUBECD_TEST_SECRET}}\n  - {name: flagger, type: flagger, secret: {env: KUBECD_TEST_SECRET}}\n"
	c, err := Parse([]byte(receivers+"kubecd:\n  dir: k\n  kubeconfig: kubeconfig\n"+url), dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{
		"release web of environment e: trigger 0 tracks nginx (track MinorVersion, now 1.25): a push of a tag the track accepts is committed to image.tag of web in r.yaml",
	}, c.KubeCDNotices()); d != "" {
		t.Errorf("notices (-want +got):\n%s", d)
	}
	var names []string
	for _, a := range c.KubeCDTriggered("index.docker.io/library/nginx") {
		names = append(names, a.Name)
	}
	if d := cmp.Diff([]string{"web"}, names); d != "" {
		t.Errorf("KubeCDTriggered (-want +got):\n%s", d)
	}
	if got := c.KubeCDTriggered("registry.example.com/nginx"); got != nil {
		t.Errorf("KubeCDTriggered(another repository) = %v", got)
	}

	for _, tc := range []struct {
		name, cfg string
		want      []string
	}{{
		name: "nowhere to commit",
		cfg:  receivers + "kubecd: {dir: k, kubeconfig: kubeconfig}\n",
		want: []string{"kubecd.application.source.git.url: required: release web has image triggers, and flotilla commits their new tags there (kubecd.dir is a checkout flotilla only reads)"},
	}, {
		name: "no repository in the values",
		cfg:  receivers + "kubecd:\n  dir: bad\n  kubeconfig: kubeconfig\n" + url,
		want: []string{`kubecd: r.yaml: release web of environment e: triggers[0].image.repoValue: "app.image" has no value in the release's values (the chart's values.yaml, the environment's defaults, valuesFile and values): set it, flotilla must know which image the trigger tracks`},
	}, {
		// A config check that passed this would start a flotilla whose
		// triggers never fire, and nothing would say so.
		name: "no receiver reports image pushes",
		cfg: "receivers:\n  - {name: gitea, type: gitea, secret: {env: KUBECD_TEST_SECRET}}\n  - {name: flagger, type: flagger, secret: {env: KUBECD_TEST_SECRET}}\n" +
			"kubecd:\n  dir: k\n  kubeconfig: kubeconfig\n" + url,
		want: []string{"receivers: release web of environment e: trigger 0 tracks nginx, but no receiver reports image pushes, so it would never fire (flotilla does not poll for triggers): add a receiver of one of the types dockerhub, harbor, distribution, quay, acr, gar, ecr, artifactory, nexus, github, cloudevents"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.cfg), dir)
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("got %v, want a validation error", err)
			}
			var got []string
			for _, p := range verr.Problems {
				if strings.HasPrefix(p.Path, "kubecd") || p.Path == "receivers" {
					got = append(got, p.String())
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("problems (-want +got):\n%s\nall: %v", d, verr.Problems)
			}
		})
	}
}
