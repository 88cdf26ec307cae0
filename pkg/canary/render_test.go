package canary_test

import (
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	istiov1alpha1 "github.com/fluxcd/flagger/pkg/apis/istio/common/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
			Service:                 flaggerv1.CanaryService{Port: 8080, PortDiscovery: true},
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
					{Type: flaggerv1.RolloutHook, Name: "load", URL: "http://load.test/", Timeout: "1500ms",
						Metadata: md("cluster", "prod-eu", "rollout", "r1", "cmd", "hey -z 1m")},
					{Type: flaggerv1.PreRolloutHook, Name: "smoke", URL: "http://smoke.test/",
						Metadata: md("cluster", "c1", "rollout", "mine")},
					{Type: flaggerv1.EventHook, Name: "flotilla-events", URL: "http://flotilla.test/hooks/flagger/s3cret",
						Metadata: md("cluster", "c1", "rollout", "r1")},
				}
			},
		},
		{
			name: "durations as Flagger's CRD accepts them",
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
			name: "hours as minutes, which Flagger's CRD accepts",
			app: func(a *config.Application) {
				a.Delivery.Interval = dur(90 * time.Minute)
				a.Delivery.ProgressDeadline = dur(2 * time.Hour)
				a.Delivery.Webhooks = []config.Webhook{{Name: "w", Type: "rollout", URL: "http://w.test/", Timeout: dur(time.Hour + 500*time.Microsecond)}}
			},
			in: canary.Input{Cluster: "c1", Rollout: "r1"},
			want: func(c *flaggerv1.Canary) {
				c.Spec.Analysis.Interval = "90m"
				c.Spec.ProgressDeadlineSeconds = ptr.To(int32(7200))
				c.Spec.Analysis.Webhooks = []flaggerv1.CanaryWebhook{{Type: flaggerv1.RolloutHook, Name: "w", URL: "http://w.test/",
					Timeout: "3600001ms", Metadata: md("cluster", "c1", "rollout", "r1")}}
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
			got := canary.Render(a, tt.in).Canary
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

	c := canary.Render(a, in).Canary
	(*c.Spec.Analysis.Webhooks[0].Metadata)["k"] = "changed"
	(*c.Spec.Analysis.Webhooks[1].Metadata)["cluster"] = "changed"

	if got := a.Delivery.Webhooks[0].Metadata["k"]; got != "v" {
		t.Errorf("user webhook metadata changed through the canary: %q", got)
	}
	if got := in.Event.Metadata["cluster"]; got != "c1" {
		t.Errorf("event hook metadata changed through the canary: %q", got)
	}
}

// TestRenderDoesNotAliasPolicy checks the same of the policy's own maps and
// slices, which the objects copy.
func TestRenderDoesNotAliasPolicy(t *testing.T) {
	a := app()
	a.Delivery.Provider, a.Delivery.Strategy = config.ProviderIstio, config.StrategyABTesting
	a.Service.Apex = &config.ServiceMetadata{Labels: map[string]string{"tier": "web"}}
	a.Delivery.TrafficRouting.Hosts = []string{"a.example.com"}
	a.Delivery.TrafficRouting.Match = []config.Match{{Headers: map[string]istiov1alpha1.StringMatch{"x-canary": {Exact: "a"}}, Cookie: "c"}}
	a.Delivery.TrafficAnalysis.Metrics = []config.Metric{{
		Name: "m", ThresholdRange: &config.ThresholdRange{Max: ptr.To(1.0)}, TemplateVariables: map[string]string{"k": "v"},
		CustomMetric: &config.CustomMetric{Provider: config.MetricProvider{Type: "prometheus", Headers: map[string][]string{"X-H": {"v"}}}, Query: "up"},
	}}
	o := canary.Render(a, canary.Input{})
	s, an := &o.Canary.Spec.Service, o.Canary.Spec.Analysis
	s.Apex.Labels["tier"] = "changed"
	s.Hosts[0] = "changed"
	an.Match[0].Headers["x-canary"] = istiov1alpha1.StringMatch{Exact: "changed"}
	an.Metrics[0].TemplateVariables["k"] = "changed"
	*an.Metrics[0].ThresholdRange.Max = 2
	o.MetricTemplates[0].Spec.Provider.Headers["X-H"][0] = "changed"

	want := app()
	want.Delivery.Provider, want.Delivery.Strategy = config.ProviderIstio, config.StrategyABTesting
	want.Service.Apex = &config.ServiceMetadata{Labels: map[string]string{"tier": "web"}}
	want.Delivery.TrafficRouting.Hosts = []string{"a.example.com"}
	want.Delivery.TrafficRouting.Match = []config.Match{{Headers: map[string]istiov1alpha1.StringMatch{"x-canary": {Exact: "a"}}, Cookie: "c"}}
	want.Delivery.TrafficAnalysis.Metrics = []config.Metric{{
		Name: "m", ThresholdRange: &config.ThresholdRange{Max: ptr.To(1.0)}, TemplateVariables: map[string]string{"k": "v"},
		CustomMetric: &config.CustomMetric{Provider: config.MetricProvider{Type: "prometheus", Headers: map[string][]string{"X-H": {"v"}}}, Query: "up"},
	}}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("the policy changed through the objects (-want +got):\n%s", diff)
	}
}

func TestSelector(t *testing.T) {
	got := canary.Selector("shop").String()
	if want := "app.kubernetes.io/managed-by=flotilla,flotilla.dev/application=shop"; got != want {
		t.Errorf("Selector = %q, want %q", got, want)
	}
	a := app()
	a.Delivery.Autoscale = &config.Autoscale{MinReplicas: 1, MaxReplicas: 2}
	a.Delivery.TestLoader = true
	a.Delivery.TrafficAnalysis.Metrics = []config.Metric{{Name: "m", CustomMetric: &config.CustomMetric{Query: "up"}}}
	objs := canary.Render(a, canary.Input{}).List()
	if len(objs) != 5 {
		t.Errorf("Render made %d objects, want 5: the load tester's two, a MetricTemplate, an autoscaler, the canary", len(objs))
	}
	for _, o := range objs {
		m, err := meta.Accessor(o)
		if err != nil {
			t.Fatal(err)
		}
		if !canary.Selector("shop").Matches(labels.Set(m.GetLabels())) {
			t.Errorf("%T %s: labels %v do not match the selector", o, m.GetName(), m.GetLabels())
		}
	}
}
