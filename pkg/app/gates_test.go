package app

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/gates"
)

// fakeOwners is a canaryOwners over a fixed map: "cluster/namespace/name" ->
// application and target kind.
type fakeOwners map[string][2]string

func (o fakeOwners) CanaryApplication(cluster, namespace, name string) (string, string, bool) {
	v, ok := o[cluster+"/"+namespace+"/"+name]
	return v[0], v[1], ok
}

// The canary of another workload of a git release is gated by the
// release's validations, read for its own target; a canary flotilla did
// not make for a git application of that namespace is not. Catches: a
// worker's canary promoted past a manual validation (the gates' default
// answer), as before the lookup knew the release's canaries.
func TestValidationPolicies(t *testing.T) {
	manual := &config.Validation{Items: []config.ValidationItem{{Manual: &config.ManualValidation{StatusAfterDeadline: "none"}}}}
	cfg := &config.Config{Applications: []config.Application{
		{Name: "shop", Namespace: "web", Workload: config.Workload{Kind: config.KindDeployment, Name: "shop"},
			Source: &config.Source{Git: &config.GitSource{}}, Validation: manual},
		{Name: "img", Namespace: "web", Workload: config.Workload{Kind: config.KindDeployment, Name: "img"}, Validation: manual},
	}}
	p := validationPolicies(cfg, fakeOwners{
		"c1/web/shop-worker": {"shop", config.KindDaemonSet},
		"c1/web/img-sidecar": {"img", config.KindDeployment},
		"c1/other/stray":     {"shop", config.KindDeployment},
	})
	tests := []struct {
		name, namespace, canary string
		wantOK                  bool
		wantKind                string
	}{
		{"the application's own canary", "web", "shop", true, config.KindDeployment},
		{"another workload of the git release", "web", "shop-worker", true, config.KindDaemonSet},
		{"an image application's label on a canary it did not make", "web", "img-sidecar", false, ""},
		{"a canary of the release's label in another namespace", "other", "stray", false, ""},
		{"a canary nobody made", "web", "ghost", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := p("c1", tt.namespace, tt.canary)
			if ok != tt.wantOK {
				t.Fatalf("found = %t, want %t", ok, tt.wantOK)
			}
			if !ok {
				return
			}
			want := gates.Policy{Kind: tt.wantKind, Manual: &gates.Manual{StatusAfterDeadline: "none"}}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("policy (-want +got):\n%s", d)
			}
		})
	}
}
