package verify_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/functions/verify"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/testkit/gittest"
)

// mirrorRepos is verify's GitRepos over a real mirror of real repositories;
// fail, when set, is returned instead (a fetch that failed).
type mirrorRepos struct {
	m    *gitops.Mirror
	fail error
}

func (r mirrorRepos) VerifyPush(ctx context.Context, src config.GitSource, ref, before, commit string) ([]string, error) {
	if r.fail != nil {
		return nil, r.fail
	}
	c, err := r.m.VerifyPush(ctx, gitops.Repo{URL: src.URL}, ref, before, commit)
	return c.Changed, err
}

// gitPush is the git.pushed of a push of after (before it, before) to ref.
func gitPush(t *testing.T, url, ref, before, after string) cloudevents.Event {
	t.Helper()
	p := events.GitPushed{RepoURL: url, Ref: ref, Before: before, After: after, Sender: "github", Receiver: "github"}
	p.Branch, _ = strings.CutPrefix(ref, "refs/heads/")
	if tag, ok := strings.CutPrefix(ref, "refs/tags/"); ok {
		p.Tag, p.Branch = tag, ""
	}
	e, err := events.New("push-"+after[:8], "test", events.TypeGitPushed, p)
	if err != nil {
		t.Fatal(err)
	}
	e.SetSubject(url + "#" + ref)
	return e
}

// verdict summarizes what verify emitted: "verified <apps> <clusters>
// <changed>", "rejected <reason>" or "skipped <app>: <reason>".
func verdict(t *testing.T, evs []cloudevents.Event) []string {
	t.Helper()
	var out []string
	for _, e := range evs {
		switch e.Type() {
		case events.TypeGitVerified:
			v, err := events.Decode[events.GitVerified](e)
			if err != nil {
				t.Fatal(err)
			}
			s := "verified " + strings.Join(v.Applications, ",")
			for _, a := range v.Applications {
				if cs, ok := v.Clusters[a]; ok {
					s += " " + a + "=" + strings.Join(cs, ",")
				}
			}
			out = append(out, s+" changed="+strings.Join(v.ChangedPaths, ",")+" version="+v.Version())
		case events.TypeGitRejected:
			r, _ := events.Decode[events.GitRejected](e)
			out = append(out, "rejected "+r.Reason)
		case events.TypeRolloutSkipped:
			r, _ := events.Decode[events.RolloutSkipped](e)
			out = append(out, "skipped "+r.Application+": "+r.Reason)
		default:
			t.Errorf("unexpected %s", e.Type())
		}
	}
	return out
}

func TestVerifyGitPush(t *testing.T) {
	url := gittest.NewRepo(t, map[string]string{
		"README.md": "deployments\n", "clusters/c1/web/app.yaml": "a: 1\n", "clusters/c2/web/app.yaml": "a: 1\n",
		"charts/api/values.yaml": "x: 1\n", "clusters/c1/api/values.yaml": "y: 1\n",
	})
	seed := gittest.Head(t, url).Hash.String()
	webC1 := gittest.Commit(t, url, "main", "web in c1", map[string]string{"clusters/c1/web/app.yaml": "a: 2\n"})
	readme := gittest.Commit(t, url, "main", "readme", map[string]string{"README.md": "more\n"})
	chart := gittest.Commit(t, url, "main", "api chart", map[string]string{"charts/api/values.yaml": "x: 2\n"})
	side := gittest.Commit(t, url, "next", "on another branch", map[string]string{"clusters/c2/web/app.yaml": "a: 9\n"})
	gittest.Tag(t, url, "v1.0.0", webC1)
	gittest.Tag(t, url, "nightly", webC1)
	cfg := &config.Config{
		Fleet: config.Fleet{Clusters: []config.Cluster{{Name: "c1", Labels: map[string]string{"env": "prod"}}, {Name: "c2"}}},
		Applications: []config.Application{
			{Name: "web", Source: &config.Source{Git: &config.GitSource{URL: url, Branch: "main", Tags: `v\d+\.\d+\.\d+`, Paths: []string{"clusters/{cluster}/web"}}}},
			{Name: "api", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
				Source: &config.Source{Git: &config.GitSource{URL: url + "/", Branch: "main", Render: "helm",
					Helm: &config.HelmRelease{Chart: "charts/api", ValuesFile: "clusters/{cluster}/api/values.yaml"}}}},
			{Name: "image-app", Image: "registry.example.com/app"},
		},
	}
	f := verify.New(nil, func(string) bool { return false }).WithGit(mirrorRepos{m: gitops.NewMirror(t.TempDir())}, cfg)
	tests := []struct {
		name  string
		event cloudevents.Event
		want  []string
	}{
		{"a change to one cluster's path: that cluster", gitPush(t, url, "refs/heads/main", seed, webC1), []string{
			"skipped api: the push changes nothing the application tracks (it changed clusters/c1/web/app.yaml)",
			"verified web web=c1 changed=clusters/c1/web/app.yaml version=main@" + webC1[:12],
		}},
		{"a README change: nothing tracked", gitPush(t, url, "refs/heads/main", webC1, readme), []string{
			"skipped web: the push changes nothing the application tracks (it changed README.md)",
			"skipped api: the push changes nothing the application tracks (it changed README.md)",
		}},
		{"the chart: every cluster the application targets", gitPush(t, url, "refs/heads/main", readme, chart), []string{
			"skipped web: the push changes nothing the application tracks (it changed charts/api/values.yaml)",
			"verified api api=c1 changed=charts/api/values.yaml version=main@" + chart[:12],
		}},
		{"several commits at once: every change counts", gitPush(t, url, "refs/heads/main", seed, chart), []string{
			"verified web,api web=c1 api=c1 changed=README.md,charts/api/values.yaml,clusters/c1/web/app.yaml version=main@" + chart[:12],
		}},
		{"a tag the pattern matches: rolls out whatever it changed", gitPush(t, url, "refs/tags/v1.0.0", strings.Repeat("0", 40), webC1), []string{
			"skipped api: a push of tag v1.0.0: the application follows branch main (it sets no tags pattern)",
			"verified web changed=clusters/c1/web/app.yaml version=v1.0.0",
		}},
		{"a tag the pattern does not match", gitPush(t, url, "refs/tags/nightly", strings.Repeat("0", 40), webC1), []string{
			`skipped web: tag nightly does not match the application's tags pattern v\d+\.\d+\.\d+`,
			"skipped api: a push of tag nightly: the application follows branch main (it sets no tags pattern)",
		}},
		{"another branch", gitPush(t, url, "refs/heads/next", chart, side), []string{
			"skipped web: a push to refs/heads/next: the application follows branch main",
			"skipped api: a push to refs/heads/next: the application follows branch main",
		}},
		{"a commit main does not have", gitPush(t, url, "refs/heads/main", chart, side), []string{
			"rejected commit not verified: commit " + side + " is not on refs/heads/main of " + url + " (its head is " + chart + ")",
		}},
		{"a repository no application follows", gitPush(t, "https://git.example.com/other.git", "refs/heads/main", seed, chart), []string{
			"rejected repository https://git.example.com/other.git is not followed by any application",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := f.Handle(context.Background(), tt.event)
			if err != nil {
				t.Fatalf("Handle() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, verdict(t, evs)); diff != "" {
				t.Errorf("Handle() (-want +got):\n%s", diff)
			}
		})
	}

	// A fetch that fails for now is retried (the error returned), not a
	// verdict.
	down := verify.New(nil, func(string) bool { return false }).WithGit(mirrorRepos{fail: errors.New("connection refused")}, cfg)
	if evs, err := down.Handle(context.Background(), gitPush(t, url, "refs/heads/main", seed, webC1)); err == nil || fault.IsPermanent(err) || len(evs) != 0 {
		t.Errorf("Handle(fetch failing) = %v, %v; want a retryable error and no verdict", evs, err)
	}
}

// A push touching one member of a release set makes one git.verified of
// the set, naming neither member: the members roll out with their set,
// never alone. Catches: a rollout per member (two rollouts of one commit),
// or the member whose files changed rolled out without the others.
func TestVerifyGitPushOfASet(t *testing.T) {
	url := gittest.NewRepo(t, map[string]string{"shop/api/a.yaml": "a: 1\n", "shop/frontend/f.yaml": "f: 1\n", "README.md": "r\n"})
	seed := gittest.Head(t, url).Hash.String()
	api := gittest.Commit(t, url, "main", "api", map[string]string{"shop/api/a.yaml": "a: 2\n"})
	readme := gittest.Commit(t, url, "main", "readme", map[string]string{"README.md": "more\n"})
	member := func(name string) config.Application {
		return config.Application{Name: name, MemberOf: "shop", Source: &config.Source{Git: &config.GitSource{URL: url, Branch: "main", Paths: []string{"shop/" + name}}}}
	}
	cfg := &config.Config{
		Fleet: config.Fleet{Clusters: []config.Cluster{{Name: "c1"}, {Name: "c2"}}},
		Applications: []config.Application{member("api"), member("frontend"), {
			Name: "shop", Set: &config.SetSpec{Members: []config.SetMember{{Name: "api"}, {Name: "frontend"}}},
			Source: &config.Source{Git: &config.GitSource{URL: url, Branch: "main", Paths: []string{"shop/api", "shop/frontend"}}},
		}},
	}
	f := verify.New(nil, func(string) bool { return false }).WithGit(mirrorRepos{m: gitops.NewMirror(t.TempDir())}, cfg)
	for _, tt := range []struct {
		name   string
		before string
		after  string
		want   []string
	}{
		{"one member's files", seed, api, []string{"verified shop shop=c1,c2 changed=shop/api/a.yaml version=main@" + api[:12]}},
		{"no member's files", api, readme, []string{"skipped shop: the push changes nothing the application tracks (it changed README.md)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := f.Handle(context.Background(), gitPush(t, url, "refs/heads/main", tt.before, tt.after))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, verdict(t, evs)); d != "" {
				t.Errorf("Handle() (-want +got):\n%s", d)
			}
		})
	}
}
