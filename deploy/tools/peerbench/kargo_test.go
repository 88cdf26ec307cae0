package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestKargoReceiverPath(t *testing.T) {
	// Kargo's buildWebhookPath: /generic/ and the hex SHA-256 of
	// project+receiver+secret; this digest is
	// `printf kargo-peerbenchregistrys3cret | sha256sum`.
	want := "/generic/98ea425cfae645b0069a77328db806c6ce90780e0ad986527a9e0bbe9690b473"
	if got := kargoReceiverPath("kargo-peerbench", "registry", "s3cret"); got != want {
		t.Errorf("kargoReceiverPath = %q, want %q", got, want)
	}
}

func TestKargoObjects(t *testing.T) {
	reg := &registry{host: "127.0.0.1:5000"}
	flot := &subject{tool: "flotilla", ns: "flotilla-waves", repo: "peers/flotilla-waves", reg: reg}
	hook := &subject{tool: "kargo", ns: "kargo-webhook", repo: "peers/kargo-webhook", reg: reg}
	poll := &subject{tool: "kargo", ns: "kargo-poll", repo: "peers/kargo-poll", reg: &registry{host: "127.0.0.1:6000"}, poll: true}
	clusters := []string{"c1", "c2", "c3"}
	names := func(objs []*unstructured.Unstructured) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
		}
		return out
	}
	tests := []struct {
		name      string
		subs      []*subject
		want      []string
		receivers int
	}{
		{"webhook and polling", []*subject{flot, hook, poll}, []string{
			"Secret/kargo-peerbench/registry-webhook", "ProjectConfig/kargo-peerbench/kargo-peerbench",
			"Warehouse/kargo-peerbench/kargo-webhook", "Warehouse/kargo-peerbench/kargo-poll",
			"Stage/kargo-peerbench/kargo-webhook-wave-1", "Stage/kargo-peerbench/kargo-webhook-wave-2",
			"Stage/kargo-peerbench/kargo-poll-wave-1", "Stage/kargo-peerbench/kargo-poll-wave-2",
		}, 1},
		{"polling alone: no receiver", []*subject{poll}, []string{
			"ProjectConfig/kargo-peerbench/kargo-peerbench", "Warehouse/kargo-peerbench/kargo-poll",
			"Stage/kargo-peerbench/kargo-poll-wave-1", "Stage/kargo-peerbench/kargo-poll-wave-2",
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := kargoObjects(tt.subs, clusters, "http://127.0.0.1:1/deploy.git", "s3cret")
			if diff := cmp.Diff(tt.want, names(objs)); diff != "" {
				t.Errorf("kargoObjects (-want +got):\n%s", diff)
			}
			for _, o := range objs {
				if o.GetKind() != "ProjectConfig" {
					continue
				}
				rs, _, _ := unstructured.NestedSlice(o.Object, "spec", "webhookReceivers")
				if len(rs) != tt.receivers {
					t.Errorf("webhookReceivers = %v, want %d", rs, tt.receivers)
				}
				ps, _, _ := unstructured.NestedSlice(o.Object, "spec", "promotionPolicies")
				var auto []string
				for _, p := range ps {
					m := p.(map[string]any)
					if m["autoPromotionEnabled"] == true {
						auto = append(auto, m["stageSelector"].(map[string]any)["name"].(string))
					}
				}
				var stages []string
				for _, n := range tt.want {
					if s, ok := strings.CutPrefix(n, "Stage/kargo-peerbench/"); ok {
						stages = append(stages, s)
					}
				}
				if diff := cmp.Diff(stages, auto); diff != "" {
					t.Errorf("Stages auto-promoted (-want +got):\n%s", diff)
				}
			}
		})
	}

	// The webhook subject's Stages: wave 1 from the Warehouse to c1's
	// directory, wave 2 from wave 1 to c2's and c3's.
	type stage struct {
		Origin  string
		Sources map[string]any
		Steps   []string
	}
	got := map[string]stage{}
	for _, o := range kargoObjects([]*subject{hook}, clusters, "http://127.0.0.1:1/deploy.git", "s3cret") {
		if o.GetKind() != "Stage" {
			continue
		}
		rf, _, _ := unstructured.NestedSlice(o.Object, "spec", "requestedFreight")
		r := rf[0].(map[string]any)
		st := stage{Origin: r["origin"].(map[string]any)["name"].(string), Sources: r["sources"].(map[string]any)}
		steps, _, _ := unstructured.NestedSlice(o.Object, "spec", "promotionTemplate", "spec", "steps")
		for _, s := range steps {
			m := s.(map[string]any)
			step := m["uses"].(string)
			if step == "kustomize-set-image" {
				cfg := m["config"].(map[string]any)
				img := cfg["images"].([]any)[0].(map[string]any)
				step += " " + cfg["path"].(string) + " " + img["image"].(string) + ":" + img["tag"].(string)
			}
			st.Steps = append(st.Steps, step)
		}
		got[o.GetName()] = st
	}
	const img = `127.0.0.1:5000/peers/kargo-webhook:${{ imageFrom("127.0.0.1:5000/peers/kargo-webhook").Tag }}`
	want := map[string]stage{
		"kargo-webhook-wave-1": {"kargo-webhook", map[string]any{"direct": true},
			[]string{"git-clone", "kustomize-set-image ./src/kargo-webhook/c1 " + img, "git-commit", "git-push"}},
		"kargo-webhook-wave-2": {"kargo-webhook", map[string]any{"stages": []any{"kargo-webhook-wave-1"}},
			[]string{"git-clone", "kustomize-set-image ./src/kargo-webhook/c2 " + img, "kustomize-set-image ./src/kargo-webhook/c3 " + img, "git-commit", "git-push"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Stages (-want +got):\n%s", diff)
	}

	// The receiver refreshes the Warehouses subscribed to the pushed
	// repository, as the registry names it: its host and the repository.
	for _, o := range kargoObjects([]*subject{hook}, clusters, "http://127.0.0.1:1/deploy.git", "s3cret") {
		if o.GetKind() != "ProjectConfig" {
			continue
		}
		rs, _, _ := unstructured.NestedSlice(o.Object, "spec", "webhookReceivers")
		a := rs[0].(map[string]any)["generic"].(map[string]any)["actions"].([]any)[0].(map[string]any)
		crit := a["targetSelectionCriteria"].([]any)[0].(map[string]any)
		idx := crit["indexSelector"].(map[string]any)["matchIndices"].([]any)[0].(map[string]any)
		gotSel := []string{a["action"].(string), a["whenExpression"].(string), crit["kind"].(string), idx["key"].(string), idx["operator"].(string), idx["value"].(string)}
		wantSel := []string{"Refresh", `request.body.events[0].action == "push"`, "Warehouse", "subscribedURLs", "Equals",
			`${{ normalizeImage(request.body.events[0].request.host + "/" + request.body.events[0].target.repository) }}`}
		if diff := cmp.Diff(wantSel, gotSel); diff != "" {
			t.Errorf("the receiver's action (-want +got):\n%s", diff)
		}
	}
}

// TestKargoFluxObjects: a Kargo subject's namespaces get the Flux objects
// that apply the repository, none of Flux's image automation, and its
// Deployment no image policy marker.
func TestKargoFluxObjects(t *testing.T) {
	s := &subject{tool: "kargo", ns: "kargo-webhook", repo: "peers/kargo-webhook", reg: &registry{host: "127.0.0.1:5000"}}
	var got []string
	for _, o := range fluxObjects(s, "c2", "http://127.0.0.1:1/deploy.git", "tok") {
		got = append(got, o.GetKind()+"/"+o.GetName())
	}
	want := []string{"Secret/webhook-token", "GitRepository/deploy", "Kustomization/podinfo", "Receiver/git"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fluxObjects (-want +got):\n%s", diff)
	}
	dep := fluxManifests(s, "c2")["kargo-webhook/c2/deployment.yaml"]
	if !strings.Contains(dep, "image: 127.0.0.1:5000/peers/kargo-webhook:1.0.0\n") {
		t.Errorf("the Deployment's image line:\n%s", dep)
	}
}
