package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRepoHostPath(t *testing.T) {
	for _, tt := range []struct{ url, host, path string }{
		{"https://git.example.com/shop/deployments.git", "git.example.com", "shop/deployments"},
		{"https://git.example.com:3000/shop/deployments/", "git.example.com", "shop/deployments"},
		{"ssh://git@gitlab.example.com/group/sub/deploy.git", "gitlab.example.com", "group/sub/deploy"},
		{"git@github.com:shop/deployments.git", "github.com", "shop/deployments"},
		{"file:///srv/deployments.git", "", ""},
		{"/srv/deployments.git", "", ""},
	} {
		host, path := repoHostPath(tt.url)
		if host != tt.host || path != tt.path {
			t.Errorf("repoHostPath(%q) = %q, %q; want %q, %q", tt.url, host, path, tt.host, tt.path)
		}
	}
}

// The pull request block's defaults come from the host's kind and the url.
func TestPullRequestDefaults(t *testing.T) {
	for _, tt := range []struct {
		host, url, apiURL string
	}{
		{"github", "git@github.com:shop/deployments.git", "https://api.github.com/"},
		{"gitlab", "https://gitlab.example.com/shop/deployments.git", "https://gitlab.example.com/api/v4"},
		{"gitea", "https://git.example.com/shop/deployments.git", "https://git.example.com"},
		{"forgejo", "https://codeberg.org/shop/deployments.git", "https://codeberg.org"},
	} {
		g := &GitOps{URL: tt.url, PullRequest: &PullRequest{Host: tt.host}}
		applyGitOpsDefaults(g)
		want := &PullRequest{Host: tt.host, APIURL: tt.apiURL, Repository: "shop/deployments", MergeMethod: "merge", Revert: "pullRequest",
			MergeDeadline: &Duration{24 * time.Hour}, PollInterval: &Duration{2 * time.Minute}, MergeRetryFor: &Duration{5 * time.Minute}}
		if diff := cmp.Diff(want, g.PullRequest); diff != "" || g.Mode != "commit" || g.Edit != "kustomize" {
			t.Errorf("%s defaults (-want +got):\n%s (mode %q, edit %q)", tt.host, diff, g.Mode, g.Edit)
		}
	}
}
