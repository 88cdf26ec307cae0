package config

import (
	"slices"
	"time"

	istiov1alpha1 "github.com/fluxcd/flagger/pkg/apis/istio/common/v1alpha1"
	istiov1beta1 "github.com/fluxcd/flagger/pkg/apis/istio/v1beta1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// This file holds an application's delivery policy: Kurator's unified
// rollout (its rolloutPolicy, DeliveryPolicy, TrafficAnalysis, Metric,
// Webhook, ServiceConfig, VirtualServiceConfig and AutoscaleRef), which
// pkg/canary renders into Flagger objects. Names follow Kurator's and
// Flagger's, so that a policy written for either reads the same here.
//
// A few fields have two names: flotilla's original one and Kurator's. Either
// may be set; set both and they must agree. Defaults copy Kurator's into
// flotilla's, which is what rendering reads:
//
//	interval          trafficAnalysis.checkIntervalSeconds
//	threshold         trafficAnalysis.checkFailedTimes
//	iterations        trafficRouting.analysisTimes
//	progressDeadline  rolloutTimeoutSeconds
//	provider          trafficRoutingProvider
//	trafficRouting.timeout             trafficRouting.timeoutSeconds
//	trafficAnalysis.metrics[].interval trafficAnalysis.metrics[].intervalSeconds
//	trafficAnalysis.webhooks.timeout   trafficAnalysis.webhooks.timeoutSeconds

// Defaults of the delivery policy, besides those of defaults.go.
const (
	DefaultProvider       = ProviderKubernetes
	DefaultStepWeight     = 10
	DefaultMaxWeight      = 50
	DefaultKumaProtocol   = "http"
	DefaultMetricInterval = time.Minute
	DefaultMetricProvider = "prometheus"
	DefaultMinReplicas    = 1
)

// Workload is the Kubernetes object running an application (Kurator's
// targetObject / workload), in the application's namespace.
type Workload struct {
	// Kind is one of WorkloadKinds. Default "Deployment".
	Kind string `json:"kind"`
	// Name is the object's name. Required.
	Name string `json:"name"`
	// Container names the container whose image is updated; empty means the
	// first container.
	Container string `json:"container"`
	// APIVersion and Namespace are Kurator's: apiVersion must be apps/v1
	// (what Flagger targets); namespace is the application's namespace.
	APIVersion string `json:"apiVersion"`
	Namespace  string `json:"namespace"`
}

// Workload kinds.
const (
	KindDeployment = "Deployment"
	KindDaemonSet  = "DaemonSet"
)

// WorkloadKinds lists the workload kinds a config may name: those Flagger
// can target.
var WorkloadKinds = []string{KindDeployment, KindDaemonSet}

// Service is the service Flagger generates in front of the workload
// (Kurator's serviceCfg: Flagger's canary service).
type Service struct {
	// Port is 1..65535. Required.
	Port int32 `json:"port"`
	// Name of the generated Kubernetes service (Kurator's serviceName).
	// Default the workload's name.
	Name string `json:"name"`
	// PortName names the port. Default "http", as in Flagger.
	PortName string `json:"portName"`
	// TargetPort is the container port, a number or a name. Default Port.
	TargetPort *intstr.IntOrString `json:"targetPort"`
	// AppProtocol of the port, such as "http" or "kubernetes.io/h2c".
	AppProtocol string `json:"appProtocol"`
	// PortDiscovery adds every container port to the generated services.
	// Default true, as in Kurator.
	PortDiscovery *bool `json:"portDiscovery"`
	// Apex, Primary and Canary add labels and annotations to the generated
	// services <name>, <name>-primary and <name>-canary.
	Apex    *ServiceMetadata `json:"apex"`
	Primary *ServiceMetadata `json:"primary"`
	Canary  *ServiceMetadata `json:"canary"`
}

// ServiceMetadata is labels and annotations for a generated service.
type ServiceMetadata struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// Delivery is an application's progressive-delivery policy: one Flagger
// Canary per cluster, and what it needs.
type Delivery struct {
	// Strategy is one of Strategies. Default: canary when
	// trafficRouting.canaryStrategy is set, abTesting when
	// trafficRouting.match is, else blueGreen.
	Strategy string `json:"strategy"`
	// Provider is the traffic provider, one of Providers (Kurator's
	// trafficRoutingProvider, Flagger's provider). Default "kubernetes".
	Provider string `json:"provider"`
	// TrafficRoutingProvider is Kurator's name for Provider.
	TrafficRoutingProvider string `json:"trafficRoutingProvider"`

	// Interval is the analysis interval, at least 1s. Default 1m.
	Interval Duration `json:"interval"`
	// Iterations is the number of analysis runs of blue/green and A/B
	// testing, at least 1. Default 10. A canary advances by weight instead.
	Iterations int `json:"iterations"`
	// Threshold is the number of failed checks before rollback, at least 1.
	// Default 5.
	Threshold int `json:"threshold"`
	// ProgressDeadline bounds how long a canary may make no progress, at
	// least 1s. Default 10m.
	ProgressDeadline Duration `json:"progressDeadline"`
	// RolloutTimeoutSeconds is Kurator's name for ProgressDeadline.
	RolloutTimeoutSeconds int `json:"rolloutTimeoutSeconds"`
	// Deadline bounds one cluster's step (its pipeline run and Flagger's
	// analysis, or a revert): when it passes, flotilla reads the cluster
	// and decides. Default: StepDeadline's estimate from the policy.
	Deadline Duration `json:"deadline"`

	// TrafficRouting says how traffic reaches the canary.
	TrafficRouting TrafficRouting `json:"trafficRouting"`
	// TrafficAnalysis says how the canary is judged.
	TrafficAnalysis TrafficAnalysis `json:"trafficAnalysis"`

	// SkipTrafficAnalysis promotes every new version without analysis.
	SkipTrafficAnalysis bool `json:"skipTrafficAnalysis"`
	// RevertOnDeletion makes Flagger restore the workload and its service
	// when the canary is deleted: set it when flotilla may stop managing
	// the application.
	RevertOnDeletion bool `json:"revertOnDeletion"`
	// Suspend pauses Flagger: no analysis runs until it is unset.
	Suspend bool `json:"suspend"`

	// Autoscale adds a HorizontalPodAutoscaler for the workload, which
	// Flagger copies for the primary.
	Autoscale *Autoscale `json:"autoscale"`
	// TestLoader installs Flagger's load tester next to the workload, to
	// run trafficAnalysis.webhooks' commands. Otherwise those go to the
	// user's own load tester, at trafficAnalysis.webhooks.url.
	TestLoader bool `json:"testLoader"`

	// Webhooks are Flagger webhooks added to the canary's analysis.
	Webhooks []Webhook `json:"webhooks"`
}

// Strategies.
const (
	StrategyCanary    = "canary"    // weighted steps: stepWeight(s) up to maxWeight
	StrategyABTesting = "abTesting" // requests matching headers or cookies, for a number of iterations
	StrategyBlueGreen = "blueGreen" // all test traffic for a number of iterations, then a switch
)

// Strategies lists the delivery strategies a config may name.
var Strategies = []string{StrategyCanary, StrategyABTesting, StrategyBlueGreen}

// Traffic providers, by Flagger's names.
const (
	ProviderKubernetes = "kubernetes" // plain Services (L4): blue/green only
	ProviderIstio      = "istio"
	ProviderKuma       = "kuma"
	ProviderLinkerd    = "linkerd"
	ProviderNGINX      = "nginx"
	ProviderContour    = "contour"
	ProviderGatewayAPI = "gatewayapi" // Gateway API v1 HTTPRoutes
	ProviderTraefik    = "traefik"
)

// Providers lists the traffic providers a config may name.
var Providers = []string{
	ProviderKubernetes, ProviderIstio, ProviderKuma, ProviderLinkerd,
	ProviderNGINX, ProviderContour, ProviderGatewayAPI, ProviderTraefik,
}

// ProviderStrategies lists the strategies Flagger supports with each
// provider, as Flagger documents them ("Deployment Strategies").
var ProviderStrategies = map[string][]string{
	ProviderKubernetes: {StrategyBlueGreen},
	ProviderIstio:      {StrategyCanary, StrategyABTesting, StrategyBlueGreen},
	ProviderKuma:       {StrategyCanary},
	ProviderLinkerd:    {StrategyCanary, StrategyBlueGreen},
	ProviderNGINX:      {StrategyCanary, StrategyABTesting, StrategyBlueGreen},
	ProviderContour:    {StrategyCanary, StrategyABTesting, StrategyBlueGreen},
	ProviderGatewayAPI: {StrategyCanary, StrategyABTesting, StrategyBlueGreen},
	ProviderTraefik:    {StrategyCanary},
}

// TrafficRouting is Kurator's trafficRouting (its VirtualServiceConfig):
// the routes Flagger generates and how the canary's share of traffic grows.
// Which provider applies which field is checked by validation.
type TrafficRouting struct {
	// Timeout of HTTP and gRPC requests (istio, contour, gatewayapi).
	Timeout Duration `json:"timeout"`
	// TimeoutSeconds is Kurator's name for Timeout.
	TimeoutSeconds int `json:"timeoutSeconds"`
	// Gateways the routes attach to: Istio gateways ("namespace/name" or
	// "mesh"), or Gateway API gateways ("namespace/name", or a name in the
	// application's namespace), of which gatewayapi needs at least one.
	Gateways []string `json:"gateways"`
	// Hosts the routes serve (istio, gatewayapi). Default the service name.
	Hosts []string `json:"hosts"`
	// Retries policy of the routes (istio, contour).
	Retries *istiov1beta1.HTTPRetry `json:"retries"`
	// Headers operations on requests and responses (istio, gatewayapi).
	Headers *istiov1beta1.Headers `json:"headers"`
	// CorsPolicy of the routes (istio).
	CorsPolicy *istiov1beta1.CorsPolicy `json:"corsPolicy"`
	// TrafficPolicy of the generated destination rules (istio).
	TrafficPolicy *istiov1beta1.TrafficPolicy `json:"trafficPolicy"`
	// Delegation generates an Istio VirtualService without hosts and
	// gateways, for a VirtualService of the user's to delegate to (istio;
	// Istio's PILOT_ENABLE_VIRTUAL_SERVICE_DELEGATE must be set).
	Delegation bool `json:"delegation"`
	// URIMatch restricts the routes to matching requests, such as a URI
	// prefix (istio, contour, gatewayapi): Kurator's virtualServiceCfg.match.
	URIMatch []istiov1beta1.HTTPMatchRequest `json:"uriMatch"`
	// Protocol of the service's port for Kuma: http, http2, grpc, tcp or
	// kafka. Default "http", as in Kurator.
	Protocol string `json:"protocol"`
	// IngressRef names the Ingress that routes to the service (nginx,
	// required there).
	IngressRef *IngressRef `json:"ingressRef"`

	// CanaryStrategy is the canary strategy's weights.
	CanaryStrategy *CanaryStrategy `json:"canaryStrategy"`
	// AnalysisTimes is Kurator's name for Delivery.Iterations.
	AnalysisTimes int `json:"analysisTimes"`
	// Match routes requests to the canary during A/B testing: a request
	// goes to the canary when it satisfies every condition of one entry.
	Match []Match `json:"match"`
	// Mirror copies requests to the canary during analysis and drops its
	// answers (canary and blueGreen; istio, gatewayapi).
	Mirror bool `json:"mirror"`
	// MirrorWeight is the share of requests mirrored, 1..100 (istio).
	// Default 100.
	MirrorWeight int `json:"mirrorWeight"`
}

// IngressRef names an Ingress in the application's namespace.
type IngressRef struct {
	// Name of the Ingress. Required.
	Name string `json:"name"`
}

// CanaryStrategy is Kurator's canaryStrategy: how far and how fast traffic
// shifts to the canary.
type CanaryStrategy struct {
	// StepWeight is the weight added at each step, 1..100. Default 10,
	// unless StepWeights is set.
	StepWeight int `json:"stepWeight"`
	// StepWeights are the weights of the steps, ascending, each 1..100.
	StepWeights []int `json:"stepWeights"`
	// MaxWeight is the highest weight before promotion, 1..100. Default 50
	// with StepWeight; with StepWeights the last step is the highest.
	MaxWeight int `json:"maxWeight"`
	// StepWeightPromotion shifts traffic to the promoted version in steps of
	// this weight, 1..100. Default: all at once.
	StepWeightPromotion int `json:"stepWeightPromotion"`
}

// Match is one A/B testing condition.
type Match struct {
	// Headers match request headers by exact, prefix, suffix or regex (one
	// of them per header). Header names are lower case.
	Headers map[string]istiov1alpha1.StringMatch `json:"headers"`
	// Cookie matches requests whose cookie of this name is "always", the
	// convention of Flagger's A/B testing that nginx requires.
	Cookie string `json:"cookie"`
	// SourceLabels match the labels of the calling workload (istio, with
	// the "mesh" gateway).
	SourceLabels map[string]string `json:"sourceLabels"`
}

// TrafficAnalysis is Kurator's trafficAnalysis: the checks that promote or
// roll back the canary.
type TrafficAnalysis struct {
	// CheckIntervalSeconds is Kurator's name for Delivery.Interval.
	CheckIntervalSeconds int `json:"checkIntervalSeconds"`
	// CheckFailedTimes is Kurator's name for Delivery.Threshold.
	CheckFailedTimes int `json:"checkFailedTimes"`
	// PrimaryReadyThreshold and CanaryReadyThreshold are the percentages of
	// pods that must be available to consider the primary and the canary
	// ready, 1..100. Default 100.
	PrimaryReadyThreshold *int `json:"primaryReadyThreshold"`
	CanaryReadyThreshold  *int `json:"canaryReadyThreshold"`
	// Metrics are checked at every interval.
	Metrics []Metric `json:"metrics"`
	// Webhooks are Kurator's load test: commands for a Flagger load tester.
	Webhooks LoadTest `json:"webhooks"`
	// SessionAffinity keeps a user who reached the canary on it (canary;
	// istio, gatewayapi).
	SessionAffinity *SessionAffinity `json:"sessionAffinity"`
}

// Metric is one check of the analysis: one of Flagger's built-in metrics
// (BuiltinMetrics), a custom Prometheus query, or a MetricTemplate of the
// user's.
type Metric struct {
	// Name is a DNS label, unique within the application. Without
	// CustomMetric or TemplateRef it must be one of BuiltinMetrics.
	Name string `json:"name"`
	// Interval is the query's time window, at least 1s. Default 1m.
	Interval Duration `json:"interval"`
	// IntervalSeconds is Kurator's name for Interval.
	IntervalSeconds int `json:"intervalSeconds"`
	// ThresholdRange is the range of passing values: the request success
	// rate in percent, the request duration in milliseconds. Required.
	ThresholdRange *ThresholdRange `json:"thresholdRange"`
	// CustomMetric is a query rendered into a Flagger MetricTemplate named
	// <application>-<metric> in the application's namespace.
	CustomMetric *CustomMetric `json:"customMetric"`
	// TemplateRef names an existing MetricTemplate instead.
	TemplateRef *TemplateRef `json:"templateRef"`
	// TemplateVariables are passed to the template's query as
	// {{ variables.<key> }}.
	TemplateVariables map[string]string `json:"templateVariables"`
}

// Flagger's built-in metrics, which every provider measures.
const (
	MetricRequestSuccessRate = "request-success-rate" // percent of non-5xx responses
	MetricRequestDuration    = "request-duration"     // P99 latency in milliseconds
)

// BuiltinMetrics lists Flagger's built-in metrics.
var BuiltinMetrics = []string{MetricRequestSuccessRate, MetricRequestDuration}

// ThresholdRange bounds a metric's passing values; either bound may be
// left out.
type ThresholdRange struct {
	Min *float64 `json:"min"`
	Max *float64 `json:"max"`
}

// CustomMetric is a metric query and where to run it: Kurator's
// customMetric, Flagger's MetricTemplate spec.
type CustomMetric struct {
	// Provider is the metrics server.
	Provider MetricProvider `json:"provider"`
	// Query is a Go template over Flagger's variables, such as
	// {{ interval }}, {{ namespace }}, {{ target }} and
	// {{ variables.<key> }}; Flagger fills them in. Required.
	Query string `json:"query"`
}

// MetricProvider is a metrics server for custom metrics.
type MetricProvider struct {
	// Type is one of MetricProviderTypes. Default "prometheus".
	Type string `json:"type"`
	// Address is the server's http(s) URL. Default (prometheus)
	// fleet.metricsServer.
	Address string `json:"address"`
	// SecretRef names a Secret in the application's namespace holding the
	// credentials, as Flagger reads them for the type.
	SecretRef *SecretRef `json:"secretRef"`
	// Headers are sent with every query.
	Headers map[string][]string `json:"headers"`
	// Region is the cloud region (cloudwatch).
	Region string `json:"region"`
	// InsecureSkipVerify disables TLS certificate verification.
	InsecureSkipVerify bool `json:"insecureSkipVerify"`
}

// MetricProviderTypes lists the metrics servers Flagger queries.
var MetricProviderTypes = []string{
	"prometheus", "datadog", "cloudwatch", "newrelic", "graphite", "stackdriver",
	"influxdb", "dynatrace", "keptn", "splunk",
}

// SecretRef names a Secret in the application's namespace.
type SecretRef struct {
	// Name of the Secret. Required.
	Name string `json:"name"`
}

// TemplateRef names an existing Flagger MetricTemplate.
type TemplateRef struct {
	// Name of the MetricTemplate. Required.
	Name string `json:"name"`
	// Namespace of the MetricTemplate. Default the application's.
	Namespace string `json:"namespace"`
}

// LoadTest is Kurator's trafficAnalysis.webhooks: commands a Flagger load
// tester runs at every step of the analysis, to send the canary traffic.
type LoadTest struct {
	// Command lists the commands, such as
	// "hey -z 1m -q 10 -c 2 http://podinfo-canary.demo:9898/".
	Command []string `json:"command"`
	// Timeout bounds each call to the load tester. Default Flagger's, 10s.
	Timeout Duration `json:"timeout"`
	// TimeoutSeconds is Kurator's name for Timeout.
	TimeoutSeconds int `json:"timeoutSeconds"`
	// URL is the user's own load tester. Required with commands unless
	// testLoader is true, which uses the load tester flotilla installs.
	URL string `json:"url"`
}

// SessionAffinity is Flagger's cookie-based session affinity for canaries.
type SessionAffinity struct {
	// CookieName is the cookie that keeps a user on the canary. Required.
	CookieName string `json:"cookieName"`
	// MaxAge is the cookie's lifetime in seconds. Default 86400, a day.
	MaxAge int `json:"maxAge"`
	// PrimaryCookieName, when set, keeps a user on the primary for one
	// interval too (gatewayapi).
	PrimaryCookieName string `json:"primaryCookieName"`
}

// Autoscale is Kurator's autoScale: a HorizontalPodAutoscaler for the
// workload (scaling on 80% CPU utilization, the API's default).
type Autoscale struct {
	// MinReplicas is at least 1. Default 1.
	MinReplicas int32 `json:"minReplicas"`
	// MaxReplicas is at least MinReplicas. Required.
	MaxReplicas int32 `json:"maxReplicas"`
}

// Webhook is one Flagger webhook of a canary's analysis.
type Webhook struct {
	// Name is required and unique within the application; names starting
	// with "flotilla-" are flotilla's own.
	Name string `json:"name"`
	// Type is one of WebhookTypes. Default "rollout", as in Flagger.
	Type string `json:"type"`
	// URL is an absolute http(s) URL. Required.
	URL string `json:"url"`
	// Timeout bounds each call. Default 10s, as in Flagger.
	Timeout Duration `json:"timeout"`
	// Metadata is passed to the webhook.
	Metadata map[string]string `json:"metadata"`
	// Retries is the number of retries of a failed call. Default 0.
	Retries int `json:"retries"`
	// DisableTLS skips TLS certificate verification.
	DisableTLS bool `json:"disableTLS"`
	// MuteAlert mutes Flagger's alerts about this webhook.
	MuteAlert bool `json:"muteAlert"`
}

// WebhookTypes lists Flagger's webhook types.
var WebhookTypes = []string{
	"confirm-rollout",
	"pre-rollout",
	"rollout",
	"confirm-traffic-increase",
	"confirm-promotion",
	"post-rollout",
	"rollback",
	"event",
}

// Supports tells whether Flagger supports strategy with provider.
func Supports(provider, strategy string) bool {
	return slices.Contains(ProviderStrategies[provider], strategy)
}

// deadlineMargin is added to the estimate of a step's time: the pipeline
// run, Flagger's first reconcile and the event's way back.
const deadlineMargin = 2 * time.Minute

// StepDeadline is how long one cluster's step may take: Deadline when set,
// else the analysis interval times the analysis steps (the weight steps of
// a canary and of its promotion, or the iterations) plus the failed checks
// Flagger tolerates, plus the progress deadline and a margin.
func (d Delivery) StepDeadline() time.Duration {
	if d.Deadline.Duration > 0 {
		return d.Deadline.Duration
	}
	steps := d.Iterations
	if cs := d.TrafficRouting.CanaryStrategy; cs != nil && d.Strategy == StrategyCanary {
		switch {
		case len(cs.StepWeights) > 0:
			steps = len(cs.StepWeights)
		case cs.StepWeight > 0:
			steps = (cs.MaxWeight + cs.StepWeight - 1) / cs.StepWeight
		}
		if cs.StepWeightPromotion > 0 {
			steps += (100 + cs.StepWeightPromotion - 1) / cs.StepWeightPromotion
		}
	}
	// Initialisation, promotion and finalisation take an interval each.
	steps += d.Threshold + 3
	return time.Duration(steps)*d.Interval.Duration + d.ProgressDeadline.Duration + deadlineMargin
}
