package config

// Validation is Kanary's validation of a canary: how flotilla decides, on
// top of Flagger's analysis, that a canary may be promoted. Manual and label
// watch are gates flotilla serves itself (Flagger's confirm-promotion and
// rollback hooks, pointed at flotilla's flagger receiver); PromQL becomes a
// Flagger metric check.
type Validation struct {
	// ValidationPeriod is how long a canary must run before label watch
	// lets it be promoted, and after which Manual.StatusAfterDeadline
	// decides. Default 15m, Kanary's example.
	ValidationPeriod Duration `json:"validationPeriod"`
	// Items are the validations; every one must pass.
	Items []ValidationItem `json:"items"`
	// NoUpdate is Kanary's: true validates without promoting, which a
	// Flagger canary cannot do; only false is accepted.
	NoUpdate bool `json:"noUpdate"`
}

// ValidationItem is one validation: exactly one of its fields.
type ValidationItem struct {
	Manual     *ManualValidation     `json:"manual"`
	LabelWatch *LabelWatchValidation `json:"labelWatch"`
	PromQL     *PromQLValidation     `json:"promQL"`
}

// ManualValidation holds promotion until `flotilla approve` (or rolls back
// on `flotilla approve --reject`).
type ManualValidation struct {
	// StatusAfterDeadline decides when nobody did within the validation
	// period: "valid" promotes, "invalid" rolls back, "none" keeps waiting.
	// Default "none".
	StatusAfterDeadline string `json:"statusAfterDeadline"`
	// Status is Kanary's verdict, written into the resource at run time;
	// here that is `flotilla approve [--reject]`, so it must be empty.
	Status string `json:"status"`
}

// ManualStatuses lists the values of StatusAfterDeadline.
var ManualStatuses = []string{"none", "valid", "invalid"}

// LabelWatchValidation rolls the canary back as soon as one of these labels
// (with this value) appears on its Deployment or one of its pods.
type LabelWatchValidation struct {
	DeploymentInvalidationLabels map[string]string `json:"deploymentInvalidationLabels"`
	PodInvalidationLabels        map[string]string `json:"podInvalidationLabels"`
}

// PromQLValidation is a Prometheus query the canary must pass at every
// analysis interval: Kanary's promQL, rendered as a Flagger custom metric.
type PromQLValidation struct {
	// Name of the metric check. Default "promql-<n>", n 1-based among the
	// promQL items.
	Name string `json:"name"`
	// PrometheusURL is the server, an http(s) URL. Default
	// fleet.metricsServer.
	PrometheusURL string `json:"prometheusURL"`
	// Query may use Flagger's template variables ({{ interval }},
	// {{ namespace }}, {{ target }}). Kanary's queries answer true or
	// false: write them with `bool` (e.g. `... < bool 0.05`) so they
	// return 1 or 0. Required.
	Query string `json:"query"`
	// ValueInRange is the passing range. Default min 1: the query must be
	// true.
	ValueInRange *ThresholdRange `json:"valueInRange"`
}
