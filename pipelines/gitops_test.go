package pipelines

import (
	"testing"

	"github.com/google/go-cmp/cmp"

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
		if got := GitImage(tt.ref, tt.tag); got != tt.want {
			t.Errorf("GitImage(%q, %q) = %q, want %q", tt.ref, tt.tag, got, tt.want)
		}
	}
}
