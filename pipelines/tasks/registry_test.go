package tasks_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestParseAndParams(t *testing.T) {
	def, ok := tasks.Lookup("apply-canary")
	if !ok {
		t.Fatal("no apply-canary task")
	}
	in, err := def.Parse([]string{"--kubeconfig=/k", "--rollout=r1", "--workload", "web", "--image=i@sha256:1", "--canary={}",
		"--result-changed=/tekton/results/changed"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := in.Params()
	if err != nil {
		t.Fatal(err)
	}
	want := tasks.Params{"rollout": "r1", "namespace": "default", "kind": "Deployment", "workload": "web", "container": "",
		"image": "i@sha256:1", "canary": "{}", "objects": "", "restart": "", "members": ""}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("params (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"changed": "/tekton/results/changed"}, in.ResultPaths()); diff != "" {
		t.Errorf("result paths (-want +got):\n%s", diff)
	}
	if in.Kubeconfig != "/k" {
		t.Errorf("kubeconfig %q", in.Kubeconfig)
	}
	for _, args := range [][]string{{"--nope=1"}, {"stray"}} {
		if _, err := def.Parse(args); !fault.IsPermanent(err) {
			t.Errorf("Parse(%q) = %v, want a permanent error", args, err)
		}
	}
	in, _ = def.Parse(nil)
	if _, err := in.Params(); err == nil || !strings.Contains(err.Error(), "--rollout, --workload, --image, --canary") {
		t.Errorf("Params without the required flags: %v", err)
	}
}

func TestApplyCanaryParamsRoundTrip(t *testing.T) {
	p, err := tasks.ApplyCanaryParamsFrom(tasks.Params{
		"rollout": "r1", "namespace": "apps", "workload": "web", "image": "i",
		"canary":  "apiVersion: flagger.app/v1beta1\nkind: Canary\nmetadata: {name: web}\nspec: {service: {port: 80}}\n",
		"objects": `[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}},{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"web"},"spec":{"minReplicas":2}}]`,
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.Canary.Name != "web" || p.Canary.Namespace != "apps" || len(p.Objects) != 2 || p.Objects[0].GetName() != "x" {
		t.Errorf("decoded %+v", p)
	}
	if n, ok, _ := unstructured.NestedInt64(p.Objects[1].Object, "spec", "minReplicas"); !ok || n != 2 {
		t.Errorf("minReplicas = %d (found %t), want the int64 2", n, ok)
	}
	back, err := p.ParamsOf()
	if err != nil {
		t.Fatal(err)
	}
	again, err := tasks.ApplyCanaryParamsFrom(back)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, again); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for name, bad := range map[string]tasks.Params{
		"unknown canary field": {"canary": `{"metadata":{"name":"web"},"spec":{"bogus":1}}`},
		"nameless canary":      {"canary": `{}`},
		"object without kind":  {"canary": `{"metadata":{"name":"web"}}`, "objects": `[{"metadata":{"name":"x"}}]`},
	} {
		if _, err := tasks.ApplyCanaryParamsFrom(bad); !fault.IsPermanent(err) {
			t.Errorf("%s: %v, want a permanent error", name, err)
		}
	}
}

func TestGitAuthFromDir(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{"username": "bot\n", "token": "tkn", "ssh-privatekey": "KEY", "known_hosts": "host"} {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a, err := tasks.GitAuthFromDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := gitops.Auth{Username: "bot", Token: "tkn", SSHKeyFile: filepath.Join(dir, "ssh-privatekey"), SSHKnownHostsFile: filepath.Join(dir, "known_hosts")}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("auth (-want +got):\n%s", diff)
	}
	if a, err := tasks.GitAuthFromDir(filepath.Join(dir, "missing")); err != nil || a != (gitops.Auth{}) {
		t.Errorf("missing dir: %+v, %v; want no credentials", a, err)
	}
}

func TestErrorResultFitsATerminationMessage(t *testing.T) {
	long := errors.New(strings.Repeat("é", tasks.MaxErrorResult))
	got := tasks.ErrorResult(long)
	if len(got) > tasks.MaxErrorResult || !utf8.ValidString(got) || !strings.HasSuffix(got, "...") {
		t.Errorf("ErrorResult: %d bytes, valid UTF-8 %t", len(got), utf8.ValidString(got))
	}
}

func TestWriteResults(t *testing.T) {
	dir := t.TempDir()
	paths := map[string]string{"commit": filepath.Join(dir, "commit"), "changed": filepath.Join(dir, "changed")}
	if err := tasks.WriteResults(tasks.Results{"commit": "abc", "other": "x"}, paths); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(paths["commit"]); err != nil || string(b) != "abc" {
		t.Errorf("commit = %q, %v", b, err)
	}
	if _, err := os.Stat(paths["changed"]); !os.IsNotExist(err) {
		t.Errorf("a result the task did not report was written: %v", err)
	}
}
