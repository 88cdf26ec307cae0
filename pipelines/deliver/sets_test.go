package deliver_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pipelines/deliver"
	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/config"
)

// A release set's run carries its members in order (reversed for a
// revert), each with its paths and its own canary (none for a Job), the
// lead's canary the run's, and the set's deadline; the prune after a
// cluster's success prunes each member's inventory. Catches: a revert in
// the apply's order (the api going back before its frontend), one canary
// policy for every member, a run bounded by the default timeout.
func TestDeliverReleaseSet(t *testing.T) {
	const url = "file:///deployments.git"
	member := func(name, kind string, interval time.Duration) config.Application {
		return config.Application{
			Name: name, Namespace: "shop", MemberOf: "shop", Workload: config.Workload{Kind: kind, Name: name}, Service: config.Service{Port: 80},
			Source:   &config.Source{Git: &config.GitSource{URL: url, Branch: "main", Render: "manifests", Paths: []string{"{cluster}/" + name}}},
			Delivery: config.Delivery{Strategy: config.StrategyBlueGreen, Provider: config.ProviderKubernetes, Interval: config.Duration{Duration: interval}, Iterations: 2},
		}
	}
	set := member("shop-api", config.KindDeployment, time.Minute)
	set.Name, set.MemberOf = "shop", ""
	set.Set = &config.SetSpec{Members: []config.SetMember{{Name: "migrate", Job: true}, {Name: "shop-api"}, {Name: "web"}}}
	set.Delivery.Deadline = config.Duration{Duration: 42 * time.Minute}
	cfg := &config.Config{Applications: []config.Application{
		member("migrate", config.KindJob, 0), member("shop-api", config.KindDeployment, time.Minute), member("web", config.KindDeployment, 30*time.Second), set,
	}}
	exec := &runs{}
	d := deliver.New(cfg, exec, hooks)
	type memberRun struct {
		Application, Kind, Paths, Prune string
		CanaryInterval                  string
		SkipAnalysis                    bool
	}
	summary := func() []memberRun {
		var out []memberRun
		for _, m := range exec.got[len(exec.got)-1].Git.Members {
			r := memberRun{Application: m.Application, Kind: m.Kind, Paths: m.Paths[0], Prune: m.Prune}
			if m.Canary != nil {
				r.CanaryInterval, r.SkipAnalysis = m.Canary.Spec.Analysis.Interval, m.Canary.Spec.SkipAnalysis
			}
			out = append(out, r)
		}
		return out
	}
	if _, err := d.Deliver(t.Context(), events.PipelineRunRequested{RolloutID: "r1", Application: "shop", Cluster: "c1", Purpose: events.PurposeApply, Image: url + "@abc"}); err != nil {
		t.Fatal(err)
	}
	want := []memberRun{
		{"migrate", config.KindJob, "c1/migrate", tasks.PruneAfter, "", false},
		{"shop-api", config.KindDeployment, "c1/shop-api", tasks.PruneAfter, "1m", false},
		{"web", config.KindDeployment, "c1/web", tasks.PruneAfter, "30s", false},
	}
	if diff := cmp.Diff(want, summary()); diff != "" {
		t.Errorf("the apply's members (-want +got):\n%s", diff)
	}
	p := exec.got[0]
	if p.Workload != "shop-api" || p.Canary != p.Git.Members[1].Canary || p.Timeout != 42*time.Minute || p.Application != "shop" {
		t.Errorf("the run: workload %s, the lead's canary %t, timeout %s, application %s; want shop-api, true, 42m, shop", p.Workload, p.Canary == p.Git.Members[1].Canary, p.Timeout, p.Application)
	}

	if _, err := d.Deliver(t.Context(), events.PipelineRunRequested{RolloutID: "r1", Application: "shop", Cluster: "c1", Purpose: events.PurposeRevert, Image: url + "@old"}); err != nil {
		t.Fatal(err)
	}
	want = []memberRun{
		{"web", config.KindDeployment, "c1/web", tasks.PruneNow, "30s", true},
		{"shop-api", config.KindDeployment, "c1/shop-api", tasks.PruneNow, "1m", true},
		{"migrate", config.KindJob, "c1/migrate", tasks.PruneNow, "", false},
	}
	if diff := cmp.Diff(want, summary()); diff != "" {
		t.Errorf("the revert's members (-want +got):\n%s", diff)
	}

	if _, err := d.Prune(t.Context(), "shop", "c1", "r1", url+"@abc"); err != nil {
		t.Fatal(err)
	}
	var pruned []string
	for _, m := range exec.got[len(exec.got)-1].Git.Members {
		pruned = append(pruned, m.Application+"="+m.Prune)
	}
	if diff := cmp.Diff([]string{"migrate=pending", "shop-api=pending", "web=pending"}, pruned); diff != "" {
		t.Errorf("the prune's members (-want +got):\n%s", diff)
	}
}

// A release set of image members' run carries each member the request
// names a version of, its image pinned and its own canary, in order
// (reversed, without analysis, for a revert), the lead's canary the run's
// and the set's deadline; a member without a version is left out; the
// members travel to apply-canary as its members param. Catches: a revert
// in the apply's order, a member applied at no version, one canary for
// every member, the members lost in the pipeline's params.
func TestDeliverImageSet(t *testing.T) {
	member := func(name, image, container string, interval time.Duration) config.Application {
		return config.Application{
			Name: name, Namespace: "web", MemberOf: "web", Image: image, Workload: config.Workload{Kind: config.KindDeployment, Name: name, Container: container},
			Service:  config.Service{Port: 80},
			Delivery: config.Delivery{Strategy: config.StrategyBlueGreen, Provider: config.ProviderKubernetes, Interval: config.Duration{Duration: interval}, Iterations: 2},
		}
	}
	api, fe := member("web-api", "registry.example.com/web/api", "api", time.Minute), member("web-frontend", "registry.example.com/web/frontend", "", 30*time.Second)
	set := api
	set.Name, set.MemberOf, set.Image = "web", "", ""
	set.Set = &config.SetSpec{Members: []config.SetMember{{Name: "web-api"}, {Name: "web-frontend"}}}
	set.Delivery.Deadline = config.Duration{Duration: 42 * time.Minute}
	exec := &runs{}
	d := deliver.New(&config.Config{Applications: []config.Application{api, fe, set}}, exec, hooks)
	type memberRun struct {
		Application, Image, Container, CanaryInterval string
		SkipAnalysis                                  bool
	}
	summary := func(ms []tasks.SetMember) []memberRun {
		var out []memberRun
		for _, m := range ms {
			out = append(out, memberRun{m.Application, m.Image, m.Container, m.Canary.Spec.Analysis.Interval, m.Canary.Spec.SkipAnalysis})
		}
		return out
	}
	v1 := []events.MemberImage{{Application: "web-api", Image: "registry.example.com/web/api", Tag: "1.1.0", Digest: "sha256:a1"}}
	if _, err := d.Deliver(t.Context(), events.PipelineRunRequested{RolloutID: "r1", Application: "web", Cluster: "c1", Purpose: events.PurposeApply, Image: "sha256:set1", Members: v1}); err != nil {
		t.Fatal(err)
	}
	want := []memberRun{{"web-api", "registry.example.com/web/api@sha256:a1", "api", "1m", false}}
	if diff := cmp.Diff(want, summary(exec.got[0].Members)); diff != "" {
		t.Errorf("the apply of the api's version alone (-want +got):\n%s", diff)
	}
	// Only the frontend has a version: the lead is in the run without an
	// image (its canary, listing the set's, applied; its workload left).
	fev := events.MemberImage{Application: "web-frontend", Image: "registry.example.com/web/frontend", Tag: "2.0.0", Digest: "sha256:f2"}
	if _, err := d.Deliver(t.Context(), events.PipelineRunRequested{RolloutID: "r0", Application: "web", Cluster: "c1", Purpose: events.PurposeApply, Image: "sha256:set0", Members: []events.MemberImage{fev}}); err != nil {
		t.Fatal(err)
	}
	want = []memberRun{{"web-api", "", "api", "1m", false}, {"web-frontend", "registry.example.com/web/frontend@sha256:f2", "", "30s", false}}
	if diff := cmp.Diff(want, summary(exec.got[1].Members)); diff != "" {
		t.Errorf("the apply of the frontend's version alone (-want +got):\n%s", diff)
	}
	if p := exec.got[1]; p.Canary != p.Members[0].Canary {
		t.Errorf("the run's canary is not the lead's")
	}
	v2 := append(v1, fev)
	if _, err := d.Deliver(t.Context(), events.PipelineRunRequested{RolloutID: "r2", Application: "web", Cluster: "c1", Purpose: events.PurposeRevert, Image: "sha256:set2", Members: v2}); err != nil {
		t.Fatal(err)
	}
	p := exec.got[2]
	want = []memberRun{
		{"web-frontend", "registry.example.com/web/frontend@sha256:f2", "", "30s", true},
		{"web-api", "registry.example.com/web/api@sha256:a1", "api", "1m", true},
	}
	if diff := cmp.Diff(want, summary(p.Members)); diff != "" {
		t.Errorf("the revert's members (-want +got):\n%s", diff)
	}
	if p.Workload != "web-api" || p.Canary != p.Members[1].Canary || p.Timeout != 42*time.Minute || p.Git != nil {
		t.Errorf("the run: workload %s, the lead's canary %t, timeout %s, git %v; want web-api, true, 42m, none", p.Workload, p.Canary == p.Members[1].Canary, p.Timeout, p.Git)
	}
	params, err := p.PipelineParams()
	if err != nil {
		t.Fatal(err)
	}
	ap, err := tasks.ApplyCanaryParamsFrom(tasks.Params(params))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, summary(ap.Members)); diff != "" {
		t.Errorf("apply-canary's members param (-want +got):\n%s", diff)
	}
	if _, err := d.Deliver(t.Context(), events.PipelineRunRequested{RolloutID: "r3", Application: "web", Cluster: "c1", Purpose: events.PurposeApply, Image: "sha256:set3"}); err == nil {
		t.Errorf("a run of the set naming no member's version: no error")
	}
}

// A release set of git and image members' run is apply-manifests' at the
// commit its git members' entry names (the rollout's version, or the
// cluster's previous one for a revert), its members in dependsOn order
// across kinds (reversed for a revert): each git member rendered from its
// paths, the image member with its entry's image pinned and its own
// canary; an image member without an entry left out. Catches: the tuple's
// hash taken for the commit, the frontend rendered from paths it has
// not, the frontend applied at no version.
func TestDeliverMixedSet(t *testing.T) {
	const url = "file:///deployments.git"
	git := func(name, kind string) config.Application {
		return config.Application{
			Name: name, Namespace: "shop", MemberOf: "shop", Workload: config.Workload{Kind: kind, Name: name}, Service: config.Service{Port: 80},
			Source:   &config.Source{Git: &config.GitSource{URL: url, Branch: "main", Render: "manifests", Paths: []string{"{cluster}/" + name}}},
			Delivery: config.Delivery{Strategy: config.StrategyBlueGreen, Provider: config.ProviderKubernetes, Interval: config.Duration{Duration: time.Minute}, Iterations: 2},
		}
	}
	fe := config.Application{
		Name: "shop-frontend", Namespace: "shop", MemberOf: "shop", Image: "registry.example.com/shop/frontend",
		Workload: config.Workload{Kind: config.KindDeployment, Name: "shop-frontend", Container: "web"}, Service: config.Service{Port: 80},
		Delivery: config.Delivery{Strategy: config.StrategyBlueGreen, Provider: config.ProviderKubernetes, Interval: config.Duration{Duration: 30 * time.Second}, Iterations: 2},
	}
	set := git("shop-api", config.KindDeployment)
	set.Name, set.MemberOf = "shop", ""
	set.Set = &config.SetSpec{Members: []config.SetMember{{Name: "migrate", Job: true}, {Name: "shop-api"}, {Name: "shop-frontend", Image: fe.Image}}}
	exec := &runs{}
	d := deliver.New(&config.Config{Applications: []config.Application{git("migrate", config.KindJob), git("shop-api", config.KindDeployment), fe, set}}, exec, hooks)
	type memberRun struct {
		Application, Paths, Image string
		SkipAnalysis              bool
	}
	summary := func() (string, []memberRun) {
		p := exec.got[len(exec.got)-1]
		var out []memberRun
		for _, m := range p.Git.Members {
			r := memberRun{Application: m.Application, Image: m.Image}
			if len(m.Paths) > 0 {
				r.Paths = m.Paths[0]
			}
			if m.Canary != nil {
				r.SkipAnalysis = m.Canary.Spec.SkipAnalysis
			}
			out = append(out, r)
		}
		return p.Git.Commit, out
	}
	entries := func(commit, feDigest string) []events.MemberImage {
		out := []events.MemberImage{
			{Application: "migrate", Image: url, Tag: "main@" + commit, Digest: commit},
			{Application: "shop-api", Image: url, Tag: "main@" + commit, Digest: commit},
		}
		if feDigest != "" {
			out = append(out, events.MemberImage{Application: "shop-frontend", Image: fe.Image, Tag: "2.0.0", Digest: feDigest})
		}
		return out
	}
	for _, tt := range []struct {
		name    string
		purpose string
		members []events.MemberImage
		commit  string
		want    []memberRun
	}{
		{"an apply", events.PurposeApply, entries("abc", "sha256:f2"), "abc", []memberRun{
			{"migrate", "c1/migrate", "", false}, {"shop-api", "c1/shop-api", "", false}, {"shop-frontend", "", fe.Image + "@sha256:f2", false},
		}},
		{"a revert", events.PurposeRevert, entries("old", "sha256:f1"), "old", []memberRun{
			{"shop-frontend", "", fe.Image + "@sha256:f1", true}, {"shop-api", "c1/shop-api", "", true}, {"migrate", "c1/migrate", "", false},
		}},
		{"the frontend without an entry", events.PurposeApply, entries("abc", ""), "abc", []memberRun{
			{"migrate", "c1/migrate", "", false}, {"shop-api", "c1/shop-api", "", false},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := d.Deliver(t.Context(), events.PipelineRunRequested{RolloutID: "r1", Application: "shop", Cluster: "c1", Purpose: tt.purpose, Image: "shop@sha256:tuple", Members: tt.members}); err != nil {
				t.Fatal(err)
			}
			commit, got := summary()
			if diff := cmp.Diff([]any{tt.commit, tt.want}, []any{commit, got}); diff != "" {
				t.Errorf("commit, members (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := d.Deliver(t.Context(), events.PipelineRunRequested{RolloutID: "r2", Application: "shop", Cluster: "c1", Purpose: events.PurposeApply, Image: "shop@sha256:tuple",
		Members: entries("abc", "sha256:f2")[2:]}); err == nil {
		t.Error("a run naming no commit of the git members: no error")
	}

	// The frontend leads (listed first, depending on nothing): the run
	// keeps the set's order, the lead's canary is the run's, and without
	// an entry the lead comes with its canary only (docs/design/
	// release-sets.md, "An image lead").
	led := set
	led.Workload, led.Service, led.Delivery = fe.Workload, fe.Service, fe.Delivery
	led.Set = &config.SetSpec{Members: []config.SetMember{{Name: "shop-frontend", Image: fe.Image}, {Name: "migrate", Job: true}, {Name: "shop-api"}}}
	d = deliver.New(&config.Config{Applications: []config.Application{git("migrate", config.KindJob), git("shop-api", config.KindDeployment), fe, led}}, exec, hooks)
	for _, tt := range []struct {
		name    string
		purpose string
		members []events.MemberImage
		commit  string
		want    []memberRun
	}{
		{"an apply led by the frontend", events.PurposeApply, entries("abc", "sha256:f2"), "abc", []memberRun{
			{"shop-frontend", "", fe.Image + "@sha256:f2", false}, {"migrate", "c1/migrate", "", false}, {"shop-api", "c1/shop-api", "", false},
		}},
		{"its revert", events.PurposeRevert, entries("old", "sha256:f1"), "old", []memberRun{
			{"shop-api", "c1/shop-api", "", true}, {"migrate", "c1/migrate", "", false}, {"shop-frontend", "", fe.Image + "@sha256:f1", true},
		}},
		{"the lead without an entry: its canary only", events.PurposeApply, entries("abc", ""), "abc", []memberRun{
			{"shop-frontend", "", "", false}, {"migrate", "c1/migrate", "", false}, {"shop-api", "c1/shop-api", "", false},
		}},
		{"its revert to a version without one", events.PurposeRevert, entries("old", ""), "old", []memberRun{
			{"shop-api", "c1/shop-api", "", true}, {"migrate", "c1/migrate", "", false}, {"shop-frontend", "", "", true},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := d.Deliver(t.Context(), events.PipelineRunRequested{RolloutID: "r1", Application: "shop", Cluster: "c1", Purpose: tt.purpose, Image: "shop@sha256:tuple", Members: tt.members}); err != nil {
				t.Fatal(err)
			}
			commit, got := summary()
			if diff := cmp.Diff([]any{tt.commit, tt.want}, []any{commit, got}); diff != "" {
				t.Errorf("commit, members (-want +got):\n%s", diff)
			}
			p := exec.got[len(exec.got)-1]
			if p.Canary == nil || p.Canary.Name != "shop-frontend" || p.Workload != "shop-frontend" || p.Git.URL != url {
				t.Errorf("the run's canary %v, workload %q, repository %q: want the frontend's, and the git members' repository", p.Canary, p.Workload, p.Git.URL)
			}
		})
	}
}
