package canary_test

import (
	"testing"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/config"
)

func TestRenderValidationGates(t *testing.T) {
	in := canary.Input{Cluster: "c1", Rollout: "r1", Event: canary.EventHook{
		URL: "http://flotilla:8080/hooks/flagger/t0ken", Metadata: map[string]string{"cluster": "c1", "rollout": "r1"},
	}}
	type hook struct{ Type, Name, URL string }
	hooksOf := func(a config.Application) []hook {
		var hs []hook
		for _, w := range canary.Render(a, in).Canary.Spec.Analysis.Webhooks {
			hs = append(hs, hook{string(w.Type), w.Name, w.URL})
			if w.Metadata == nil || (*w.Metadata)["rollout"] != "r1" || (*w.Metadata)["cluster"] != "c1" {
				t.Errorf("hook %s: metadata %v lacks cluster and rollout", w.Name, w.Metadata)
			}
		}
		return hs
	}
	events := hook{string(flaggerv1.EventHook), canary.WebhookEvents, in.Event.URL}
	gates := []hook{
		{string(flaggerv1.ConfirmPromotionHook), canary.WebhookPromotionGate, in.Event.URL + "?gate=confirm-promotion"},
		{string(flaggerv1.RollbackHook), canary.WebhookRollbackGate, in.Event.URL + "?gate=rollback"},
	}
	tests := []struct {
		name       string
		validation *config.Validation
		want       []hook
	}{
		{"no validation", nil, []hook{events}},
		{"manual", &config.Validation{Items: []config.ValidationItem{{Manual: &config.ManualValidation{}}}}, append(gates, events)},
		{"label watch", &config.Validation{Items: []config.ValidationItem{{LabelWatch: &config.LabelWatchValidation{
			PodInvalidationLabels: map[string]string{"a": "b"}}}}}, append(gates, events)},
		// PromQL is a Flagger metric: no gate.
		{"promQL only", &config.Validation{Items: []config.ValidationItem{{PromQL: &config.PromQLValidation{Query: "up"}}}}, []hook{events}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := app()
			a.Validation = tt.validation
			if diff := cmp.Diff(tt.want, hooksOf(a)); diff != "" {
				t.Errorf("webhooks (-want +got):\n%s", diff)
			}
		})
	}
}
