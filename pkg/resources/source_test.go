package resources

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/reload"
	"github.com/flotilla-cd/flotilla/pkg/resources/v1alpha1"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

const fileDoc = `
server: {resources: {namespaces: [team-a, team-b]}}
receivers:
  - {name: canaries, type: flagger, secret: {env: FLOTILLA_TEST_TOKEN}}
fleet:
  clusters: [{name: c1, kubeconfig: c1.kubeconfig, labels: {tier: prod}}]
  waves: [{clusters: [c1]}]
applications:
  - {name: shop, image: registry.example.com/shop, workload: {name: shop}, service: {port: 80}}
`

// resource is an Application resource of namespace ns, made at the
// created-th second, with spec.
func resource(ns, name string, generation int64, created int, spec map[string]any) *unstructured.Unstructured {
	return object("Application", ns, name, generation, created, spec)
}

// object is a resource of kind (flotilla.dev/v1alpha1) of namespace ns,
// made at the created-th second, with spec.
func object(kind, ns, name string, generation int64, created int, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": kind,
		"spec": spec,
	}}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetGeneration(generation)
	u.SetCreationTimestamp(metav1.NewTime(time.Unix(int64(created), 0)))
	return u
}

func spec(image string, extra ...any) map[string]any {
	s := map[string]any{"image": image, "workload": map[string]any{"name": "web"}, "service": map[string]any{"port": int64(8080)}}
	for i := 0; i+1 < len(extra); i += 2 {
		s[extra[i].(string)] = extra[i+1]
	}
	return s
}

// fixture is a Source over a fake API server's Applications and a file.
type fixture struct {
	src    *Source
	client *dynamicfake.FakeDynamicClient
	path   string
	live   *config.Live
	r      *reload.Reloader
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureOf(t, fileDoc, nil, objs...)
}

// newFixtureOf is newFixture of the file doc, honouring the Cluster
// resources of the platform namespaces.
func newFixtureOf(t *testing.T, doc string, platform []string, objs ...runtime.Object) *fixture {
	t.Helper()
	t.Setenv("FLOTILLA_TEST_TOKEN", "token")
	dir := t.TempDir()
	for name, content := range map[string]string{"c1.kubeconfig": "apiVersion: v1\nkind: Config\n", "config.yaml": doc} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "config.yaml")
	first, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1alpha1.Applications: "ApplicationList", v1alpha1.Clusters: "ClusterList", v1alpha1.WavePolicies: "WavePolicyList", secrets: "SecretList"}, objs...)
	live := config.NewLive(first)
	src := New(Options{Client: client, Namespaces: []string{"team-a", "team-b"}, PlatformNamespaces: platform, Path: path, Live: live})
	r, err := reload.New(live, reload.Options{Load: src.Build})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Start(t.Context(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return &fixture{src: src, client: client, path: path, live: live, r: r}
}

// apps names the applications in force.
func (f *fixture) apps() []string {
	var out []string
	for _, a := range f.live.Current().Applications {
		out = append(out, a.Name)
	}
	return out
}

// verdicts is each resource's verdict as "reason: message".
// checkVerdicts checks that the verdicts are want's, each by its prefix.
func (f *fixture) checkVerdicts(t *testing.T, want map[string]string) {
	t.Helper()
	got := f.verdicts()
	for k, w := range want {
		if !strings.HasPrefix(got[k], w) {
			t.Errorf("verdict of %s = %q, want %q...", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("verdicts %v, want %d", got, len(want))
	}
}

func (f *fixture) verdicts() map[string]string {
	f.src.mu.Lock()
	defer f.src.mu.Unlock()
	out := map[string]string{}
	for k, v := range f.src.verdicts {
		name := k.namespace + "/" + k.name // an Application's
		if k.kind != kindApplication {
			name = k.String()
		}
		out[name] = v.reason + ": " + v.message
	}
	return out
}

// TestBuild: the resources' applications join the file's, each validated
// with them; a resource the validator (or the decoding, or the secrets'
// rule) refuses is left out with its reason, the others go on.
func TestBuild(t *testing.T) {
	tests := []struct {
		name     string
		objs     []runtime.Object
		apps     []string
		verdicts map[string]string // reason, and a part of the message
	}{
		{name: "valid", objs: []runtime.Object{resource("team-a", "web", 1, 1, spec("registry.example.com/web"))},
			apps: []string{"shop", "web"}, verdicts: map[string]string{"team-a/web": "Applied: "}},
		{name: "invalid: the validator's problem, at the resource's path",
			objs: []runtime.Object{
				resource("team-a", "web", 1, 1, spec("registry.example.com/web", "clusterSelector", map[string]any{"matchLabels": map[string]any{"tier": "nowhere"}})),
				resource("team-b", "api", 1, 2, spec("registry.example.com/api")),
			},
			apps: []string{"shop", "api"},
			verdicts: map[string]string{"team-a/web": "Invalid: spec.clusterSelector: application \"web\" selects no cluster",
				"team-b/api": "Applied: "}},
		{name: "the file's name", objs: []runtime.Object{resource("team-a", "shop", 1, 1, spec("registry.example.com/other"))},
			apps: []string{"shop"}, verdicts: map[string]string{"team-a/shop": "NameConflict: metadata.name: duplicate application name \"shop\""}},
		{name: "an older resource's name",
			objs: []runtime.Object{
				resource("team-b", "web", 1, 2, spec("registry.example.com/web-b")),
				resource("team-a", "web", 1, 1, spec("registry.example.com/web-a")),
			},
			apps: []string{"shop", "web"},
			verdicts: map[string]string{"team-a/web": "Applied: ",
				"team-b/web": "NameConflict: the application name \"web\" is taken by the older Application team-a/web"}},
		{name: "flotilla's own secret borrowed",
			objs: []runtime.Object{resource("team-a", "web", 1, 1, spec("registry.example.com/web",
				"gitops", map[string]any{"url": "https://git.example.com/deploy.git", "paths": []any{"web.yaml"}, "token": map[string]any{"env": "FLOTILLA_TEST_TOKEN"}}))},
			apps: []string{"shop"}, verdicts: map[string]string{"team-a/web": "Invalid: [spec.gitops.token]: name secrets of flotilla's own process"}},
		{name: "an unknown field", objs: []runtime.Object{resource("team-a", "web", 1, 1, spec("registry.example.com/web", "verify", map[string]any{}))},
			apps: []string{"shop"}, verdicts: map[string]string{"team-a/web": "Invalid: spec: json: unknown field \"verify\""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.objs...)
			if res := f.src.Sync(t.Context(), f.r, true); res.Outcome != reload.Applied {
				t.Fatalf("Sync = %+v", res)
			}
			if diff := cmp.Diff(tc.apps, f.apps()); diff != "" {
				t.Errorf("applications in force (-want +got):\n%s", diff)
			}
			f.checkVerdicts(t, tc.verdicts)
		})
	}
}

// TestBuildKeepsAcceptedGeneration: an edit the validator refuses leaves
// the generation accepted before in force (as a refused edit of the file
// leaves the file's running configuration); a delete removes it; the
// file's own reloads keep the resources' applications.
func TestBuildKeepsAcceptedGeneration(t *testing.T) {
	f := newFixture(t, resource("team-a", "web", 1, 1, spec("registry.example.com/web")))
	ctx := t.Context()
	f.src.Sync(ctx, f.r, true)
	res := f.client.Resource(v1alpha1.Applications).Namespace("team-a")
	edit := func(gen int64, s map[string]any) {
		t.Helper()
		u, err := res.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u.Object["spec"] = s
		u.SetGeneration(gen)
		if _, err := res.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool {
			return f.src.states()[key{kindApplication, "team-a", "web"}] == strconv.FormatInt(gen, 10)
		})
	}
	edit(2, spec("registry.example.com/web", "semver", "not a constraint"))
	if out := f.src.Sync(ctx, f.r, false); out.Outcome != reload.Applied {
		t.Fatalf("Sync = %+v", out)
	}
	web, ok := f.live.Current().Application("web")
	if !ok || web.Semver != "" {
		t.Errorf("in force after a refused edit: %+v (present %v), want generation 1's", web, ok)
	}
	if v := f.verdicts()["team-a/web"]; !strings.HasPrefix(v, "Invalid: spec.semver") {
		t.Errorf("verdict %q, want Invalid naming spec.semver", v)
	}
	f.src.mu.Lock()
	fallback := f.src.verdicts[key{kindApplication, "team-a", "web"}].fallback
	f.src.mu.Unlock()
	if !fallback {
		t.Error("the verdict does not say generation 1 stays in force")
	}

	// The file's reload: web stays.
	if out := f.r.Reload(ctx, "test", func() (*config.Config, error) { return f.src.Build(f.path) }); out.Outcome != reload.Applied {
		t.Fatalf("the file's reload = %+v", out)
	}
	if diff := cmp.Diff([]string{"shop", "web"}, f.apps()); diff != "" {
		t.Errorf("after the file's reload (-want +got):\n%s", diff)
	}

	if err := res.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(f.src.list()) == 0 })
	f.src.Sync(ctx, f.r, false)
	if diff := cmp.Diff([]string{"shop"}, f.apps()); diff != "" {
		t.Errorf("after the delete (-want +got):\n%s", diff)
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("the informer never saw the change")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSpecFields: the spec has every field of the file's application
// (same JSON name, same type) but the name, verify and Kurator's aliases.
func TestSpecFields(t *testing.T) {
	skip := map[string]bool{"name": true, "verify": true, "dependsOn": true, "serviceName": true, "port": true, "rolloutPolicy": true, "testLoader": true, "trafficRoutingProvider": true}
	specFields := map[string]reflect.Type{}
	st := reflect.TypeFor[v1alpha1.ApplicationSpec]()
	for i := range st.NumField() {
		name, _, _ := strings.Cut(st.Field(i).Tag.Get("json"), ",")
		specFields[name] = st.Field(i).Type
	}
	at := reflect.TypeFor[config.Application]()
	want := 0
	for i := range at.NumField() {
		f := at.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if skip[name] || name == "-" {
			continue
		}
		want++
		if got, ok := specFields[name]; !ok {
			t.Errorf("the spec has no field %s (config.Application.%s)", name, f.Name)
		} else if got != f.Type {
			t.Errorf("spec.%s is a %s, the file's a %s", name, got, f.Type)
		}
	}
	if len(specFields) != want {
		t.Errorf("the spec has %d fields, the file's application %d (less the name, verify and Kurator's aliases)", len(specFields), want)
	}
}

// TestStatus: the status a resource's verdict and the state make.
func TestStatus(t *testing.T) {
	cfg := &config.Config{Applications: []config.Application{{Name: "web", Image: "registry.example.com/web"}}}
	other := &config.Config{Applications: []config.Application{{Name: "web", Image: "registry.example.com/web2"}}}
	tests := []struct {
		name      string
		v         verdict
		cur, blt  *config.Config
		refusal   string
		wantReady metav1.ConditionStatus
		reason    string
		deployed  bool
	}{
		{name: "in force", v: verdict{generation: 3, name: "web", reason: v1alpha1.ReasonApplied}, cur: cfg, blt: cfg,
			wantReady: metav1.ConditionTrue, reason: v1alpha1.ReasonApplied, deployed: true},
		{name: "built, the swap refused it", v: verdict{generation: 3, name: "web", reason: v1alpha1.ReasonApplied}, cur: other, blt: cfg,
			refusal: "removed while in flight", wantReady: metav1.ConditionFalse, reason: v1alpha1.ReasonNotApplied},
		{name: "invalid, the earlier generation in force", v: verdict{generation: 3, name: "web", reason: v1alpha1.ReasonInvalid, message: "spec.semver: bad", fallback: true},
			cur: cfg, blt: cfg, wantReady: metav1.ConditionFalse, reason: v1alpha1.ReasonInvalid, deployed: true},
		{name: "a name conflict", v: verdict{generation: 3, name: "web", reason: v1alpha1.ReasonNameConflict, message: "taken"},
			cur: cfg, blt: cfg, wantReady: metav1.ConditionFalse, reason: v1alpha1.ReasonNameConflict},
	}
	o := StatusOptions{Apps: stateOf{}, Rollouts: stateOf{}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := desired(t.Context(), o, v1alpha1.ApplicationStatus{}, tc.v, tc.cur, tc.blt, tc.refusal)
			if err != nil {
				t.Fatal(err)
			}
			if got.ObservedGeneration != 3 || len(got.Conditions) != 1 {
				t.Fatalf("status %+v", got)
			}
			c := got.Conditions[0]
			if c.Status != tc.wantReady || c.Reason != tc.reason || c.ObservedGeneration != 3 {
				t.Errorf("Ready %s %s (generation %d), want %s %s", c.Status, c.Reason, c.ObservedGeneration, tc.wantReady, tc.reason)
			}
			if tc.refusal != "" && c.Message != tc.refusal {
				t.Errorf("message %q, want the refusal", c.Message)
			}
			if (got.Deployed != nil) != tc.deployed {
				t.Errorf("deployed %+v, want it shown: %v", got.Deployed, tc.deployed)
			}
			if tc.deployed && (got.Rollout == nil || got.Rollout.Phase != "Progressing" || got.Rollout.Wave != "1/2 canary" || got.Rollout.Clusters != "1/3") {
				t.Errorf("rollout %+v", got.Rollout)
			}
		})
	}
}

// stateOf is an application's state with a deployed version and a
// rollout in flight.
type stateOf struct{}

func (stateOf) App(_ context.Context, name string) (rollout.AppState, error) {
	return rollout.AppState{Name: name, DeployedTag: "1.0.0", DeployedDigest: "sha256:aa", DeployedRollout: "r0",
		LatestTag: "1.1.0", LatestRollout: "r1", LastSeen: &rollout.Seen{Tag: "1.1.0", Source: "webhook", At: time.Unix(100, 0)}}, nil
}

func (stateOf) Get(_ context.Context, id string) (rollout.Rollout, error) {
	return rollout.Rollout{ID: id, Tag: "1.1.0", Phase: rollout.Progressing, Waves: []rollout.Wave{
		{Name: "canary", Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterSucceeded}}},
		{Name: "prod", Clusters: []rollout.Cluster{{Name: "c2"}, {Name: "c3"}}},
	}}, nil
}

// TestBuildWithDiscoveredClusters: the clusters fleet.discovery finds join
// every Build (the resources' and the file's reloads alike), so an
// Application may select a discovered cluster.
func TestBuildWithDiscoveredClusters(t *testing.T) {
	f := newFixture(t, resource("team-a", "web", 1, 1, spec("registry.example.com/web",
		"clusterSelector", map[string]any{"matchLabels": map[string]any{"tier": "edge"}})))
	f.src.o.Clusters = func() []config.Cluster {
		return []config.Cluster{{Name: "edge-1", Labels: map[string]string{"tier": "edge"},
			Source: "fleet.discovery.argocd: Secret argocd/edge-1", KubeconfigData: []byte("apiVersion: v1\nkind: Config\n")}}
	}
	if res := f.src.Sync(t.Context(), f.r, true); res.Outcome != reload.Applied {
		t.Fatalf("Sync = %+v", res)
	}
	if diff := cmp.Diff([]string{"shop", "web"}, f.apps()); diff != "" {
		t.Errorf("applications in force (-want +got):\n%s", diff)
	}
	if _, ok := f.live.Current().Cluster("edge-1"); !ok {
		t.Error("the discovered cluster is not in the configuration in force")
	}
	if got := f.verdicts()["team-a/web"]; got != "Applied: " {
		t.Errorf("verdict of team-a/web = %q, want Applied", got)
	}
}

// TestBuildProjectConflict: an Application another team's project lists
// by name is refused, saying so at its metadata.namespace; one of its own
// project's namespace is that project's.
func TestBuildProjectConflict(t *testing.T) {
	doc := fileDoc + `
projects:
  - {name: a, namespaces: [team-a]}
  - {name: b, applications: [web], namespaces: [team-b]}
`
	f := newFixtureOf(t, doc, nil, resource("team-a", "web", 1, 1, spec("registry.example.com/web")),
		resource("team-a", "api", 1, 2, spec("registry.example.com/api")))
	if res := f.src.Sync(t.Context(), f.r, true); res.Outcome != reload.Applied {
		t.Fatalf("Sync = %+v", res)
	}
	if diff := cmp.Diff([]string{"shop", "api"}, f.apps()); diff != "" {
		t.Errorf("applications in force (-want +got):\n%s", diff)
	}
	want := `ProjectConflict: metadata.namespace: project conflict: project "b" lists the application "web" (projects[1].applications), but its namespace team-a is project "a"'s`
	if got := f.verdicts()["team-a/web"]; !strings.HasPrefix(got, want) {
		t.Errorf("verdict of team-a/web = %q, want %q...", got, want)
	}
	if got := f.live.Current().ProjectOf("api"); got != "a" {
		t.Errorf("api's project = %q, want a (its namespace's)", got)
	}
}
