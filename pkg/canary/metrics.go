package canary

import (
	"maps"
	"net/http"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

// MetricTemplateName names the MetricTemplate of an application's custom
// metric: application names are unique, metric names unique within one.
func MetricTemplateName(application, metric string) string { return application + "-" + metric }

// metricTemplates renders a MetricTemplate per custom metric, its query
// verbatim: Flagger fills in {{ interval }} and the other variables.
func metricTemplates(app config.Application) []*flaggerv1.MetricTemplate {
	var out []*flaggerv1.MetricTemplate
	for _, m := range app.Delivery.TrafficAnalysis.Metrics {
		cm := m.CustomMetric
		if cm == nil {
			continue
		}
		p := flaggerv1.MetricTemplateProvider{
			Type:               cm.Provider.Type,
			Address:            cm.Provider.Address,
			Region:             cm.Provider.Region,
			InsecureSkipVerify: cm.Provider.InsecureSkipVerify,
		}
		if len(cm.Provider.Headers) > 0 {
			p.Headers = http.Header{}
			for k, vs := range cm.Provider.Headers {
				p.Headers[k] = append([]string(nil), vs...)
			}
		}
		if sr := cm.Provider.SecretRef; sr != nil {
			p.SecretRef = &corev1.LocalObjectReference{Name: sr.Name}
		}
		out = append(out, &flaggerv1.MetricTemplate{
			TypeMeta: metav1.TypeMeta{APIVersion: flaggerv1.SchemeGroupVersion.String(), Kind: flaggerv1.MetricTemplateKind},
			ObjectMeta: metav1.ObjectMeta{
				Name:      MetricTemplateName(app.Name, m.Name),
				Namespace: app.Namespace,
				Labels:    Labels(app.Name),
			},
			Spec: flaggerv1.MetricTemplateSpec{Provider: p, Query: cm.Query},
		})
	}
	return out
}

// metrics renders the analysis' metric checks: built-in ones by name,
// custom ones by reference to their MetricTemplate.
func metrics(app config.Application) []flaggerv1.CanaryMetric {
	ms := app.Delivery.TrafficAnalysis.Metrics
	if len(ms) == 0 {
		return nil
	}
	out := make([]flaggerv1.CanaryMetric, 0, len(ms))
	for _, m := range ms {
		cm := flaggerv1.CanaryMetric{Name: m.Name, Interval: duration(m.Interval.Duration)}
		if tr := m.ThresholdRange; tr != nil {
			cm.ThresholdRange = &flaggerv1.CanaryThresholdRange{Min: copyPtr(tr.Min), Max: copyPtr(tr.Max)}
		}
		switch {
		case m.CustomMetric != nil:
			cm.TemplateRef = &flaggerv1.CrossNamespaceObjectReference{Name: MetricTemplateName(app.Name, m.Name), Namespace: app.Namespace}
		case m.TemplateRef != nil:
			cm.TemplateRef = &flaggerv1.CrossNamespaceObjectReference{Name: m.TemplateRef.Name, Namespace: m.TemplateRef.Namespace}
		}
		cm.TemplateVariables = maps.Clone(m.TemplateVariables)
		out = append(out, cm)
	}
	return out
}
