package pipelines

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/config"
)

func TestGitOpsFor(t *testing.T) {
	app := config.Application{Name: "api", GitOps: &config.GitOps{
		URL: "https://git.example.com/deploy.git", Branch: "main", Edit: "helm",
		Paths:   []string{"clusters/{cluster}/api/values.yaml", "common/api.yaml"},
		Options: map[string]any{"tagValue": "image.tag"},
	}}
	got, err := GitOpsFor(app, "eu-1")
	if err != nil {
		t.Fatal(err)
	}
	want := &GitOps{
		URL: "https://git.example.com/deploy.git", Branch: "main", Edit: "helm",
		Paths: []string{"clusters/eu-1/api/values.yaml", "common/api.yaml"}, EditOptions: `{"tagValue":"image.tag"}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GitOpsFor (-want +got):\n%s", diff)
	}
	if g, err := GitOpsFor(config.Application{Name: "live"}, "eu-1"); g != nil || err != nil {
		t.Errorf("GitOpsFor(no gitops) = %v, %v", g, err)
	}
}

func TestGitImage(t *testing.T) {
	for _, tt := range []struct{ ref, tag, want string }{
		{"r.example.com/shop/api@sha256:abc", "1.4.2", "r.example.com/shop/api:1.4.2@sha256:abc"},
		{"r.example.com:5000/shop/api@sha256:abc", "1.4.2", "r.example.com:5000/shop/api:1.4.2@sha256:abc"},
		{"r.example.com/shop/api@sha256:abc", "", "r.example.com/shop/api@sha256:abc"},
		{"r.example.com/shop/api:1.0.0", "", "r.example.com/shop/api:1.0.0"},
	} {
		if got := gitImage(tt.ref, tt.tag); got != tt.want {
			t.Errorf("gitImage(%q, %q) = %q, want %q", tt.ref, tt.tag, got, tt.want)
		}
	}
}

// applyOnly is an executor that cannot run pipelines.
type applyOnly struct{ calls int }

func (a *applyOnly) ApplyCanary(context.Context, string, tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error) {
	a.calls++
	return tasks.ApplyCanaryResult{PreviousImage: "old", Changed: true}, nil
}

func TestApplyNeedsARunnerForGitOps(t *testing.T) {
	exec := &applyOnly{}
	res, err := Apply(t.Context(), exec, "eu-1", config.Application{Name: "live"}, "1.0.0", tasks.ApplyCanaryParams{})
	if err != nil || exec.calls != 1 || res.PreviousImage != "old" || !res.Changed {
		t.Errorf("Apply(live) = %+v, %v after %d calls", res, err, exec.calls)
	}
	gitopsApp := config.Application{Name: "api", GitOps: &config.GitOps{URL: "file:///repo", Paths: []string{"k.yaml"}}}
	if _, err := Apply(t.Context(), exec, "eu-1", gitopsApp, "1.0.0", tasks.ApplyCanaryParams{}); !events.IsPermanent(err) || exec.calls != 1 {
		t.Errorf("Apply(gitops) with an apply-only executor = %v after %d calls, want a permanent error and no apply", err, exec.calls)
	}
}
