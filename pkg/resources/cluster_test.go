package resources

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/reload"
	"github.com/flotilla-cd/flotilla/pkg/resources/v1alpha1"
)

// kubeconfig has two contexts, a (current) and b, each naming a cluster.
const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- {name: a, cluster: {server: "https://a.example.com"}}
- {name: b, cluster: {server: "https://b.example.com"}}
users:
- {name: u, user: {token: t}}
contexts:
- {name: a, context: {cluster: a, user: u}}
- {name: b, context: {cluster: b, user: u}}
current-context: a
`

// clusterResource is a Cluster resource of namespace ns, made at the
// created-th second, with spec.
func clusterResource(ns, name string, generation int64, created int, spec map[string]any) *unstructured.Unstructured {
	return object("Cluster", ns, name, generation, created, spec)
}

// clusterSpec is a spec labelled tier=label, its kubeconfig the Secret
// secret's key value, extra's fields added.
func clusterSpec(tier, secret string, extra ...any) map[string]any {
	s := map[string]any{"labels": map[string]any{"tier": tier},
		"kubeconfig": map[string]any{"secretRef": map[string]any{"name": secret}}}
	for i := 0; i+1 < len(extra); i += 2 {
		s[extra[i].(string)] = extra[i+1]
	}
	return s
}

// secretObj is a Secret with data (the dynamic client's form).
func secretObj(ns, name string, data map[string]string) *unstructured.Unstructured {
	d := map[string]any{}
	for k, v := range data {
		d[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "data": d}}
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// TestConvertCluster: a Cluster resource's cluster, its kubeconfig from
// its Secret (the default key value, or the one named), switched to
// spec.context; what is no cluster says why, naming the field.
func TestConvertCluster(t *testing.T) {
	secrets := map[string]map[string]string{
		"kc":    {"value": kubeconfig, "other": kubeconfig},
		"empty": {},
		"junk":  {"value": "clusters: 3"},
	}
	read := func(ns, name, k string) ([]byte, error) {
		d, ok := secrets[name]
		if !ok || ns != "platform" {
			return nil, errors.New("no Secret " + name)
		}
		v, ok := d[k]
		if !ok {
			return nil, errors.New("no data." + k)
		}
		return []byte(v), nil
	}
	tests := []struct {
		name    string
		spec    map[string]any
		server  string // of the kubeconfig's current context
		context string
		err     string
	}{
		{name: "the default key", spec: clusterSpec("prod", "kc"), server: "https://a.example.com"},
		{name: "another key", spec: clusterSpec("prod", "kc", "kubeconfig", map[string]any{"secretRef": map[string]any{"name": "kc", "key": "other"}}),
			server: "https://a.example.com"},
		{name: "a context", spec: clusterSpec("prod", "kc", "context", "b"), server: "https://b.example.com", context: "b"},
		{name: "no such context", spec: clusterSpec("prod", "kc", "context", "c"), err: `spec.kubeconfig.secretRef: Secret kc, key value: the kubeconfig has no context "c" (spec.context)`},
		{name: "no Secret", spec: clusterSpec("prod", "missing"), err: "spec.kubeconfig.secretRef: no Secret missing"},
		{name: "no key", spec: clusterSpec("prod", "empty"), err: "spec.kubeconfig.secretRef: no data.value"},
		{name: "not a kubeconfig", spec: clusterSpec("prod", "junk"), err: "spec.kubeconfig.secretRef: Secret junk, key value: not a kubeconfig"},
		{name: "no secretRef", spec: map[string]any{"labels": map[string]any{}}, err: "spec.kubeconfig.secretRef.name: required"},
		{name: "an unknown field", spec: clusterSpec("prod", "kc", "server", "https://x"), err: `spec: json: unknown field "server"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ConvertCluster(clusterResource("platform", "edge-1", 1, 1, tc.spec), read)
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("ConvertCluster = %v, want %q...", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := config.Cluster{Name: "edge-1", Labels: map[string]string{"tier": "prod"}, Context: tc.context,
				Source: "server.resources: Cluster platform/edge-1"}
			kc := c.KubeconfigData
			c.KubeconfigData = nil
			if diff := cmp.Diff(want, c); diff != "" {
				t.Errorf("cluster (-want +got):\n%s", diff)
			}
			cfg, err := clientcmd.Load(kc)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster].Server; got != tc.server {
				t.Errorf("the kubeconfig reaches %s, want %s", got, tc.server)
			}
		})
	}
}

// clustersDoc's wave prod selects the clusters labelled tier=prod.
const clustersDoc = `
server: {resources: {namespaces: [team-a, team-b], platformNamespaces: [platform]}}
receivers:
  - {name: canaries, type: flagger, secret: {env: FLOTILLA_TEST_TOKEN}}
fleet:
  clusters: [{name: c1, kubeconfig: c1.kubeconfig, labels: {tier: canary}}]
  waves:
    - {name: canary, clusters: [c1]}
    - {name: prod, selector: {matchLabels: {tier: prod}}}
applications:
  - {name: shop, image: registry.example.com/shop, workload: {name: shop}, service: {port: 80}}
`

// waves names each wave's clusters in force.
func (f *fixture) waves() map[string][]string {
	out := map[string][]string{}
	for _, w := range f.live.Current().Fleet.Waves {
		out[w.Name] = w.ClusterNames()
	}
	return out
}

// TestBuildClusters: the Cluster resources of the platform's namespaces
// join the file's clusters and the waves their labels select; one of a
// team's namespace, one the validator refuses, one without its Secret,
// one with the name of the file's cluster or of an older resource is left
// out, saying why, and the others go on.
func TestBuildClusters(t *testing.T) {
	kc := map[string]string{"value": kubeconfig}
	tests := []struct {
		name     string
		objs     []runtime.Object
		waves    map[string][]string
		verdicts map[string]string // reason, and a part of the message
	}{
		{name: "valid", objs: []runtime.Object{secretObj("platform", "edge-1-kc", kc), clusterResource("platform", "edge-1", 1, 1, clusterSpec("prod", "edge-1-kc"))},
			waves: map[string][]string{"canary": {"c1"}, "prod": {"edge-1"}}, verdicts: map[string]string{"Cluster platform/edge-1": "Applied: "}},
		{name: "in a team's namespace",
			objs: []runtime.Object{
				secretObj("team-a", "edge-2-kc", kc), clusterResource("team-a", "edge-2", 1, 1, clusterSpec("prod", "edge-2-kc")),
				secretObj("platform", "edge-1-kc", kc), clusterResource("platform", "edge-1", 1, 2, clusterSpec("prod", "edge-1-kc")),
			},
			waves: map[string][]string{"canary": {"c1"}, "prod": {"edge-1"}},
			verdicts: map[string]string{"Cluster team-a/edge-2": "NotPlatformNamespace: a Cluster is honoured only in the platform's namespaces (server.resources.platformNamespaces: platform, platform2), not in team-a: it changes nothing",
				"Cluster platform/edge-1": "Applied: "}},
		{name: "the validator's problem, at the resource's path",
			objs: []runtime.Object{
				secretObj("platform", "kc", kc),
				clusterResource("platform", "edge-1", 1, 1, clusterSpec("prod", "kc", "labels", map[string]any{"tier": "not a value"})),
				clusterResource("platform", "edge-2", 1, 2, clusterSpec("prod", "kc")),
			},
			waves: map[string][]string{"canary": {"c1"}, "prod": {"edge-2"}},
			verdicts: map[string]string{"Cluster platform/edge-1": "Invalid: spec.labels[\"tier\"]: invalid label value \"not a value\"",
				"Cluster platform/edge-2": "Applied: "}},
		{name: "no Secret", objs: []runtime.Object{clusterResource("platform", "edge-1", 1, 1, clusterSpec("prod", "edge-1-kc"))},
			waves:    map[string][]string{"canary": {"c1"}, "prod": nil},
			verdicts: map[string]string{"Cluster platform/edge-1": "Invalid: spec.kubeconfig.secretRef: no Secret edge-1-kc in namespace platform"}},
		{name: "the file's name", objs: []runtime.Object{secretObj("platform", "kc", kc), clusterResource("platform", "c1", 1, 1, clusterSpec("prod", "kc"))},
			waves:    map[string][]string{"canary": {"c1"}, "prod": nil},
			verdicts: map[string]string{"Cluster platform/c1": "NameConflict: metadata.name: duplicate cluster name \"c1\""}},
		{name: "an older resource's name",
			objs: []runtime.Object{
				secretObj("platform", "kc", kc), secretObj("platform2", "kc", kc),
				clusterResource("platform2", "edge-1", 1, 2, clusterSpec("prod", "kc")),
				clusterResource("platform", "edge-1", 1, 1, clusterSpec("prod", "kc")),
			},
			waves: map[string][]string{"canary": {"c1"}, "prod": {"edge-1"}},
			verdicts: map[string]string{"Cluster platform/edge-1": "Applied: ",
				"Cluster platform2/edge-1": "NameConflict: the cluster name \"edge-1\" is taken by the older Cluster platform/edge-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixtureOf(t, clustersDoc, []string{"platform", "platform2"}, tc.objs...)
			if res := f.src.Sync(t.Context(), f.r, true); res.Outcome != reload.Applied {
				t.Fatalf("Sync = %+v", res)
			}
			if diff := cmp.Diff(tc.waves, f.waves()); diff != "" {
				t.Errorf("waves in force (-want +got):\n%s", diff)
			}
			f.checkVerdicts(t, tc.verdicts)
		})
	}
}

// TestClustersFollowed: a Cluster whose Secret comes later enters then
// (the Secret's change is one), relabelled it moves, its Secret deleted
// the cluster accepted before stays (saying why), the resource deleted it
// leaves; the file's reloads keep the resources' clusters.
func TestClustersFollowed(t *testing.T) {
	f := newFixtureOf(t, clustersDoc, []string{"platform"}, clusterResource("platform", "edge-1", 1, 1, clusterSpec("prod", "kc")))
	ctx := t.Context()
	f.src.Sync(ctx, f.r, false)
	if v := f.verdicts()["Cluster platform/edge-1"]; !strings.HasPrefix(v, "Invalid: spec.kubeconfig.secretRef: no Secret kc") {
		t.Fatalf("verdict before its Secret %q", v)
	}
	secrets := f.client.Resource(secrets).Namespace("platform")
	if _, err := secrets.Create(ctx, secretObj("platform", "kc", map[string]string{"value": kubeconfig}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, ok := f.src.secret("platform", "kc"); return ok })
	f.src.Sync(ctx, f.r, false)
	if diff := cmp.Diff(map[string][]string{"canary": {"c1"}, "prod": {"edge-1"}}, f.waves()); diff != "" {
		t.Errorf("once its Secret is written (-want +got):\n%s", diff)
	}

	clusters := f.client.Resource(v1alpha1.Clusters).Namespace("platform")
	u, err := clusters.Get(ctx, "edge-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.Object["spec"] = clusterSpec("canary", "kc")
	u.SetGeneration(2)
	if _, err := clusters.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return f.src.states()[key{kindCluster, "platform", "edge-1"}] != "1/" })
	f.src.Sync(ctx, f.r, false)
	if diff := cmp.Diff(map[string][]string{"canary": {"c1"}, "prod": nil}, f.waves()); diff != "" {
		t.Errorf("relabelled tier=canary: in no wave (-want +got):\n%s", diff)
	}
	if c, ok := f.live.Current().Cluster("edge-1"); !ok || c.Labels["tier"] != "canary" {
		t.Errorf("relabelled: %+v (%v)", c, ok)
	}

	if err := secrets.Delete(ctx, "kc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, ok := f.src.secret("platform", "kc"); return !ok })
	f.src.Sync(ctx, f.r, false)
	if _, ok := f.live.Current().Cluster("edge-1"); !ok {
		t.Error("its Secret deleted, the cluster accepted before left")
	}
	f.src.mu.Lock()
	v := f.src.verdicts[key{kindCluster, "platform", "edge-1"}]
	f.src.mu.Unlock()
	if v.reason != v1alpha1.ReasonInvalid || !v.fallback {
		t.Errorf("verdict %+v, want Invalid with the generation accepted before in force", v)
	}

	if out := f.r.Reload(ctx, "test", func() (*config.Config, error) { return f.src.Build(f.path) }); out.Outcome != reload.Applied {
		t.Fatalf("the file's reload = %+v", out)
	}
	if _, ok := f.live.Current().Cluster("edge-1"); !ok {
		t.Error("the file's reload dropped the resource's cluster")
	}

	if err := clusters.Delete(ctx, "edge-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(f.src.listClusters()) == 0 })
	f.src.Sync(ctx, f.r, false)
	if _, ok := f.live.Current().Cluster("edge-1"); ok {
		t.Error("the resource deleted, its cluster stays")
	}
}

// TestClusterStatus: the status a Cluster resource's verdict makes.
func TestClusterStatus(t *testing.T) {
	src := ClusterSource("platform", "edge-1")
	cfg := &config.Config{Fleet: config.Fleet{
		Clusters: []config.Cluster{{Name: "edge-1", Source: src}},
		Waves:    []config.Wave{{Name: "prod", Members: []string{"edge-1"}}},
	}}
	noWave := &config.Config{Fleet: config.Fleet{Clusters: []config.Cluster{{Name: "edge-1", Source: src}}, Waves: []config.Wave{{Name: "prod", Members: []string{}}}}}
	file := &config.Config{Fleet: config.Fleet{Clusters: []config.Cluster{{Name: "edge-1"}}}}
	tests := []struct {
		name     string
		v        verdict
		cur, blt *config.Config
		refusal  string
		want     v1alpha1.ClusterStatus
	}{
		{name: "in force, in a wave", v: verdict{generation: 2, name: "edge-1", reason: v1alpha1.ReasonApplied}, cur: cfg, blt: cfg,
			want: status(2, "prod", metav1.ConditionTrue, v1alpha1.ReasonApplied, `in force: cluster "edge-1", in wave prod`)},
		{name: "in force, in no wave", v: verdict{generation: 2, name: "edge-1", reason: v1alpha1.ReasonApplied}, cur: noWave, blt: noWave,
			want: status(2, "", metav1.ConditionTrue, v1alpha1.ReasonApplied, `in force: cluster "edge-1", in no wave (no wave lists it or selects its labels)`)},
		{name: "built, the swap refused it", v: verdict{generation: 2, name: "edge-1", reason: v1alpha1.ReasonApplied}, cur: file, blt: cfg,
			refusal: "the configuration with it was refused: x", want: status(2, "", metav1.ConditionFalse, v1alpha1.ReasonNotApplied, "the configuration with it was refused: x")},
		{name: "invalid, the earlier generation in force", v: verdict{generation: 2, name: "edge-1", reason: v1alpha1.ReasonInvalid, message: "spec.labels: bad", fallback: true},
			cur: cfg, blt: cfg, want: status(2, "prod", metav1.ConditionFalse, v1alpha1.ReasonInvalid, "spec.labels: bad; the generation accepted before stays in force")},
		{name: "in a team's namespace", v: verdict{generation: 2, name: "edge-1", reason: v1alpha1.ReasonNotPlatformNamespace, message: "not here"},
			cur: cfg, blt: cfg, want: status(2, "", metav1.ConditionFalse, v1alpha1.ReasonNotPlatformNamespace, "not here")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := desiredCluster(v1alpha1.ClusterStatus{}, tc.v, src, tc.cur, tc.blt, tc.refusal)
			for i := range got.Conditions {
				got.Conditions[i].LastTransitionTime = metav1.Time{}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func status(gen int64, wave string, ready metav1.ConditionStatus, reason, message string) v1alpha1.ClusterStatus {
	return v1alpha1.ClusterStatus{ObservedGeneration: gen, Wave: wave, Conditions: []metav1.Condition{
		{Type: v1alpha1.ConditionReady, Status: ready, ObservedGeneration: gen, Reason: reason, Message: message}}}
}
