package resources

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/reload"
	"github.com/flotilla-cd/flotilla/pkg/resources/v1alpha1"
)

// policyResource is a WavePolicy resource of namespace ns, made at the
// created-th second, with spec.
func policyResource(ns, name string, generation int64, created int, spec map[string]any) *unstructured.Unstructured {
	return object("WavePolicy", ns, name, generation, created, spec)
}

// bySelector is a wave of the clusters labelled tier=tier.
func bySelector(name, tier string, extra ...any) map[string]any {
	w := map[string]any{"name": name, "selector": map[string]any{"matchLabels": map[string]any{"tier": tier}}}
	for i := 0; i+1 < len(extra); i += 2 {
		w[extra[i].(string)] = extra[i+1]
	}
	return w
}

// policiesDoc's fleet: c1 (canary) and c2 (prod) in one wave, all.
const policiesDoc = `
server: {resources: {namespaces: [team-a, team-b], platformNamespaces: [platform]}}
receivers:
  - {name: canaries, type: flagger, secret: {env: FLOTILLA_TEST_TOKEN}}
fleet:
  clusters:
    - {name: c1, kubeconfig: c1.kubeconfig, labels: {tier: canary}}
    - {name: c2, kubeconfig: c1.kubeconfig, labels: {tier: prod}}
  waves: [{name: all, clusters: [c1, c2]}]
  wavePolicy: {bakeTime: 1m}
applications:
  - {name: shop, image: registry.example.com/shop, workload: {name: shop}, service: {port: 80}}
`

// TestBuildWavePolicies: the oldest WavePolicy of the platform's
// namespaces that the validator takes replaces the file's waves, wave
// policy and freeze windows; a second is Conflict, one of a team's
// namespace NotPlatformNamespace, one the validator refuses Invalid at its
// spec's path (the file's waves stay), and nothing else changes.
func TestBuildWavePolicies(t *testing.T) {
	two := map[string]any{"waves": []any{bySelector("canary", "canary"), bySelector("prod", "prod")}}
	tests := []struct {
		name     string
		objs     []runtime.Object
		waves    map[string][]string
		bake     bool // the file's fleet.wavePolicy in force
		verdicts map[string]string
	}{
		{name: "none: the file's", waves: map[string][]string{"all": {"c1", "c2"}}, bake: true, verdicts: map[string]string{}},
		{name: "in force", objs: []runtime.Object{policyResource("platform", "fleet", 1, 1, two)},
			waves: map[string][]string{"canary": {"c1"}, "prod": {"c2"}}, verdicts: map[string]string{"WavePolicy platform/fleet": "Applied: "}},
		{name: "a second, younger",
			objs: []runtime.Object{
				policyResource("platform2", "other", 1, 2, map[string]any{"waves": []any{map[string]any{"name": "one", "clusters": []any{"c1", "c2"}}}}),
				policyResource("platform", "fleet", 1, 1, two),
			},
			waves: map[string][]string{"canary": {"c1"}, "prod": {"c2"}},
			verdicts: map[string]string{"WavePolicy platform/fleet": "Applied: ",
				"WavePolicy platform2/other": "Conflict: the older WavePolicy platform/fleet is in force: one WavePolicy rules the fleet"}},
		{name: "in a team's namespace", objs: []runtime.Object{policyResource("team-a", "fleet", 1, 1, two)},
			waves: map[string][]string{"all": {"c1", "c2"}}, bake: true,
			verdicts: map[string]string{"WavePolicy team-a/fleet": "NotPlatformNamespace: a WavePolicy is honoured only in the platform's namespaces"}},
		{name: "the validator's problems, at the resource's paths",
			objs: []runtime.Object{policyResource("platform", "fleet", 1, 1, map[string]any{
				"waves":      []any{bySelector("canary", "canary")},
				"wavePolicy": map[string]any{"maxParallel": "200%"},
			})},
			waves: map[string][]string{"all": {"c1", "c2"}}, bake: true,
			verdicts: map[string]string{"WavePolicy platform/fleet": `Invalid: spec.wavePolicy.maxParallel: 200% is out of range`}},
		{name: "the oldest refused, the next in force",
			objs: []runtime.Object{
				policyResource("platform", "fleet", 1, 1, map[string]any{"waves": []any{bySelector("canary", "canary")}}),
				policyResource("platform2", "other", 1, 2, two),
			},
			waves: map[string][]string{"canary": {"c1"}, "prod": {"c2"}},
			verdicts: map[string]string{"WavePolicy platform/fleet": `Invalid: spec.waves: cluster "c2" is in no wave`,
				"WavePolicy platform2/other": "Applied: "}},
		{name: "an unknown field", objs: []runtime.Object{policyResource("platform", "fleet", 1, 1, map[string]any{"waves": []any{bySelector("all", "prod")}, "clusters": []any{}})},
			waves: map[string][]string{"all": {"c1", "c2"}}, bake: true,
			verdicts: map[string]string{"WavePolicy platform/fleet": `Invalid: spec: json: unknown field "clusters"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixtureOf(t, policiesDoc, []string{"platform", "platform2"}, tc.objs...)
			if res := f.src.Sync(t.Context(), f.r, true); res.Outcome != reload.Applied {
				t.Fatalf("Sync = %+v", res)
			}
			if diff := cmp.Diff(tc.waves, f.waves()); diff != "" {
				t.Errorf("waves in force (-want +got):\n%s", diff)
			}
			if got := f.live.Current().Fleet.WavePolicy.BakeTime != nil; got != tc.bake {
				t.Errorf("the file's wave policy (bake time) in force: %v, want %v", got, tc.bake)
			}
			f.checkVerdicts(t, tc.verdicts)
		})
	}
}

// TestWavePolicyFollowed: an edit the validator refuses keeps the
// generation accepted before; deleted, the file's waves are back.
func TestWavePolicyFollowed(t *testing.T) {
	two := map[string]any{"waves": []any{bySelector("canary", "canary"), bySelector("prod", "prod")}}
	f := newFixtureOf(t, policiesDoc, []string{"platform"}, policyResource("platform", "fleet", 1, 1, two))
	ctx := t.Context()
	f.src.Sync(ctx, f.r, false)
	res := f.client.Resource(v1alpha1.WavePolicies).Namespace("platform")
	u, err := res.Get(ctx, "fleet", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.Object["spec"] = map[string]any{"waves": []any{bySelector("canary", "canary")}}
	u.SetGeneration(2)
	if _, err := res.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return f.src.states()[key{kindWavePolicy, "platform", "fleet"}] == "2" })
	f.src.Sync(ctx, f.r, false)
	if diff := cmp.Diff(map[string][]string{"canary": {"c1"}, "prod": {"c2"}}, f.waves()); diff != "" {
		t.Errorf("after a refused edit (-want +got):\n%s", diff)
	}
	f.src.mu.Lock()
	v := f.src.verdicts[key{kindWavePolicy, "platform", "fleet"}]
	f.src.mu.Unlock()
	if v.reason != v1alpha1.ReasonInvalid || !v.fallback {
		t.Errorf("verdict %+v, want Invalid with generation 1 in force", v)
	}
	st := desiredWavePolicy(v1alpha1.WavePolicyStatus{}, v, f.live.Current(), f.live.Current(), "")
	if c := st.Conditions[0]; c.Status != metav1.ConditionFalse || !strings.HasSuffix(c.Message, "; the generation accepted before stays in force") ||
		!cmp.Equal(st.Waves, []string{"canary", "prod"}) {
		t.Errorf("status %+v", st)
	}
	if err := res.Delete(ctx, "fleet", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(f.src.listPolicies()) == 0 })
	f.src.Sync(ctx, f.r, false)
	if diff := cmp.Diff(map[string][]string{"all": {"c1", "c2"}}, f.waves()); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
}

// TestWavePolicyStatus: the status a WavePolicy's verdict makes.
func TestWavePolicyStatus(t *testing.T) {
	mine := &config.Config{Fleet: config.Fleet{Waves: []config.Wave{{Name: "canary"}, {Name: "prod"}}}}
	file := &config.Config{Fleet: config.Fleet{Waves: []config.Wave{{Name: "all"}}}}
	tests := []struct {
		name     string
		v        verdict
		cur, blt *config.Config
		refusal  string
		ready    metav1.ConditionStatus
		reason   string
		message  string
		waves    []string
	}{
		{name: "in force", v: verdict{generation: 1, reason: v1alpha1.ReasonApplied}, cur: mine, blt: mine,
			ready: metav1.ConditionTrue, reason: v1alpha1.ReasonApplied, message: "in force: waves canary, prod", waves: []string{"canary", "prod"}},
		{name: "built, the swap refused it", v: verdict{generation: 1, reason: v1alpha1.ReasonApplied}, cur: file, blt: mine, refusal: "refused: x",
			ready: metav1.ConditionFalse, reason: v1alpha1.ReasonNotApplied, message: "refused: x"},
		{name: "a conflict", v: verdict{generation: 1, reason: v1alpha1.ReasonConflict, message: "older"}, cur: mine, blt: mine,
			ready: metav1.ConditionFalse, reason: v1alpha1.ReasonConflict, message: "older"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := desiredWavePolicy(v1alpha1.WavePolicyStatus{}, tc.v, tc.cur, tc.blt, tc.refusal)
			c := st.Conditions[0]
			if c.Status != tc.ready || c.Reason != tc.reason || c.Message != tc.message || !cmp.Equal(st.Waves, tc.waves) {
				t.Errorf("status %+v, want %s %s %q waves %v", st, tc.ready, tc.reason, tc.message, tc.waves)
			}
		})
	}
}
