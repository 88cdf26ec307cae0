package config

import (
	"fmt"
	"maps"
	"slices"

	"golang.org/x/net/http/httpguts"
)

// Telemetry configures what flotilla tells observability systems besides
// its logs and metrics.
type Telemetry struct {
	// Tracing exports each rollout as one OpenTelemetry trace. Off unless
	// its endpoint is set.
	Tracing Tracing `json:"tracing"`
}

// Tracing exports traces over OTLP/HTTP (protobuf): one trace per rollout,
// its spans the push, each wave, each cluster's apply and each revert
// (pkg/tracing).
type Tracing struct {
	// Endpoint is the http(s) URL of an OTLP/HTTP traces receiver, such as
	// "http://otel-collector:4318/v1/traces" (http: plain text); a URL
	// without a path gets /v1/traces. Empty: no tracing.
	Endpoint string `json:"endpoint"`
	// Headers are sent with every export, each value from env or file (a
	// collector's or vendor's credentials). Requires Endpoint.
	Headers map[string]*Secret `json:"headers"`
	// HeaderValues are the resolved Headers, set by Load. Never
	// marshalled.
	HeaderValues map[string]string `json:"-"`
	// SampleRatio is the fraction of rollouts traced, 0 to 1, decided by
	// the rollout's trace id (a rollout's spans are all kept or all
	// dropped). Requires Endpoint. Default 1 (see Ratio).
	SampleRatio *float64 `json:"sampleRatio"`
}

// Ratio is SampleRatio, or its default 1.
func (t Tracing) Ratio() float64 {
	if t.SampleRatio == nil {
		return 1
	}
	return *t.SampleRatio
}

// telemetryDefaults resolves the headers' secret files against base.
func telemetryDefaults(t *Telemetry, base string) {
	for _, s := range t.Tracing.Headers {
		if s != nil && s.File != "" {
			s.File = resolvePath(base, s.File)
		}
	}
}

func (v *validator) telemetry(t *Telemetry) {
	tr := &t.Tracing
	const p = "telemetry.tracing"
	if tr.Endpoint == "" {
		// No field is accepted and ignored.
		if len(tr.Headers) > 0 {
			v.addf(p+".headers", "set only with telemetry.tracing.endpoint (tracing is off without it)")
		}
		if tr.SampleRatio != nil {
			v.addf(p+".sampleRatio", "set only with telemetry.tracing.endpoint (tracing is off without it)")
		}
		return
	}
	v.httpURL(p+".endpoint", tr.Endpoint)
	if r := tr.SampleRatio; r != nil && (*r < 0 || *r > 1) {
		v.addf(p+".sampleRatio", "%g is out of range: want 0 (no rollout traced) to 1 (every one)", *r)
	}
	for _, name := range slices.Sorted(maps.Keys(tr.Headers)) {
		hp := fmt.Sprintf("%s.headers[%q]", p, name)
		if !httpguts.ValidHeaderFieldName(name) {
			v.addf(hp, "%q is not a valid HTTP header name", name)
			continue
		}
		s := tr.Headers[name]
		if s == nil {
			v.addf(hp, "required: where the value comes from (env or file)")
			continue
		}
		val := v.resolveSecret(hp, s)
		if val == "" {
			continue
		}
		if !httpguts.ValidHeaderFieldValue(val) {
			v.addf(hp, "the value is not a valid HTTP header value (control characters?)")
			continue
		}
		if tr.HeaderValues == nil {
			tr.HeaderValues = map[string]string{}
		}
		tr.HeaderValues[name] = val
	}
}
