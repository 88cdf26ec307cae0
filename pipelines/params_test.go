package pipelines_test

import (
	"context"
	"testing"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pipelines/tasks"
)

// ApplyCanary (the executors' method for apply-canary alone) hands the
// executor's Run every parameter it was given, a release set's members
// included, and returns every result, the members' previous images
// included: the params the Run encodes are apply-canary's own.
func TestApplyCanaryKeepsEveryParamAndResult(t *testing.T) {
	canary := &flaggerv1.Canary{ObjectMeta: metav1.ObjectMeta{Name: "shop-api"}}
	p := tasks.ApplyCanaryParams{
		Rollout: "r1", Namespace: "shop", Kind: "Deployment", Workload: "shop-api", Container: "api",
		Image: "registry.test/shop/api@sha256:1", Canary: canary, Restart: "r1/1",
		Members: []tasks.SetMember{
			{Application: "shop-api", Kind: "Deployment", Workload: "shop-api", Image: "registry.test/shop/api@sha256:1", Canary: canary},
			{Application: "shop-frontend", Kind: "Deployment", Workload: "shop-frontend", Image: "registry.test/shop/frontend@sha256:2"},
		},
	}
	want, err := p.ParamsOf()
	if err != nil {
		t.Fatal(err)
	}
	ran := pipelines.Results{PreviousImage: "registry.test/shop/api@sha256:0", Changed: true,
		PreviousMembers: map[string]string{"shop-api": "registry.test/shop/api@sha256:0"}}
	var got map[string]string
	res, err := pipelines.ApplyCanary(t.Context(), func(_ context.Context, _ string, rp pipelines.RunParams) (pipelines.Results, error) {
		var err error
		got, err = rp.PipelineParams()
		return ran, err
	}, "c1", p)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("param %s: the run got %q, apply-canary's own is %q", k, got[k], v)
		}
	}
	if diff := cmp.Diff(tasks.ApplyCanaryResult{PreviousImage: ran.PreviousImage, Changed: true, PreviousMembers: ran.PreviousMembers}, res); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
}
