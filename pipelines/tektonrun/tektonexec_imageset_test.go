package tektonrun

import (
	"context"
	"strings"
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pipelines/tasks"
)

// stepMember is what apply-canary's step reads of one member of a release
// set of image members, from the PipelineRun's params.
type stepMember struct {
	Application, Kind, Workload, Container, Image, Canary string
}

// TestTektonRunsAnImageSet: the PipelineRun of a release set of image
// members carries each member (its image, container and own canary, the
// lead without an image when the set's version has none for it) in its
// members param, in the run's order, as the embedded executor's run
// does; apply-canary's step decodes them from the params the pipeline
// hands it (the same names), and the run's previous-members result comes
// back as Results.PreviousMembers. Catches: the members dropped from an
// image run's params (only git sets carried them), the lead's workload or
// canary not the run's, previous-members not read back (a revert on Tekton
// would restore the fleet's previous version instead of each cluster's).
func TestTektonRunsAnImageSet(t *testing.T) {
	api := "registry.example.com/web-api@sha256:" + strings.Repeat("a", 64)
	fe := "registry.example.com/web-frontend@sha256:" + strings.Repeat("f", 64)
	canary := func(name string) *flaggerv1.Canary {
		return &flaggerv1.Canary{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "web"}}
	}
	apiMember := tasks.SetMember{Application: "web-api", Kind: "Deployment", Workload: "web-api", Image: api, Canary: canary("web-api")}
	feMember := tasks.SetMember{Application: "web-frontend", Kind: "Deployment", Workload: "web-frontend", Container: "app", Image: fe, Canary: canary("web-frontend")}
	apiNoImage := apiMember
	apiNoImage.Image = ""
	tests := []struct {
		name        string
		members     []tasks.SetMember
		results     map[string]string
		wantMembers []stepMember
		want        pipelines.Results
	}{
		{
			name:    "both members",
			members: []tasks.SetMember{apiMember, feMember},
			results: map[string]string{
				pipelines.ResultPreviousImage: "registry.example.com/web-api:1.0.0", pipelines.ResultChanged: "true",
				pipelines.ResultPreviousMembers: `{"web-api":"registry.example.com/web-api:1.0.0","web-frontend":"registry.example.com/web-frontend:2.0.0"}`,
			},
			wantMembers: []stepMember{
				{"web-api", "Deployment", "web-api", "", api, "web-api"},
				{"web-frontend", "Deployment", "web-frontend", "app", fe, "web-frontend"},
			},
			want: pipelines.Results{
				PreviousImage: "registry.example.com/web-api:1.0.0", Changed: true,
				PreviousMembers: map[string]string{"web-api": "registry.example.com/web-api:1.0.0", "web-frontend": "registry.example.com/web-frontend:2.0.0"},
			},
		},
		{
			name:    "a revert: dependents first",
			members: []tasks.SetMember{feMember, apiMember},
			results: map[string]string{
				pipelines.ResultPreviousImage: api, pipelines.ResultChanged: "true",
				pipelines.ResultPreviousMembers: `{"web-api":"` + api + `","web-frontend":"` + fe + `"}`,
			},
			wantMembers: []stepMember{
				{"web-frontend", "Deployment", "web-frontend", "app", fe, "web-frontend"},
				{"web-api", "Deployment", "web-api", "", api, "web-api"},
			},
			want: pipelines.Results{PreviousImage: api, Changed: true, PreviousMembers: map[string]string{"web-api": api, "web-frontend": fe}},
		},
		{
			name:    "the lead without a version",
			members: []tasks.SetMember{apiNoImage, feMember},
			results: map[string]string{
				pipelines.ResultPreviousImage: "", pipelines.ResultChanged: "true",
				pipelines.ResultPreviousMembers: `{"web-frontend":"registry.example.com/web-frontend:1.0.0"}`,
			},
			wantMembers: []stepMember{
				{"web-api", "Deployment", "web-api", "", "", "web-api"},
				{"web-frontend", "Deployment", "web-frontend", "app", fe, "web-frontend"},
			},
			want: pipelines.Results{Changed: true, PreviousMembers: map[string]string{"web-frontend": "registry.example.com/web-frontend:1.0.0"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex, tc, _ := newFakeTekton(t)
			finishWhenCreated(t, tc, true, tt.results)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			p := pipelines.RunParams{
				Rollout: "web-0123456789", Application: "web", Namespace: "web", Workload: "web-api",
				Image:  "web@sha256:" + strings.Repeat("0", 64),
				Canary: canary("web-api"), Members: tt.members, Timeout: 30 * time.Minute,
			}
			res, err := ex.Run(ctx, "c1", p)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if d := cmp.Diff(tt.want, res); d != "" {
				t.Errorf("results (-want +got):\n%s", d)
			}
			runs, err := tc.TektonV1().PipelineRuns("flotilla").List(ctx, metav1.ListOptions{})
			if err != nil || len(runs.Items) != 1 {
				t.Fatalf("runs: %v, %v", runs, err)
			}
			pr := runs.Items[0]
			params := tasks.Params{}
			for _, prm := range pr.Spec.Params {
				params[prm.Name] = prm.Value.StringVal
			}
			if params[pipelines.ParamSource] != "image" {
				t.Errorf("param source = %q, want image (apply-canary runs, not apply-manifests)", params[pipelines.ParamSource])
			}
			if pr.Spec.Timeouts == nil || pr.Spec.Timeouts.Pipeline == nil || pr.Spec.Timeouts.Pipeline.Duration != 30*time.Minute {
				t.Errorf("timeouts = %+v, want the set's step deadline, 30m", pr.Spec.Timeouts)
			}
			// What apply-canary's step reads: the pipeline hands it these
			// params under the same names.
			ap, err := tasks.ApplyCanaryParamsFrom(params)
			if err != nil {
				t.Fatalf("apply-canary's params of the PipelineRun: %v", err)
			}
			if ap.Workload != "web-api" || ap.Canary.Name != "web-api" {
				t.Errorf("apply-canary's workload %q, canary %q, want the lead's, web-api", ap.Workload, ap.Canary.Name)
			}
			var got []stepMember
			for _, m := range ap.Members {
				cn := ""
				if m.Canary != nil {
					cn = m.Canary.Name
				}
				got = append(got, stepMember{m.Application, m.Kind, m.Workload, m.Container, m.Image, cn})
			}
			if d := cmp.Diff(tt.wantMembers, got); d != "" {
				t.Errorf("the members apply-canary's step reads (-want +got):\n%s", d)
			}
		})
	}
}

// TestResultsPreviousMembers: the pipeline's previous-members result read
// back, as both executors read it (pipelines.ResultsFrom): none for an
// application's run, a JSON object by member for a set's, an error naming
// the result when it is not one.
func TestResultsPreviousMembers(t *testing.T) {
	tests := []struct {
		name    string
		results map[string]string
		want    map[string]string
		wantErr string
	}{
		{name: "an application's run", results: map[string]string{pipelines.ResultPreviousImage: "web:1", pipelines.ResultPreviousMembers: ""}},
		{name: "no such result", results: map[string]string{pipelines.ResultPreviousImage: "web:1"}},
		{
			name:    "a set's run",
			results: map[string]string{pipelines.ResultPreviousMembers: `{"web-api":"registry.example.com/web-api:1.0.0","web-frontend":"registry.example.com/web-frontend@sha256:` + strings.Repeat("f", 64) + `"}`},
			want:    map[string]string{"web-api": "registry.example.com/web-api:1.0.0", "web-frontend": "registry.example.com/web-frontend@sha256:" + strings.Repeat("f", 64)},
		},
		{name: "not an object", results: map[string]string{pipelines.ResultPreviousMembers: `["web-api"]`}, wantErr: "result previous-members"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pipelines.ResultsFrom(tt.results)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ResultsFrom = %v, want an error saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ResultsFrom: %v", err)
			}
			if d := cmp.Diff(tt.want, got.PreviousMembers); d != "" {
				t.Errorf("previous members (-want +got):\n%s", d)
			}
		})
	}
}
