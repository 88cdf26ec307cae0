package intake

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flotilla-cd/flotilla/events"
)

// Pull request webhooks of GitHub and GitLab, their documented payloads
// trimmed to the fields read (docs.github.com "pull_request" event;
// docs.gitlab.com "Merge request events"). Gitea's are read from a real
// Gitea in pkg/gitops/pullrequest.
const (
	githubPullRequestMerged = `{"action":"closed","number":7,"pull_request":{"html_url":"https://github.com/shop/deploy/pull/7","merged":true,
"merge_commit_sha":"m1","head":{"ref":"flotilla/shop-1a2b/2","sha":"h1"},"base":{"ref":"main"}},
"repository":{"clone_url":"https://github.com/shop/deploy.git"},"sender":{"login":"alice"}}`
	gitlabMergeRequestMerged = `{"object_kind":"merge_request","user":{"username":"bob"},
"project":{"git_http_url":"https://gitlab.example.com/shop/deploy.git"},
"object_attributes":{"iid":3,"url":"https://gitlab.example.com/shop/deploy/-/merge_requests/3","action":"merge","state":"merged",
"merge_commit_sha":"m2","source_branch":"flotilla/shop-1a2b/1","target_branch":"main","last_commit":{"id":"h2"}}}`
)

func TestPullRequestWebhooks(t *testing.T) {
	tests := []struct {
		name        string
		parse       func(*Delivery) (Result, error)
		d           *Delivery
		want        *events.GitPullRequest
		rollout     string
		wantIgnored string
	}{{
		name: "github merged", parse: GitHubSender{}.Parse,
		d: githubDelivery("pull_request", []byte(githubPullRequestMerged), "application/json"),
		want: &events.GitPullRequest{RepoURL: "https://github.com/shop/deploy.git", Number: 7, URL: "https://github.com/shop/deploy/pull/7",
			Action: "closed", Merged: true, MergeCommit: "m1", HeadRef: "flotilla/shop-1a2b/2", HeadSHA: "h1", BaseRef: "main", Actor: "alice",
			Sender: SenderGitHub},
		rollout: "shop-1a2b",
	}, {
		name: "github, a human's branch", parse: GitHubSender{}.Parse,
		d:           githubDelivery("pull_request", []byte(`{"action":"closed","number":8,"pull_request":{"head":{"ref":"fix/typo"}},"repository":{"clone_url":"u"}}`), "application/json"),
		wantIgnored: "pull request #8 of branch fix/typo: not flotilla's",
	}, {
		name: "github, labelled", parse: GitHubSender{}.Parse,
		d:           githubDelivery("pull_request", []byte(`{"action":"labeled","number":7,"pull_request":{"head":{"ref":"flotilla/x/1"}},"repository":{"clone_url":"u"}}`), "application/json"),
		wantIgnored: `pull request #7 action "labeled"`,
	}, {
		name: "gitlab merged", parse: GitLabSender{}.Parse,
		d: gitlabDelivery("Merge Request Hook", []byte(gitlabMergeRequestMerged)),
		want: &events.GitPullRequest{RepoURL: "https://gitlab.example.com/shop/deploy.git", Number: 3, URL: "https://gitlab.example.com/shop/deploy/-/merge_requests/3",
			Action: "merge", Merged: true, MergeCommit: "m2", HeadRef: "flotilla/shop-1a2b/1", HeadSHA: "h2", BaseRef: "main", Actor: "bob",
			Sender: SenderGitLab},
		rollout: "shop-1a2b",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := tt.parse(tt.d)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == nil {
				if res.Ignored != tt.wantIgnored || len(res.Events) != 0 {
					t.Errorf("Ignored = %q (%d events), want %q", res.Ignored, len(res.Events), tt.wantIgnored)
				}
				return
			}
			if len(res.Events) != 1 || res.Events[0].Type() != events.TypeGitPullRequest {
				t.Fatalf("events = %v", res.Events)
			}
			got, err := events.Decode[events.GitPullRequest](res.Events[0])
			if err != nil {
				t.Fatal(err)
			}
			want := *tt.want
			want.Receiver = tt.d.Receiver
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(events.GitPullRequest{}, "DeliveryID")); diff != "" || got.DeliveryID == "" {
				t.Errorf("payload (-want +got):\n%s", diff)
			}
			if r := events.RolloutID(res.Events[0]); r != tt.rollout {
				t.Errorf("rollout id = %q, want %q", r, tt.rollout)
			}
		})
	}
}
