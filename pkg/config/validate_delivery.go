package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	istiov1alpha1 "github.com/fluxcd/flagger/pkg/apis/istio/common/v1alpha1"
	"golang.org/x/net/http/httpguts"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// LoadTesterPrefix starts the name of the load tester flotilla installs for
// an application with testLoader: true ("loadtester-<application>").
const LoadTesterPrefix = "loadtester-"

// delivery checks the delivery policy of the application at appPath
// ("applications[i]"), and its service beyond the port.
func (v *validator) delivery(appPath string, a Application) {
	path := appPath + ".delivery"
	d := &a.Delivery
	p := deliveryPaths(path, d)

	v.service(appPath+".service", a.Service)
	v.aliases(path, d)

	v.oneOf(p.provider, "provider", d.Provider, Providers)
	v.oneOf(path+".strategy", "strategy", d.Strategy, Strategies)
	known := slices.Contains(Providers, d.Provider) && slices.Contains(Strategies, d.Strategy)
	if known && !Supports(d.Provider, d.Strategy) {
		v.addf(strategyPath(path, d), "%s", unsupported(d.Provider, d.Strategy))
	}

	v.atLeast(p.interval, d.Interval.Duration, time.Second)
	switch {
	case d.Strategy == StrategyCanary && d.Iterations != 0:
		v.addf(p.iterations, "a canary advances by stepWeight, not by iterations; remove it, or use strategy blueGreen or abTesting")
	case d.Strategy != StrategyCanary && d.Iterations < 1:
		v.addf(p.iterations, "must be at least 1, got %d", d.Iterations)
	}
	if d.Threshold < 1 {
		v.addf(p.threshold, "must be at least 1, got %d", d.Threshold)
	}
	v.atLeast(p.progressDeadline, d.ProgressDeadline.Duration, time.Second)
	if d.Deadline.Duration != 0 {
		v.atLeast(path+".deadline", d.Deadline.Duration, time.Second)
	}

	v.trafficRouting(path+".trafficRouting", p, d)
	v.trafficAnalysis(path, a)
	if as := d.Autoscale; as != nil {
		ap := path + ".autoscale"
		if a.Workload.Kind == KindDaemonSet {
			v.addf(ap, "a DaemonSet runs one pod per node and cannot be autoscaled; remove autoscale, or use a Deployment")
		}
		if as.MinReplicas < 1 {
			v.addf(ap+".minReplicas", "must be at least 1, got %d", as.MinReplicas)
		}
		if as.MaxReplicas < max(as.MinReplicas, 1) {
			v.addf(ap+".maxReplicas", "must be at least minReplicas (%d), got %d", as.MinReplicas, as.MaxReplicas)
		}
	}
	if d.TestLoader {
		if n := LoadTesterPrefix + a.Name; len(n) > validation.DNS1035LabelMaxLength {
			v.addf(path+".testLoader", "the load tester's service would be named %q, longer than %d characters; shorten the application's name to at most %d",
				n, validation.DNS1035LabelMaxLength, validation.DNS1035LabelMaxLength-len(LoadTesterPrefix))
		}
	}
	v.webhooks(path+".webhooks", d.Webhooks)
}

// paths holds where the user wrote fields that have two names, so problems
// name the one they used.
type paths struct {
	provider, interval, threshold, iterations, progressDeadline, timeout string
}

func deliveryPaths(path string, d *Delivery) paths {
	pick := func(kurator bool, kpath, fpath string) string {
		if kurator {
			return path + kpath
		}
		return path + fpath
	}
	r, an := &d.TrafficRouting, &d.TrafficAnalysis
	return paths{
		provider:         pick(d.TrafficRoutingProvider != "" && d.Provider == d.TrafficRoutingProvider, ".trafficRoutingProvider", ".provider"),
		interval:         pick(an.CheckIntervalSeconds != 0, ".trafficAnalysis.checkIntervalSeconds", ".interval"),
		threshold:        pick(an.CheckFailedTimes != 0, ".trafficAnalysis.checkFailedTimes", ".threshold"),
		iterations:       pick(r.AnalysisTimes != 0, ".trafficRouting.analysisTimes", ".iterations"),
		progressDeadline: pick(d.RolloutTimeoutSeconds != 0, ".rolloutTimeoutSeconds", ".progressDeadline"),
		timeout:          pick(r.TimeoutSeconds != 0, ".trafficRouting.timeoutSeconds", ".trafficRouting.timeout"),
	}
}

// aliases reports fields set under both their names, to different values.
// Defaults copied Kurator's name into flotilla's when only it was set.
func (v *validator) aliases(path string, d *Delivery) {
	conflict := func(kpath, fpath string, fvalue any) {
		v.addf(path+kpath, "conflicts with %s (%v); set only one of them", path+fpath, fvalue)
	}
	seconds := func(n int, d Duration) bool { return n != 0 && time.Duration(n)*time.Second != d.Duration }
	r, an := &d.TrafficRouting, &d.TrafficAnalysis
	if d.TrafficRoutingProvider != "" && d.TrafficRoutingProvider != d.Provider {
		conflict(".trafficRoutingProvider", ".provider", d.Provider)
	}
	if seconds(an.CheckIntervalSeconds, d.Interval) {
		conflict(".trafficAnalysis.checkIntervalSeconds", ".interval", d.Interval)
	}
	if an.CheckFailedTimes != 0 && an.CheckFailedTimes != d.Threshold {
		conflict(".trafficAnalysis.checkFailedTimes", ".threshold", d.Threshold)
	}
	if r.AnalysisTimes != 0 && r.AnalysisTimes != d.Iterations {
		conflict(".trafficRouting.analysisTimes", ".iterations", d.Iterations)
	}
	if seconds(d.RolloutTimeoutSeconds, d.ProgressDeadline) {
		conflict(".rolloutTimeoutSeconds", ".progressDeadline", d.ProgressDeadline)
	}
	if seconds(r.TimeoutSeconds, r.Timeout) {
		conflict(".trafficRouting.timeoutSeconds", ".trafficRouting.timeout", r.Timeout)
	}
	for i, m := range an.Metrics {
		if seconds(m.IntervalSeconds, m.Interval) {
			mp := fmt.Sprintf(".trafficAnalysis.metrics[%d]", i)
			conflict(mp+".intervalSeconds", mp+".interval", m.Interval)
		}
	}
	if w := an.Webhooks; seconds(w.TimeoutSeconds, w.Timeout) {
		conflict(".trafficAnalysis.webhooks.timeoutSeconds", ".trafficAnalysis.webhooks.timeout", w.Timeout)
	}
}

// strategyPath locates a strategy the provider cannot run at what asks for
// it: the canary's weights, A/B testing's match, else the strategy itself.
func strategyPath(path string, d *Delivery) string {
	switch {
	case d.Strategy == StrategyCanary && d.TrafficRouting.CanaryStrategy != nil:
		return path + ".trafficRouting.canaryStrategy"
	case d.Strategy == StrategyABTesting && len(d.TrafficRouting.Match) > 0:
		return path + ".trafficRouting.match"
	}
	return path + ".strategy"
}

var strategyNames = map[string]string{
	StrategyCanary:    "weighted canaries",
	StrategyABTesting: "A/B testing",
	StrategyBlueGreen: "blue/green",
}

// unsupported says that provider cannot run strategy, and what can.
func unsupported(provider, strategy string) string {
	if provider == ProviderKubernetes {
		what := "a mesh or ingress provider"
		if strategy == StrategyABTesting {
			what = joinOr(providersFor(strategy))
		}
		return fmt.Sprintf("the kubernetes provider supports blue/green only; use %s for %s", what, strategyNames[strategy])
	}
	alternatives := ""
	for _, s := range ProviderStrategies[provider] {
		alternatives += fmt.Sprintf(", or strategy %s", s)
	}
	return fmt.Sprintf("Flagger runs %s with %s, not %s; use one of those providers%s",
		strategyNames[strategy], joinOr(providersFor(strategy)), provider, alternatives)
}

func providersFor(strategy string) []string {
	var ps []string
	for _, p := range Providers {
		if p != ProviderKubernetes && Supports(p, strategy) {
			ps = append(ps, p)
		}
	}
	return ps
}

func joinOr(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// routingFields lists the trafficRouting fields only some providers apply.
var routingFields = []struct {
	name      string
	set       func(*TrafficRouting) bool
	providers []string
}{
	{"timeout", func(r *TrafficRouting) bool { return r.Timeout.Duration != 0 }, []string{ProviderIstio, ProviderContour, ProviderGatewayAPI}},
	{"gateways", func(r *TrafficRouting) bool { return len(r.Gateways) > 0 }, []string{ProviderIstio, ProviderGatewayAPI}},
	{"hosts", func(r *TrafficRouting) bool { return len(r.Hosts) > 0 }, []string{ProviderIstio, ProviderGatewayAPI}},
	{"retries", func(r *TrafficRouting) bool { return r.Retries != nil }, []string{ProviderIstio, ProviderContour}},
	{"headers", func(r *TrafficRouting) bool { return r.Headers != nil }, []string{ProviderIstio, ProviderGatewayAPI}},
	{"corsPolicy", func(r *TrafficRouting) bool { return r.CorsPolicy != nil }, []string{ProviderIstio}},
	{"trafficPolicy", func(r *TrafficRouting) bool { return r.TrafficPolicy != nil }, []string{ProviderIstio}},
	{"delegation", func(r *TrafficRouting) bool { return r.Delegation }, []string{ProviderIstio}},
	{"uriMatch", func(r *TrafficRouting) bool { return len(r.URIMatch) > 0 }, []string{ProviderIstio, ProviderContour, ProviderGatewayAPI}},
	{"protocol", func(r *TrafficRouting) bool { return r.Protocol != "" }, []string{ProviderKuma}},
	{"ingressRef", func(r *TrafficRouting) bool { return r.IngressRef != nil }, []string{ProviderNGINX}},
	{"mirror", func(r *TrafficRouting) bool { return r.Mirror }, []string{ProviderIstio, ProviderGatewayAPI}},
	{"mirrorWeight", func(r *TrafficRouting) bool { return r.MirrorWeight != 0 }, []string{ProviderIstio}},
}

// kumaProtocols are the protocols Kuma accepts for a service port.
var kumaProtocols = []string{"http", "http2", "grpc", "tcp", "kafka"}

func (v *validator) trafficRouting(path string, p paths, d *Delivery) {
	r := &d.TrafficRouting
	if slices.Contains(Providers, d.Provider) {
		for _, f := range routingFields {
			if !f.set(r) || slices.Contains(f.providers, d.Provider) {
				continue
			}
			fp := path + "." + f.name
			if f.name == "timeout" {
				fp = p.timeout
			}
			v.addf(fp, "the %s provider does not apply %s, only %s; remove it, or use one of those providers",
				d.Provider, f.name, joinOr(f.providers))
		}
	}
	if t := r.Timeout.Duration; t != 0 && (t < time.Second || t%time.Second != 0) {
		// Istio takes seconds, Gateway API no fractions: whole seconds suit both.
		v.addf(p.timeout, "must be a whole number of seconds, at least 1s, got %s", t)
	}
	for i, g := range r.Gateways {
		v.gateway(fmt.Sprintf("%s.gateways[%d]", path, i), g, d.Provider)
	}
	for i, h := range r.Hosts {
		if strings.TrimSpace(h) == "" || strings.ContainsAny(h, " /") {
			v.addf(fmt.Sprintf("%s.hosts[%d]", path, i), "invalid host %q: want a host name such as \"app.example.com\" or \"*.example.com\"", h)
		}
	}
	if r.Delegation && (len(r.Gateways) > 0 || len(r.Hosts) > 0) {
		v.addf(path+".delegation", "a delegate VirtualService has no gateways or hosts of its own (the delegating one has them); remove gateways and hosts, or delegation")
	}
	if rt := r.Retries; rt != nil {
		if rt.Attempts < 1 {
			v.addf(path+".retries.attempts", "must be at least 1, got %d", rt.Attempts)
		}
		if rt.PerTryTimeout != "" {
			if pt, err := time.ParseDuration(rt.PerTryTimeout); err != nil || pt <= 0 {
				v.addf(path+".retries.perTryTimeout", "invalid duration %q: want a positive Go duration such as \"5s\"", rt.PerTryTimeout)
			}
		}
	}
	if r.Protocol != "" && d.Provider == ProviderKuma && !slices.Contains(kumaProtocols, r.Protocol) {
		v.addf(path+".protocol", "unknown Kuma protocol %q; want one of %s", r.Protocol, strings.Join(kumaProtocols, ", "))
	}
	switch {
	case d.Provider == ProviderNGINX && r.IngressRef == nil:
		v.addf(path+".ingressRef", "required by the nginx provider: the name of the Ingress that routes to the service")
	case r.IngressRef != nil:
		v.subdomain(path+".ingressRef.name", r.IngressRef.Name)
	}
	if d.Provider == ProviderGatewayAPI && len(r.Gateways) == 0 {
		v.addf(path+".gateways", "required by the gatewayapi provider: the Gateways the HTTPRoute attaches to, as namespace/name")
	}

	v.canaryStrategy(path+".canaryStrategy", d)
	switch {
	case len(r.Match) > 0 && d.Strategy != StrategyABTesting:
		v.addf(path+".match", "only A/B testing routes requests by match; remove it, or set strategy: abTesting")
	case len(r.Match) == 0 && d.Strategy == StrategyABTesting:
		v.addf(path+".match", "required for A/B testing: the headers or cookies of the requests that go to the canary")
	case d.Provider == ProviderGatewayAPI && d.Strategy == StrategyABTesting && r.Timeout.Duration == 0:
		// Flagger (1.41) then writes the HTTPRoute's default rule with an
		// empty request timeout at every analysis step, which the Gateway
		// API's CRD refuses: the analysis never advances.
		v.addf(path+".timeout", "required for A/B testing on the gatewayapi provider: Flagger writes the route's request timeout at every step, and an empty one is refused by the API server; set it, such as 30s")
	}
	v.matches(path+".match", r.Match, d.Provider)
	if r.Mirror && d.Strategy == StrategyABTesting {
		v.addf(path+".mirror", "mirroring precedes canary and blue/green analysis, not A/B testing; remove it, or use strategy canary or blueGreen")
	}
	switch mw := r.MirrorWeight; {
	case mw != 0 && !r.Mirror:
		v.addf(path+".mirrorWeight", "takes effect with mirror: true only; set mirror, or remove mirrorWeight")
	case mw < 0 || mw > 100:
		v.addf(path+".mirrorWeight", "must be 1..100, got %d", mw)
	}
}

// gateway checks one entry of trafficRouting.gateways.
func (v *validator) gateway(path, g, provider string) {
	if provider == ProviderIstio && g == "mesh" {
		return
	}
	ns, name, found := strings.Cut(g, "/")
	if !found {
		ns, name = "", g
	}
	ok := name != "" && len(validation.IsDNS1123Subdomain(name)) == 0 && (ns == "" || len(validation.IsDNS1123Label(ns)) == 0)
	if !ok {
		v.addf(path, "invalid gateway %q: want namespace/name, or a name in the application's namespace", g)
	}
}

func (v *validator) canaryStrategy(path string, d *Delivery) {
	cs := d.TrafficRouting.CanaryStrategy
	if cs == nil {
		return
	}
	if d.Strategy != StrategyCanary {
		v.addf(path, "only the canary strategy shifts traffic by weight; remove canaryStrategy, or set strategy: canary")
		return
	}
	if !Supports(d.Provider, StrategyCanary) {
		return // reported: the weights do not matter, and have no defaults
	}
	percent := func(p string, w int) {
		if w < 1 || w > 100 {
			v.addf(p, "must be a percentage 1..100, got %d", w)
		}
	}
	switch {
	case cs.StepWeight != 0 && len(cs.StepWeights) > 0:
		v.addf(path, "set stepWeight or stepWeights, not both")
	case len(cs.StepWeights) > 0:
		for i, w := range cs.StepWeights {
			wp := fmt.Sprintf("%s.stepWeights[%d]", path, i)
			percent(wp, w)
			if i > 0 && w <= cs.StepWeights[i-1] {
				v.addf(wp, "steps must increase: %d follows %d", w, cs.StepWeights[i-1])
			}
		}
		if cs.MaxWeight != 0 {
			v.addf(path+".maxWeight", "with stepWeights the last step is the maximum weight; remove maxWeight")
		}
	default:
		percent(path+".stepWeight", cs.StepWeight)
		percent(path+".maxWeight", cs.MaxWeight)
		if cs.MaxWeight < cs.StepWeight {
			v.addf(path+".maxWeight", "is below stepWeight (%d), so the canary would never get traffic; raise it", cs.StepWeight)
		}
	}
	if cs.StepWeightPromotion != 0 {
		percent(path+".stepWeightPromotion", cs.StepWeightPromotion)
	}
}

// matches checks A/B testing's conditions against what the provider can
// match on.
func (v *validator) matches(path string, ms []Match, provider string) {
	var headers, cookies []string // nginx routes by one of each
	for i, m := range ms {
		mp := fmt.Sprintf("%s[%d]", path, i)
		if len(m.Headers) == 0 && m.Cookie == "" && len(m.SourceLabels) == 0 {
			v.addf(mp, "an empty match sends every request to the canary; give headers, a cookie or sourceLabels")
		}
		for _, name := range sortedKeys(m.Headers) {
			hp := fmt.Sprintf("%s.headers[%q]", mp, name)
			if name != strings.ToLower(name) || !httpguts.ValidHeaderFieldName(name) {
				v.addf(hp, "invalid header name %q: want a lower-case HTTP header name", name)
			}
			v.stringMatch(hp, m.Headers[name], provider, name == "cookie")
			if name == "cookie" {
				cookies = append(cookies, hp)
			} else {
				headers = append(headers, hp)
			}
		}
		if m.Cookie != "" {
			cp := mp + ".cookie"
			cookies = append(cookies, cp)
			if strings.ContainsAny(m.Cookie, "=; \t\"") || !httpguts.ValidHeaderFieldName(m.Cookie) {
				v.addf(cp, "invalid cookie name %q", m.Cookie)
			}
			if _, ok := m.Headers["cookie"]; ok {
				v.addf(cp, "set cookie or headers.cookie, not both")
			}
		}
		if len(m.SourceLabels) > 0 {
			if provider != ProviderIstio {
				v.addf(mp+".sourceLabels", "only the istio provider matches by source labels; remove them")
			}
			v.labels(mp+".sourceLabels", m.SourceLabels)
		}
	}
	if provider == ProviderNGINX {
		for _, hp := range tail(headers) {
			v.addf(hp, "nginx routes to the canary by one header and one cookie; remove this one")
		}
		for _, cp := range tail(cookies) {
			v.addf(cp, "nginx routes to the canary by one header and one cookie; remove this one")
		}
	}
}

func tail(s []string) []string {
	if len(s) < 2 {
		return nil
	}
	return s[1:]
}

// stringMatch checks one header condition.
func (v *validator) stringMatch(path string, m istiov1alpha1.StringMatch, provider string, cookie bool) {
	var kinds []string
	for _, k := range []struct{ kind, value string }{{"exact", m.Exact}, {"prefix", m.Prefix}, {"suffix", m.Suffix}, {"regex", m.Regex}} {
		if k.value != "" {
			kinds = append(kinds, k.kind)
		}
	}
	if len(kinds) != 1 {
		v.addf(path, "set exactly one of exact, prefix, suffix and regex")
		return
	}
	if m.Regex != "" {
		if _, err := regexp.Compile(m.Regex); err != nil {
			v.addf(path+".regex", "invalid RE2 regular expression: %v", err)
		}
	}
	supported := map[string][]string{
		ProviderContour:    {"exact", "prefix", "suffix"},
		ProviderGatewayAPI: {"exact", "regex"},
		ProviderNGINX:      {"exact", "regex"},
	}[provider]
	if provider == ProviderNGINX && cookie {
		supported = []string{"exact"}
	}
	if supported != nil && !slices.Contains(supported, kinds[0]) {
		v.addf(path, "the %s provider matches by %s, not %s", provider, joinOr(supported), kinds[0])
	}
}

// trafficAnalysis checks the analysis: readiness thresholds, metrics, load
// test and session affinity.
func (v *validator) trafficAnalysis(path string, a Application) {
	d := &a.Delivery
	an := &d.TrafficAnalysis
	ap := path + ".trafficAnalysis"
	for _, t := range []struct {
		name  string
		value *int
	}{{"primaryReadyThreshold", an.PrimaryReadyThreshold}, {"canaryReadyThreshold", an.CanaryReadyThreshold}} {
		if t.value != nil && (*t.value < 1 || *t.value > 100) {
			v.addf(ap+"."+t.name, "must be a percentage 1..100, got %d", *t.value)
		}
	}
	seen := map[string]string{}
	for i, m := range an.Metrics {
		v.metric(fmt.Sprintf("%s.metrics[%d]", ap, i), m, seen)
	}
	v.loadTest(ap+".webhooks", an.Webhooks, d.TestLoader)
	if sa := an.SessionAffinity; sa != nil {
		sp := ap + ".sessionAffinity"
		if d.Strategy != StrategyCanary {
			v.addf(sp, "session affinity keeps users on a weighted canary; remove it, or set strategy: canary")
		}
		if slices.Contains(Providers, d.Provider) && d.Provider != ProviderIstio && d.Provider != ProviderGatewayAPI {
			v.addf(sp, "the %s provider does not apply session affinity, only istio or gatewayapi; remove it, or use one of those providers", d.Provider)
		}
		if sa.CookieName == "" {
			v.addf(sp+".cookieName", "required: the cookie that keeps a user on the canary")
		} else if strings.ContainsAny(sa.CookieName, "=; \t\"") || !httpguts.ValidHeaderFieldName(sa.CookieName) {
			v.addf(sp+".cookieName", "invalid cookie name %q", sa.CookieName)
		}
		if sa.MaxAge < 0 {
			v.addf(sp+".maxAge", "must be positive (seconds), got %d", sa.MaxAge)
		}
		if sa.PrimaryCookieName != "" {
			switch {
			case d.Provider != ProviderGatewayAPI:
				v.addf(sp+".primaryCookieName", "only the gatewayapi provider keeps users on the primary; remove it")
			case sa.PrimaryCookieName == sa.CookieName:
				v.addf(sp+".primaryCookieName", "must differ from cookieName")
			}
		}
	}
}

// metricFuncs are the functions Flagger offers metric queries.
var metricFuncs = (&flaggerv1.MetricTemplateModel{}).TemplateFunctions()

func (v *validator) metric(path string, m Metric, seen map[string]string) {
	ip := path + ".interval"
	if m.IntervalSeconds != 0 {
		ip = path + ".intervalSeconds"
	}
	switch {
	case m.Name == "":
		v.addf(path+".name", "required")
	case len(m.Name) > 63 || !dnsLabel.MatchString(m.Name):
		v.dnsLabel(path+".name", "metric", m.Name)
	case seen[m.Name] != "":
		v.addf(path+".name", "duplicate metric name %q (first used by %s)", m.Name, seen[m.Name])
	default:
		seen[m.Name] = path
	}
	v.atLeast(ip, m.Interval.Duration, time.Second)
	switch tr := m.ThresholdRange; {
	case tr == nil || (tr.Min == nil && tr.Max == nil):
		v.addf(path+".thresholdRange", "required: min, max or both; a metric without a range never fails")
	case tr.Min != nil && tr.Max != nil && *tr.Min > *tr.Max:
		v.addf(path+".thresholdRange", "min (%g) is above max (%g), so the metric always fails", *tr.Min, *tr.Max)
	}
	switch {
	case m.CustomMetric != nil && m.TemplateRef != nil:
		v.addf(path, "set customMetric or templateRef, not both")
	case m.CustomMetric == nil && m.TemplateRef == nil:
		if m.Name != "" && !slices.Contains(BuiltinMetrics, m.Name) {
			v.addf(path+".name", "%q is not one of Flagger's built-in metrics (%s); give a customMetric query or a templateRef",
				m.Name, strings.Join(BuiltinMetrics, ", "))
		}
		if len(m.TemplateVariables) > 0 {
			v.addf(path+".templateVariables", "only customMetric and templateRef queries take variables; remove them")
		}
	case m.CustomMetric != nil:
		cp := path + ".customMetric"
		pr := m.CustomMetric.Provider
		v.oneOf(cp+".provider.type", "metric provider", pr.Type, MetricProviderTypes)
		if pr.Address != "" {
			v.httpURL(cp+".provider.address", pr.Address)
		}
		if pr.SecretRef != nil {
			v.subdomain(cp+".provider.secretRef.name", pr.SecretRef.Name)
		}
		if strings.TrimSpace(m.CustomMetric.Query) == "" {
			v.addf(cp+".query", "required: the query, such as a PromQL expression using {{ interval }}")
		} else if _, err := template.New("query").Funcs(metricFuncs).Parse(m.CustomMetric.Query); err != nil {
			v.addf(cp+".query", "invalid query template: %v", err)
		}
	default:
		v.subdomain(path+".templateRef.name", m.TemplateRef.Name)
		if ns := m.TemplateRef.Namespace; ns != "" {
			v.dnsLabel(path+".templateRef.namespace", "namespace", ns)
		}
	}
}

func (v *validator) loadTest(path string, lt LoadTest, testLoader bool) {
	tp := path + ".timeout"
	if lt.TimeoutSeconds != 0 {
		tp = path + ".timeoutSeconds"
	}
	if len(lt.Command) == 0 {
		if lt.URL != "" || lt.Timeout.Duration != 0 {
			v.addf(path+".command", "required when url or a timeout is set: the commands the load tester runs")
		}
		return
	}
	for i, c := range lt.Command {
		if strings.TrimSpace(c) == "" {
			v.addf(fmt.Sprintf("%s.command[%d]", path, i), "empty command")
		}
	}
	if lt.Timeout.Duration != 0 {
		v.atLeast(tp, lt.Timeout.Duration, time.Millisecond)
	}
	switch {
	case lt.URL == "" && !testLoader:
		v.addf(path+".url", "required unless testLoader is true: the URL of your load tester, such as \"http://flagger-loadtester.test/\"; or set testLoader: true to have flotilla install one")
	case lt.URL != "" && testLoader:
		v.addf(path+".url", "testLoader: true sends the commands to the load tester flotilla installs; remove url, or set testLoader: false to use yours")
	case lt.URL != "":
		v.httpURL(path+".url", lt.URL)
	}
}

func (v *validator) webhooks(path string, ws []Webhook) {
	seen := map[string]string{}
	for i, w := range ws {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case w.Name == "":
			v.addf(p+".name", "required")
		case strings.HasPrefix(w.Name, "flotilla-"):
			v.addf(p+".name", "names starting with \"flotilla-\" are reserved for the webhooks flotilla adds; rename %q", w.Name)
		case seen[w.Name] != "":
			v.addf(p+".name", "duplicate webhook name %q (first used by %s)", w.Name, seen[w.Name])
		default:
			seen[w.Name] = p
		}
		v.oneOf(p+".type", "webhook type", w.Type, WebhookTypes)
		v.httpURL(p+".url", w.URL)
		v.atLeast(p+".timeout", w.Timeout.Duration, time.Millisecond)
		if w.Retries < 0 {
			v.addf(p+".retries", "must be at least 0, got %d", w.Retries)
		}
	}
}

// service checks the generated service's fields beyond the port.
func (v *validator) service(path string, s Service) {
	if s.Name != "" {
		if errs := validation.IsDNS1035Label(s.Name); len(errs) > 0 {
			v.addf(path+".name", "invalid service name %q: %s", s.Name, strings.Join(errs, "; "))
		}
	}
	if s.PortName != "" {
		if errs := validation.IsValidPortName(s.PortName); len(errs) > 0 {
			v.addf(path+".portName", "invalid port name %q: %s", s.PortName, strings.Join(errs, "; "))
		}
	}
	if tp := s.TargetPort; tp != nil {
		if tp.Type == intstr.Int {
			if errs := validation.IsValidPortNum(int(tp.IntVal)); len(errs) > 0 {
				v.addf(path+".targetPort", "invalid port %d: %s", tp.IntVal, strings.Join(errs, "; "))
			}
		} else if errs := validation.IsValidPortName(tp.StrVal); len(errs) > 0 {
			v.addf(path+".targetPort", "invalid port name %q: %s", tp.StrVal, strings.Join(errs, "; "))
		}
	}
	for _, m := range []struct {
		name string
		md   *ServiceMetadata
	}{{"apex", s.Apex}, {"primary", s.Primary}, {"canary", s.Canary}} {
		if m.md == nil {
			continue
		}
		v.labels(path+"."+m.name+".labels", m.md.Labels)
		for _, k := range sortedKeys(m.md.Annotations) {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				v.addf(fmt.Sprintf("%s.%s.annotations[%q]", path, m.name, k), "invalid annotation key: %s", strings.Join(errs, "; "))
			}
		}
	}
}

func (v *validator) subdomain(path, name string) {
	if name == "" {
		v.addf(path, "required")
	} else if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		v.addf(path, "invalid name %q: %s", name, strings.Join(errs, "; "))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
