package render

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// summary names each object, with a ConfigMap's data and a Deployment's
// replicas and first container's image and env, so a table row shows what
// was rendered.
func summary(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		s := o.GetKind() + " " + o.GetName()
		if ns := o.GetNamespace(); ns != "" {
			s += " ns=" + ns
		}
		switch o.GetKind() {
		case "ConfigMap":
			data, _, _ := unstructured.NestedStringMap(o.Object, "data")
			var kv []string
			for k, v := range data {
				kv = append(kv, k+"="+v)
			}
			slices.Sort(kv)
			s += " " + strings.Join(kv, ",")
		case "Deployment":
			if r, ok, _ := unstructured.NestedInt64(o.Object, "spec", "replicas"); ok {
				s += fmt.Sprintf(" replicas=%d", r)
			}
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			if len(cs) > 0 {
				c := cs[0].(map[string]any)
				s += " image=" + c["image"].(string)
				if env, ok := c["env"].([]any); ok {
					for _, e := range env {
						m := e.(map[string]any)
						s += fmt.Sprintf(" %v=%v", m["name"], m["value"])
					}
				}
			}
		}
		out = append(out, s)
	}
	return out
}

func TestRender(t *testing.T) {
	repo := filepath.Join("testdata", "repo")
	chart := func(c Chart) *Chart { c.Dir = "charts/podinfo"; return &c }
	tests := []struct {
		name    string
		req     Request
		want    []string
		wantErr string // substring; "" for none
	}{
		{name: "a directory of manifests, in name order, empty documents skipped",
			req: Request{Paths: []string{"apps/podinfo"}},
			want: []string{
				"ConfigMap podinfo-config greeting=hello",
				"Deployment podinfo image=registry.example.com/podinfo:6.0.0",
			}},
		{name: "a file, and a List's items",
			req:  Request{Kind: Manifests, Paths: []string{"apps/list.yaml", "apps/podinfo/deployment.yaml"}},
			want: []string{"ConfigMap a ", "ConfigMap b ", "Deployment podinfo image=registry.example.com/podinfo:6.0.0"}},
		{name: "a kustomize overlay over a base",
			req: Request{Kind: Kustomize, Paths: []string{"kustomize/overlays/c1"}},
			want: []string{
				"Deployment c1-podinfo image=registry.example.com/podinfo:6.0.0",
				"ConfigMap c1-podinfo-config greeting=hej",
			}},
		{name: "a chart with its defaults; NOTES.txt and partials left out; a current Kubernetes",
			req: Request{Kind: Helm, Chart: chart(Chart{ReleaseName: "podinfo", Namespace: "apps"})},
			want: []string{
				"ConfigMap podinfo-config greeting=chart-default,kube=34,tag=6.0.0",
				"Deployment podinfo ns=apps replicas=1 image=registry.example.com/podinfo:6.0.0 GREETING=chart-default",
			}},
		{name: "values: environment defaults, then the cluster's file, then inline values win; maps merge",
			req: Request{Kind: Helm, Chart: chart(Chart{ReleaseName: "web", Namespace: "apps",
				DefaultValues: []string{"environments/defaults.yaml"}, ValuesFile: "clusters/c1/podinfo/values.yaml",
				Values: map[string]any{"replicaCount": 3}})},
			want: []string{
				"ConfigMap web-config greeting=c1,kube=34,tag=6.1.0",
				"Deployment web ns=apps replicas=3 image=registry.example.com/podinfo:6.1.0 GREETING=c1",
			}},
		{name: "a path that does not exist", req: Request{Paths: []string{"apps/nothing"}},
			wantErr: "apps/nothing does not exist in the repository"},
		{name: "a path out of the repository", req: Request{Paths: []string{"../.."}},
			wantErr: "leaves the repository"},
		{name: "YAML that does not parse", req: Request{Paths: []string{"apps/broken.yaml"}},
			wantErr: "apps/broken.yaml, document 1"},
		{name: "a document that is no object", req: Request{Paths: []string{"apps/nokind.yaml"}},
			wantErr: "not a Kubernetes object"},
		{name: "a kustomization asking for helm inflation is refused", req: Request{Kind: Kustomize, Paths: []string{"kustomize/helmchart"}},
			wantErr: "kustomize build kustomize/helmchart"},
		{name: "a values file that does not exist",
			req:     Request{Kind: Helm, Chart: chart(Chart{ReleaseName: "x", ValuesFile: "clusters/c9/podinfo/values.yaml"})},
			wantErr: "clusters/c9/podinfo/values.yaml does not exist"},
		{name: "nothing rendered", req: Request{Paths: []string{"kustomize/overlays"}}, wantErr: "renders no object"},
		{name: "an unknown render", req: Request{Kind: "jsonnet", Paths: []string{"apps"}}, wantErr: `unknown render "jsonnet"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.Dir = repo
			objs, err := Render(tt.req)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Render() error = %v, want one containing %q", err, tt.wantErr)
				}
				if !fault.IsPermanent(err) || !errors.Is(err, ErrRender) {
					t.Errorf("Render() error %v is not a permanent ErrRender", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Render() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, summary(objs)); diff != "" {
				t.Errorf("Render() (-want +got):\n%s", diff)
			}
		})
	}
}

// A symbolic link in the checkout that points out of it is not followed.
func TestRenderRefusesALinkOutOfTheRepository(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	_, err := Render(Request{Dir: dir, Paths: []string{"link"}})
	if err == nil || !strings.Contains(err.Error(), "leaves the repository") {
		t.Fatalf("Render() error = %v, want it to refuse the link", err)
	}
}
