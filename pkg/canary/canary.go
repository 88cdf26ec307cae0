package canary

import (
	"cmp"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	gatewayv1beta1 "github.com/fluxcd/flagger/pkg/apis/gatewayapi/v1beta1"
	istiov1alpha1 "github.com/fluxcd/flagger/pkg/apis/istio/common/v1alpha1"
	istiov1beta1 "github.com/fluxcd/flagger/pkg/apis/istio/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

// Names of the webhooks flotilla adds to every canary's analysis.
const (
	WebhookEvents   = "flotilla-events"    // flotilla's event hook
	WebhookLoadTest = "flotilla-load-test" // load test commands, numbered from 1

	WebhookPromotionGate = "flotilla-promotion" // confirm-promotion gate of manual / label-watch validations
	WebhookRollbackGate  = "flotilla-rollback"  // rollback gate of manual / label-watch validations
)

// flaggerProviders maps providers whose Flagger name has a version.
var flaggerProviders = map[string]string{
	config.ProviderGatewayAPI: "gatewayapi:v1",
}

// FlaggerProvider is Flagger's name of an application's traffic provider
// (config.Providers; "" is config.DefaultProvider), for a Canary's
// spec.provider and Flagger's -mesh-provider.
func FlaggerProvider(provider string) string {
	provider = cmp.Or(provider, config.DefaultProvider)
	if p, ok := flaggerProviders[provider]; ok {
		return p
	}
	return provider
}

func renderCanary(app config.Application, in Input, o Objects) *flaggerv1.Canary {
	d := app.Delivery
	provider := FlaggerProvider(d.Provider)
	c := &flaggerv1.Canary{
		TypeMeta: metav1.TypeMeta{APIVersion: flaggerv1.SchemeGroupVersion.String(), Kind: flaggerv1.CanaryKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:        app.Workload.Name,
			Namespace:   app.Namespace,
			Labels:      Labels(app.Name),
			Annotations: map[string]string{AnnotationRollout: in.Rollout},
		},
		Spec: flaggerv1.CanarySpec{
			Provider:                provider,
			TargetRef:               flaggerv1.LocalObjectReference{APIVersion: "apps/v1", Kind: app.Workload.Kind, Name: app.Workload.Name},
			ProgressDeadlineSeconds: ptr.To(int32(d.ProgressDeadline.Seconds())),
			Service:                 service(app),
			SkipAnalysis:            in.SkipAnalysis || d.SkipTrafficAnalysis,
			RevertOnDeletion:        d.RevertOnDeletion,
			Suspend:                 d.Suspend,
			Analysis:                analysis(app, in),
		},
	}
	if hpa := o.Autoscaler; hpa != nil {
		c.Spec.AutoscalerRef = &flaggerv1.AutoscalerRefernce{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler", Name: hpa.Name}
	}
	if ing := d.TrafficRouting.IngressRef; ing != nil {
		c.Spec.IngressRef = &flaggerv1.LocalObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: ing.Name}
	}
	return c
}

// service renders the service Flagger generates and the routes in front of
// it. Validation let through only the fields the provider applies.
func service(app config.Application) flaggerv1.CanaryService {
	s, r := app.Service, app.Delivery.TrafficRouting
	cs := flaggerv1.CanaryService{
		Name:          s.Name,
		Port:          s.Port,
		PortName:      s.PortName,
		AppProtocol:   s.AppProtocol,
		PortDiscovery: s.PortDiscovery == nil || *s.PortDiscovery,
		Hosts:         slices.Clone(r.Hosts),
		Delegation:    r.Delegation,
		TrafficPolicy: r.TrafficPolicy.DeepCopy(),
		Retries:       r.Retries.DeepCopy(),
		Headers:       r.Headers.DeepCopy(),
		CorsPolicy:    r.CorsPolicy.DeepCopy(),
		Apex:          metadata(s.Apex),
		Primary:       metadata(s.Primary),
		Canary:        metadata(s.Canary),
	}
	if s.TargetPort != nil {
		cs.TargetPort = *s.TargetPort
	}
	if r.Timeout.Duration != 0 {
		cs.Timeout = strconv.Itoa(int(r.Timeout.Seconds())) + "s"
	}
	for _, m := range r.URIMatch {
		cs.Match = append(cs.Match, *m.DeepCopy())
	}
	switch app.Delivery.Provider {
	case config.ProviderIstio:
		cs.Gateways = slices.Clone(r.Gateways)
	case config.ProviderGatewayAPI:
		cs.GatewayRefs = gatewayRefs(r.Gateways)
	case config.ProviderKuma:
		// Kuma learns the port's protocol from an annotation on each service.
		key := strconv.Itoa(int(s.Port)) + ".service.kuma.io/protocol"
		cs.Apex = withAnnotation(cs.Apex, key, r.Protocol)
		cs.Primary = withAnnotation(cs.Primary, key, r.Protocol)
		cs.Canary = withAnnotation(cs.Canary, key, r.Protocol)
	}
	return cs
}

// withAnnotation sets annotation k to v in md (a copy), unless the user set it.
func withAnnotation(md *flaggerv1.CustomMetadata, k, v string) *flaggerv1.CustomMetadata {
	if md == nil {
		md = &flaggerv1.CustomMetadata{}
	}
	if _, set := md.Annotations[k]; !set {
		md.Annotations = mapWith(md.Annotations, k, v)
	}
	return md
}

// gatewayRefs turns "namespace/name" (or "name") into Gateway API parent
// references.
func gatewayRefs(gateways []string) []gatewayv1beta1.ParentReference {
	var refs []gatewayv1beta1.ParentReference
	for _, g := range gateways {
		ref := gatewayv1beta1.ParentReference{Name: gatewayv1beta1.ObjectName(g)}
		if ns, name, found := strings.Cut(g, "/"); found {
			ref.Namespace = ptr.To(gatewayv1beta1.Namespace(ns))
			ref.Name = gatewayv1beta1.ObjectName(name)
		}
		refs = append(refs, ref)
	}
	return refs
}

func metadata(md *config.ServiceMetadata) *flaggerv1.CustomMetadata {
	if md == nil {
		return nil
	}
	return &flaggerv1.CustomMetadata{Labels: maps.Clone(md.Labels), Annotations: maps.Clone(md.Annotations)}
}

// mapWith returns a copy of m with k set to v.
func mapWith[V any](m map[string]V, k string, v V) map[string]V {
	out := make(map[string]V, len(m)+1)
	maps.Copy(out, m)
	out[k] = v
	return out
}

// analysis renders the strategy, its checks and its webhooks.
func analysis(app config.Application, in Input) *flaggerv1.CanaryAnalysis {
	d := app.Delivery
	r, ta := d.TrafficRouting, d.TrafficAnalysis
	a := &flaggerv1.CanaryAnalysis{
		Interval:              duration(d.Interval.Duration),
		Threshold:             d.Threshold,
		PrimaryReadyThreshold: copyPtr(ta.PrimaryReadyThreshold),
		CanaryReadyThreshold:  copyPtr(ta.CanaryReadyThreshold),
		Metrics:               metrics(app),
		Webhooks:              webhooks(app, in),
	}
	switch d.Strategy {
	case config.StrategyCanary:
		if cs := r.CanaryStrategy; cs != nil {
			a.StepWeight, a.StepWeights = cs.StepWeight, slices.Clone(cs.StepWeights)
			a.MaxWeight, a.StepWeightPromotion = cs.MaxWeight, cs.StepWeightPromotion
		}
		a.Mirror, a.MirrorWeight = r.Mirror, r.MirrorWeight
		if sa := ta.SessionAffinity; sa != nil {
			a.SessionAffinity = &flaggerv1.SessionAffinity{CookieName: sa.CookieName, MaxAge: sa.MaxAge, PrimaryCookieName: sa.PrimaryCookieName}
		}
	case config.StrategyABTesting:
		a.Iterations = d.Iterations
		a.Match = abMatch(r.Match, d.Provider)
	default:
		a.Iterations = d.Iterations
		a.Mirror, a.MirrorWeight = r.Mirror, r.MirrorWeight
	}
	return a
}

// abMatch renders A/B testing's conditions, turning a cookie into the
// header condition the provider understands.
func abMatch(ms []config.Match, provider string) []istiov1beta1.HTTPMatchRequest {
	out := make([]istiov1beta1.HTTPMatchRequest, 0, len(ms))
	for _, m := range ms {
		hm := istiov1beta1.HTTPMatchRequest{Headers: maps.Clone(m.Headers), SourceLabels: maps.Clone(m.SourceLabels)}
		if m.Cookie != "" {
			hm.Headers = mapWith(hm.Headers, "cookie", cookieMatch(m.Cookie, provider))
		}
		out = append(out, hm)
	}
	return out
}

// cookieMatch matches a Cookie header carrying name=always.
func cookieMatch(name, provider string) istiov1alpha1.StringMatch {
	switch provider {
	case config.ProviderNGINX:
		// nginx's canary-by-cookie: the cookie's name; its value must be "always".
		return istiov1alpha1.StringMatch{Exact: name}
	case config.ProviderContour:
		// Flagger turns a contour suffix into a "contains" condition.
		return istiov1alpha1.StringMatch{Suffix: name + "=always"}
	default:
		return istiov1alpha1.StringMatch{Regex: "^(.*?;)?(" + regexp.QuoteMeta(name) + "=always)(;.*)?$"}
	}
}

// webhooks renders the user's webhooks, the load test's and flotilla's
// event hook, in that order.
func webhooks(app config.Application, in Input) []flaggerv1.CanaryWebhook {
	d := app.Delivery
	lt := d.TrafficAnalysis.Webhooks
	hooks := make([]flaggerv1.CanaryWebhook, 0, len(d.Webhooks)+len(lt.Command)+1)
	for _, w := range d.Webhooks {
		h := flaggerv1.CanaryWebhook{
			Type: flaggerv1.HookType(w.Type), Name: w.Name, URL: w.URL,
			Retries: w.Retries, DisableTLS: w.DisableTLS, MuteAlert: w.MuteAlert,
		}
		if w.Timeout.Duration > 0 {
			h.Timeout = duration(w.Timeout.Duration)
		}
		// Gates learn which cluster and rollout they are asked about, unless
		// the user set those keys.
		md := map[string]string{"cluster": in.Cluster, "rollout": in.Rollout}
		maps.Copy(md, w.Metadata)
		h.Metadata = &md
		hooks = append(hooks, h)
	}
	url := lt.URL
	if url == "" && d.TestLoader {
		url = LoadTesterURL(app)
	}
	for i, cmd := range lt.Command {
		h := flaggerv1.CanaryWebhook{
			Type: flaggerv1.RolloutHook, Name: WebhookLoadTest + "-" + strconv.Itoa(i+1), URL: url,
			Metadata: &map[string]string{"type": "cmd", "cmd": cmd},
		}
		if lt.Timeout.Duration > 0 {
			h.Timeout = duration(lt.Timeout.Duration)
		}
		hooks = append(hooks, h)
	}
	if in.Event.URL != "" {
		md := maps.Clone(in.Event.Metadata)
		if md == nil {
			md = map[string]string{}
		}
		hooks = append(hooks, validationGates(app, in)...)
		hooks = append(hooks, flaggerv1.CanaryWebhook{Type: flaggerv1.EventHook, Name: WebhookEvents, URL: in.Event.URL, Metadata: &md})
	}
	return hooks
}

// validationGates are the hooks through which flotilla decides the
// application's manual and label-watch validations (pkg/gates): Flagger asks
// flotilla's flagger receiver before promoting (confirm-promotion) and at
// every analysis step (rollback), naming the gate in the URL.
func validationGates(app config.Application, in Input) []flaggerv1.CanaryWebhook {
	if !ValidatedByGates(app) {
		return nil
	}
	gate := func(typ flaggerv1.HookType, name string) flaggerv1.CanaryWebhook {
		md := maps.Clone(in.Event.Metadata)
		if md == nil {
			md = map[string]string{}
		}
		return flaggerv1.CanaryWebhook{
			Type: typ, Name: name, URL: in.Event.URL + "?gate=" + string(typ),
			Timeout: gateTimeout, Metadata: &md,
		}
	}
	return []flaggerv1.CanaryWebhook{
		gate(flaggerv1.ConfirmPromotionHook, WebhookPromotionGate),
		gate(flaggerv1.RollbackHook, WebhookRollbackGate),
	}
}

// gateTimeout bounds flotilla's answer to a gate call: it reads its store
// and, for label watch, one Deployment and its pods.
const gateTimeout = "10s"

// ValidatedByGates reports whether app has validations flotilla decides
// through gates (manual, label watch).
func ValidatedByGates(app config.Application) bool {
	if app.Validation == nil {
		return false
	}
	for _, it := range app.Validation.Items {
		if it.Manual != nil || it.LabelWatch != nil {
			return true
		}
	}
	return false
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
