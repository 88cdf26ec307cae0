package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-cmp/cmp"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pkg/kube"
	"github.com/flotilla-cd/flotilla/pkg/testkit/gittest"
)

// deploymentsRepo is a real bare repository in t.TempDir() holding one
// Helm values file on main; it returns its file:// URL.
func deploymentsRepo(t *testing.T) string {
	t.Helper()
	values := "# the api\napi:\n  image:\n    repository: registry.example.com/api\n    tag: \"1.0.0\" # pinned by flotilla\n"
	return gittest.NewRepo(t, map[string]string{"charts/values.yaml": values})
}

func head(t *testing.T, url string) (*object.Commit, string) {
	t.Helper()
	c := gittest.Head(t, url)
	return c, gittest.File(t, c, "charts/values.yaml")
}

func run(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = Main(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestTaskBumpImage(t *testing.T) {
	url := deploymentsRepo(t)
	dir := t.TempDir()
	commitFile, changedFile := filepath.Join(dir, "commit"), filepath.Join(dir, "changed")
	args := []string{"task", "bump-image", "--git-url=" + url, "--git-branch=main", "--git-path=charts/values.yaml",
		"--git-edit=helm", `--git-edit-options={"prefix":"api."}`, "--image=registry.example.com/api:1.1.0",
		"--rollout=api-r1", "--application=api"}
	code, stdout, stderr := run(append(args, "--result-commit="+commitFile, "--result-changed="+changedFile)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if stdout != "" {
		t.Errorf("stdout %q: want nothing when the results go to files", stdout)
	}
	c, content := head(t, url)
	for file, want := range map[string]string{commitFile: c.Hash.String(), changedFile: "true"} {
		if b, err := os.ReadFile(file); err != nil || string(b) != want {
			t.Errorf("result %s = %q, %v; want %q", filepath.Base(file), b, err, want)
		}
	}
	if want := "# the api\napi:\n  image:\n    repository: registry.example.com/api\n    tag: \"1.1.0\" # pinned by flotilla\n"; content != want {
		t.Errorf("values after the bump:\n%s\nwant:\n%s", content, want)
	}
	if !strings.HasPrefix(c.Message, "flotilla: api 1.1.0 (rollout api-r1)") {
		t.Errorf("commit message %q", c.Message)
	}

	// Again: nothing to change, no commit; the results are printed.
	code, stdout, stderr = run(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res map[string]string
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("stdout %q: %v", stdout, err)
	}
	if diff := cmp.Diff(map[string]string{"commit": c.Hash.String(), "changed": "false"}, res); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
}

func TestTaskFailures(t *testing.T) {
	url := deploymentsRepo(t)
	dir := t.TempDir()
	for _, tt := range []struct {
		name     string
		args     []string
		wantCode int
		want     string // in stderr and, when a task ran, in the error result
	}{
		{
			name:     "unknown edit is permanent",
			args:     []string{"task", "bump-image", "--git-url=" + url, "--git-path=charts/values.yaml", "--git-edit=sed", "--image=registry.example.com/api:2"},
			wantCode: 3, want: `edit "sed"`,
		},
		{
			name:     "missing file is permanent",
			args:     []string{"task", "bump-image", "--git-url=" + url, "--git-path=nope.yaml", "--git-edit=helm", "--image=registry.example.com/api:2"},
			wantCode: 3, want: "nope.yaml",
		},
		{
			name:     "required params",
			args:     []string{"task", "bump-image", "--git-url=" + url},
			wantCode: 2, want: "required flags not set: --image, --git-path",
		},
		{
			name:     "apply-canary needs a canary",
			args:     []string{"task", "apply-canary", "--rollout=r1", "--workload=web", "--image=x"},
			wantCode: 2, want: "--canary",
		},
		{
			name:     "unknown flag",
			args:     []string{"task", "apply-canary", "--canary-fil=x"},
			wantCode: 2, want: "unknown flag",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			errFile := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-"))
			code, _, stderr := run(append(tt.args, "--result-error="+errFile)...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d saying %q", code, stderr, tt.wantCode, tt.want)
			}
			b, err := os.ReadFile(errFile)
			if tt.wantCode == 3 && (err != nil || !strings.Contains(string(b), tt.want)) {
				t.Errorf("error result %q, %v; want it to say %q", b, err, tt.want)
			}
		})
	}
}

func TestPipelinesPrint(t *testing.T) {
	code, stdout, stderr := run("pipelines", "print", "--image", "registry.example.com/flotilla:v9")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	objs, err := kube.Decode([]byte(stdout))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind()+"/"+o.GetName())
	}
	want := []string{"Task/" + pipelines.TaskApplyCanary, "Task/" + pipelines.TaskApplyManifests, "Task/" + pipelines.TaskBumpImage, "Pipeline/" + pipelines.PipelineName}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	b, err := yaml.Marshal(objs[0].Object)
	if err != nil {
		t.Fatal(err)
	}
	var task tektonv1.Task
	if err := yaml.UnmarshalStrict(b, &task); err != nil {
		t.Fatal(err)
	}
	if img := task.Spec.Steps[0].Image; img != "registry.example.com/flotilla:v9" {
		t.Errorf("step image %s", img)
	}
}
