package canary_test

import (
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/config"
)

func dur(d time.Duration) config.Duration { return config.Duration{Duration: d} }

// app is an application as config.Load returns it (defaults applied).
func app() config.Application {
	return config.Application{
		Name:      "shop",
		Image:     "registry.test/team/shop",
		Track:     config.TrackMinorVersion,
		Namespace: "web",
		Workload:  config.Workload{Kind: "Deployment", Name: "shop-api", Container: "api"},
		Service:   config.Service{Port: 8080},
		Delivery: config.Delivery{
			Strategy:         config.StrategyBlueGreen,
			Interval:         dur(90 * time.Second),
			Iterations:       3,
			Threshold:        2,
			ProgressDeadline: dur(10 * time.Minute),
		},
	}
}

// base is the canary Render makes of app() for cluster c1 of rollout r1,
// without webhooks.
func base() *flaggerv1.Canary {
	return &flaggerv1.Canary{
		TypeMeta: metav1.TypeMeta{APIVersion: "flagger.app/v1beta1", Kind: "Canary"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      "shop-api",
			Namespace: "web",
			Labels: map[string]string{
				"app.kubernetes.io/managed-by": "flotilla",
				"flotilla.dev/application":     "shop",
			},
			Annotations: map[string]string{"flotilla.dev/rollout": "r1"},
		},
		Spec: flaggerv1.CanarySpec{
			Provider:                "kubernetes",
			TargetRef:               flaggerv1.LocalObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "shop-api"},
			ProgressDeadlineSeconds: ptr.To(int32(600)),
			Service:                 flaggerv1.CanaryService{Port: 8080},
			Analysis: &flaggerv1.CanaryAnalysis{
				Interval:   "1m30s",
				Iterations: 3,
				Threshold:  2,
				Webhooks:   []flaggerv1.CanaryWebhook{},
			},
		},
	}
}

func md(kv ...string) *map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &m
}

func TestRender(t *testing.T) {
	hook := canary.EventHook{
		URL:      "http://flotilla.test/hooks/flagger/s3cret",
		Metadata: map[string]string{"cluster": "c1", "rollout": "r1"},
	}
	tests := []struct {
		name string
		app  func(*config.Application)
		in   canary.Input
		want func(*flaggerv1.Canary)
	}{
		{
			name: "no webhooks",
			in:   canary.Input{Cluster: "c1", Rollout: "r1"},
			want: func(*flaggerv1.Canary) {},
		},
		{
			name: "event hook",
			in:   canary.Input{Cluster: "c1", Rollout: "r1", Event: hook},
			want: func(c *flaggerv1.Canary) {
				c.Spec.Analysis.Webhooks = []flaggerv1.CanaryWebhook{{
					Type: flaggerv1.EventHook, Name: "flotilla-events", URL: "http://flotilla.test/hooks/flagger/s3cret",
					Metadata: md("cluster", "c1", "rollout", "r1"),
				}}
			},
		},
		{
			name: "event hook without metadata",
			in:   canary.Input{Cluster: "c1", Rollout: "r1", Event: canary.EventHook{URL: "http://flotilla.test/e"}},
			want: func(c *flaggerv1.Canary) {
				c.Spec.Analysis.Webhooks = []flaggerv1.CanaryWebhook{{
					Type: flaggerv1.EventHook, Name: "flotilla-events", URL: "http://flotilla.test/e", Metadata: md(),
				}}
			},
		},
		{
			name: "skip analysis",
			in:   canary.Input{Cluster: "c1", Rollout: "r1", SkipAnalysis: true},
			want: func(c *flaggerv1.Canary) { c.Spec.SkipAnalysis = true },
		},
		{
			name: "user webhooks get cluster and rollout unless they set them",
			app: func(a *config.Application) {
				a.Delivery.Webhooks = []config.Webhook{
					{Name: "gate", Type: "confirm-rollout", URL: "http://gate.test/", Timeout: dur(10 * time.Second)},
					{Name: "load", Type: "rollout", URL: "http://load.test/", Timeout: dur(1500 * time.Millisecond),
						Metadata: map[string]string{"cmd": "hey -z 1m", "cluster": "prod-eu"}},
					{Name: "smoke", Type: "pre-rollout", URL: "http://smoke.test/",
						Metadata: map[string]string{"rollout": "mine"}},
				}
			},
			in: canary.Input{Cluster: "c1", Rollout: "r1", Event: hook},
			want: func(c *flaggerv1.Canary) {
				c.Spec.Analysis.Webhooks = []flaggerv1.CanaryWebhook{
					{Type: flaggerv1.ConfirmRolloutHook, Name: "gate", URL: "http://gate.test/", Timeout: "10s",
						Metadata: md("cluster", "c1", "rollout", "r1")},
					{Type: flaggerv1.RolloutHook, Name: "load", URL: "http://load.test/", Timeout: "1.5s",
						Metadata: md("cluster", "prod-eu", "rollout", "r1", "cmd", "hey -z 1m")},
					{Type: flaggerv1.PreRolloutHook, Name: "smoke", URL: "http://smoke.test/",
						Metadata: md("cluster", "c1", "rollout", "mine")},
					{Type: flaggerv1.EventHook, Name: "flotilla-events", URL: "http://flotilla.test/hooks/flagger/s3cret",
						Metadata: md("cluster", "c1", "rollout", "r1")},
				}
			},
		},
		{
			name: "durations as Go duration strings",
			app: func(a *config.Application) {
				a.Delivery.Interval = dur(time.Second)
				a.Delivery.ProgressDeadline = dur(90 * time.Second)
			},
			in: canary.Input{Cluster: "c1", Rollout: "r1"},
			want: func(c *flaggerv1.Canary) {
				c.Spec.Analysis.Interval = "1s"
				c.Spec.ProgressDeadlineSeconds = ptr.To(int32(90))
			},
		},
		{
			name: "default container and other workload name",
			app: func(a *config.Application) {
				a.Workload = config.Workload{Kind: "Deployment", Name: "web"}
				a.Namespace = "default"
			},
			in: canary.Input{Cluster: "c2", Rollout: "r9"},
			want: func(c *flaggerv1.Canary) {
				c.Name, c.Namespace = "web", "default"
				c.Annotations["flotilla.dev/rollout"] = "r9"
				c.Spec.TargetRef.Name = "web"
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := app()
			if tt.app != nil {
				tt.app(&a)
			}
			want := base()
			tt.want(want)
			got := canary.Render(a, tt.in)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Render (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRenderDoesNotAlias checks that the rendered canary shares no map with
// the application or the input, so a caller changing one cannot change the
// other (launch renders one canary per cluster from the same config).
func TestRenderDoesNotAlias(t *testing.T) {
	a := app()
	a.Delivery.Webhooks = []config.Webhook{{Name: "gate", Type: "rollout", URL: "http://gate.test/", Metadata: map[string]string{"k": "v"}}}
	in := canary.Input{Cluster: "c1", Rollout: "r1", Event: canary.EventHook{URL: "http://e.test/", Metadata: map[string]string{"cluster": "c1"}}}

	c := canary.Render(a, in)
	(*c.Spec.Analysis.Webhooks[0].Metadata)["k"] = "changed"
	(*c.Spec.Analysis.Webhooks[1].Metadata)["cluster"] = "changed"

	if got := a.Delivery.Webhooks[0].Metadata["k"]; got != "v" {
		t.Errorf("user webhook metadata changed through the canary: %q", got)
	}
	if got := in.Event.Metadata["cluster"]; got != "c1" {
		t.Errorf("event hook metadata changed through the canary: %q", got)
	}
}
