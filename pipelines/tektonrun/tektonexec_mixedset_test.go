package tektonrun

import (
	"context"
	"strings"
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"github.com/google/go-cmp/cmp"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pipelines/tasks"
)

// manifestsMember is what apply-manifests' step reads of one member of a
// release set of git and image members.
type manifestsMember struct {
	Application, Kind, Workload, Container, Image, Canary, Paths string
}

// TestTektonRunsAMixedSet: the PipelineRun of a release set of git and
// image members (docs/design/release-sets.md, "Git and image members")
// runs apply-manifests at the tuple's commit with every member in the
// run's order: the Job and the api with their paths, the frontend with
// its entry's image, container and own canary. What the step reads is
// decoded as it decodes it: the params the embedded Pipeline hands its
// apply-manifests task (each $(params.x) of the PipelineRun), through
// tasks.ApplyManifestsParamsFrom. The step's results go back through the
// Pipeline's results as Tekton maps them (apply-canary skipped, so none of
// its results), and its previous-members comes back as
// Results.PreviousMembers, under the Pipeline's previous-member-revisions.
// Catches: a member dropped from the members param (the frontend's image,
// or the Job), the run sent to apply-canary (source image) or at the
// tuple's hash instead of the commit, the Pipeline not passing members to
// apply-manifests, and previous-members not read back (a revert on
// Tekton would restore the fleet's previous version, not each cluster's).
func TestTektonRunsAMixedSet(t *testing.T) {
	const url = "https://git.example.com/platform/deployments.git"
	commit := strings.Repeat("c", 40)
	old := strings.Repeat("b", 40)
	fe := "registry.example.com/shop/frontend@sha256:" + strings.Repeat("f", 64)
	feOld := "registry.example.com/shop/frontend@sha256:" + strings.Repeat("e", 64)
	rev := func(c string) string { return tasks.Revision(url, c) }
	canary := func(name string) *flaggerv1.Canary {
		return &flaggerv1.Canary{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"}}
	}
	job := tasks.SetMember{Application: "shop-migrate", Kind: "Job", Workload: "shop-migrate", Paths: []string{"c1/shop-migrate"}, Render: "manifests"}
	api := tasks.SetMember{Application: "shop-api", Kind: "Deployment", Workload: "shop-api", Paths: []string{"c1/shop-api"}, Render: "manifests", Canary: canary("shop-api")}
	frontend := tasks.SetMember{Application: "shop-frontend", Kind: "Deployment", Workload: "shop-frontend", Container: "web", Image: fe, Canary: canary("shop-frontend")}
	feBack := frontend
	feBack.Image = feOld
	wantJob := manifestsMember{"shop-migrate", "Job", "shop-migrate", "", "", "", "c1/shop-migrate"}
	wantAPI := manifestsMember{"shop-api", "Deployment", "shop-api", "", "", "shop-api", "c1/shop-api"}
	wantFE := func(image string) manifestsMember {
		return manifestsMember{"shop-frontend", "Deployment", "shop-frontend", "web", image, "shop-frontend", ""}
	}
	tests := []struct {
		name        string
		commit      string
		members     []tasks.SetMember
		stepResults tasks.Results // what apply-manifests' step writes
		wantMembers []manifestsMember
		want        pipelines.Results
	}{
		{
			name: "an apply: the Job, the api, then the frontend's image", commit: commit,
			members: []tasks.SetMember{job, api, frontend},
			stepResults: tasks.Results{
				tasks.ResultPreviousRevision: rev(old), tasks.ResultChanged: "true", tasks.ResultPruned: "",
				tasks.ResultPreviousMembers: `{"shop-api":"` + rev(old) + `","shop-frontend":"` + feOld + `"}`,
			},
			wantMembers: []manifestsMember{wantJob, wantAPI, wantFE(fe)},
			want: pipelines.Results{
				PreviousImage: rev(old), Changed: true,
				PreviousMembers: map[string]string{"shop-api": rev(old), "shop-frontend": feOld},
			},
		},
		{
			name: "a revert: the frontend first, at the cluster's previous commit", commit: old,
			members: []tasks.SetMember{feBack, api, job},
			stepResults: tasks.Results{
				tasks.ResultPreviousRevision: rev(commit), tasks.ResultChanged: "true", tasks.ResultPruned: "",
				tasks.ResultPreviousMembers: `{"shop-api":"` + rev(commit) + `","shop-frontend":"` + fe + `"}`,
			},
			wantMembers: []manifestsMember{wantFE(feOld), wantAPI, wantJob},
			want: pipelines.Results{
				PreviousImage: rev(commit), Changed: true,
				PreviousMembers: map[string]string{"shop-api": rev(commit), "shop-frontend": fe},
			},
		},
		{
			name: "the frontend without an entry: the git members alone", commit: commit,
			members: []tasks.SetMember{job, api},
			stepResults: tasks.Results{
				tasks.ResultPreviousRevision: rev(old), tasks.ResultChanged: "true", tasks.ResultPruned: "",
				tasks.ResultPreviousMembers: `{"shop-api":"` + rev(old) + `"}`,
			},
			wantMembers: []manifestsMember{wantJob, wantAPI},
			want:        pipelines.Results{PreviousImage: rev(old), Changed: true, PreviousMembers: map[string]string{"shop-api": rev(old)}},
		},
	}
	res, err := pipelines.Load("")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex, tc, _ := newFakeTekton(t)
			finishWhenCreated(t, tc, true, pipelineResults(t, res.Pipeline, "apply-manifests", tt.stepResults))
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			p := pipelines.RunParams{
				Rollout: "shop-0123456789", Application: "shop", Namespace: "shop", Kind: "Deployment", Workload: "shop-api",
				// The set's version is the tuple: the run's image is its
				// hash, which no step renders.
				Image:  "shop@sha256:" + strings.Repeat("0", 64),
				Canary: canary("shop-api"), Timeout: 30 * time.Minute,
				Git: &pipelines.GitSource{
					URL: url, Commit: tt.commit, Paths: []string{"c1/shop-migrate", "c1/shop-api"}, Render: "manifests",
					Prune: tasks.PruneOff, Members: tt.members,
				},
			}
			got, err := ex.Run(ctx, "c1", p)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("results (-want +got):\n%s", d)
			}
			runs, err := tc.TektonV1().PipelineRuns("flotilla").List(ctx, metav1.ListOptions{})
			if err != nil || len(runs.Items) != 1 {
				t.Fatalf("runs: %v, %v", runs, err)
			}
			pr := runs.Items[0]
			params := map[string]string{}
			for _, prm := range pr.Spec.Params {
				params[prm.Name] = prm.Value.StringVal
			}
			if params[pipelines.ParamSource] != "git" {
				t.Errorf("param source = %q, want git (apply-manifests runs, not apply-canary)", params[pipelines.ParamSource])
			}
			if pr.Spec.Timeouts == nil || pr.Spec.Timeouts.Pipeline == nil || pr.Spec.Timeouts.Pipeline.Duration != 30*time.Minute {
				t.Errorf("timeouts = %+v, want the set's step deadline, 30m", pr.Spec.Timeouts)
			}
			// What apply-manifests' step reads: the params the Pipeline
			// hands its task.
			ap, err := tasks.ApplyManifestsParamsFrom(taskParams(t, res.Pipeline, "apply-manifests", params))
			if err != nil {
				t.Fatalf("apply-manifests' params of the PipelineRun: %v", err)
			}
			if ap.URL != url || ap.Commit != tt.commit {
				t.Errorf("apply-manifests renders %s at %s, want %s at %s", ap.URL, ap.Commit, url, tt.commit)
			}
			if ap.Workload != "shop-api" || ap.Canary == nil || ap.Canary.Name != "shop-api" || ap.Application != "shop" {
				t.Errorf("apply-manifests' workload %q, canary %v, application %q, want the lead's, shop-api, of set shop", ap.Workload, ap.Canary, ap.Application)
			}
			var gotMembers []manifestsMember
			for _, m := range ap.Members {
				cn := ""
				if m.Canary != nil {
					cn = m.Canary.Name
				}
				gotMembers = append(gotMembers, manifestsMember{m.Application, m.Kind, m.Workload, m.Container, m.Image, cn, strings.Join(m.Paths, ",")})
			}
			if d := cmp.Diff(tt.wantMembers, gotMembers); d != "" {
				t.Errorf("the members apply-manifests' step reads (-want +got):\n%s", d)
			}
		})
	}
}

// taskParams are the params pipeline hands its task named task from a
// run's params: each of the task's $(params.x) is the run's x.
func taskParams(t *testing.T, pipeline *tektonv1.Pipeline, task string, run map[string]string) tasks.Params {
	t.Helper()
	for _, pt := range pipeline.Spec.Tasks {
		if pt.Name != task {
			continue
		}
		out := tasks.Params{}
		for _, prm := range pt.Params {
			name, ok := strings.CutPrefix(prm.Value.StringVal, "$(params.")
			name, closed := strings.CutSuffix(name, ")")
			if !ok || !closed {
				t.Fatalf("pipeline task %s's param %s = %q: not a param of the Pipeline", task, prm.Name, prm.Value.StringVal)
			}
			out[prm.Name] = run[name]
		}
		return out
	}
	t.Fatalf("the Pipeline has no task %s", task)
	return nil
}

// pipelineResults are the Pipeline's results Tekton reports when task
// alone ran and wrote stepResults: each result naming one of its
// results, $(tasks.<task>.results.<r>); the other tasks' (skipped) are
// not reported.
func pipelineResults(t *testing.T, pipeline *tektonv1.Pipeline, task string, stepResults tasks.Results) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range pipeline.Spec.Results {
		name, ok := strings.CutPrefix(r.Value.StringVal, "$(tasks."+task+".results.")
		name, closed := strings.CutSuffix(name, ")")
		if !ok || !closed {
			continue
		}
		v, written := stepResults[name]
		if !written {
			t.Fatalf("pipeline result %s names %s's result %s, which the step does not write", r.Name, task, name)
		}
		out[r.Name] = v
	}
	return out
}
