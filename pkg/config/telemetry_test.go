package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTracingConfig(t *testing.T) {
	dir := testDir(t)
	writeFile(t, filepath.Join(dir, "otlp.key"), "key-from-file\n")
	t.Setenv("FLOTILLA_OTLP_AUTH", "Bearer sesame")
	doc := sections{events: `
telemetry:
  tracing:
    endpoint: https://otel.example.com:4318/v1/traces
    headers:
      Authorization: {env: FLOTILLA_OTLP_AUTH}
      X-Api-Key: {file: otlp.key}
    sampleRatio: 0.25
`}.doc()
	got, err := Parse([]byte(doc), dir)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	ratio := 0.25
	want := Tracing{
		Endpoint: "https://otel.example.com:4318/v1/traces",
		Headers: map[string]*Secret{
			"Authorization": {Env: "FLOTILLA_OTLP_AUTH"},
			"X-Api-Key":     {File: filepath.Join(dir, "otlp.key")},
		},
		HeaderValues: map[string]string{"Authorization": "Bearer sesame", "X-Api-Key": "key-from-file"},
		SampleRatio:  &ratio,
	}
	if diff := cmp.Diff(want, got.Telemetry.Tracing); diff != "" {
		t.Errorf("telemetry.tracing (-want +got):\n%s", diff)
	}
	if r := got.Telemetry.Tracing.Ratio(); r != 0.25 {
		t.Errorf("Ratio() = %g, want 0.25", r)
	}

	// Off by default: nothing set, every rollout traced once on.
	got, err = Parse([]byte(sections{}.doc()), dir)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if diff := cmp.Diff(Tracing{}, got.Telemetry.Tracing); diff != "" {
		t.Errorf("default telemetry.tracing (-want +got):\n%s", diff)
	}
	if r := got.Telemetry.Tracing.Ratio(); r != 1 {
		t.Errorf("default Ratio() = %g, want 1", r)
	}
}

func TestTracingConfigProblems(t *testing.T) {
	dir := testDir(t)
	t.Setenv("FLOTILLA_BAD_HEADER", "a\nb")
	tests := []struct {
		name, doc string
		want      []Problem
	}{{
		name: "headers and sampleRatio without an endpoint are not accepted and ignored",
		doc:  "telemetry: {tracing: {headers: {X-A: {env: FLOTILLA_TEST_TOKEN}}, sampleRatio: 1}}\n",
		want: []Problem{
			{"telemetry.tracing.headers", "set only with telemetry.tracing.endpoint (tracing is off without it)"},
			{"telemetry.tracing.sampleRatio", "set only with telemetry.tracing.endpoint (tracing is off without it)"},
		},
	}, {
		name: "endpoint not http",
		doc:  "telemetry: {tracing: {endpoint: 'grpc://collector:4317'}}\n",
		want: []Problem{{"telemetry.tracing.endpoint", `want an http or https URL, got scheme "grpc"`}},
	}, {
		name: "endpoint without a scheme",
		doc:  "telemetry: {tracing: {endpoint: 'collector:4318'}}\n",
		want: []Problem{{"telemetry.tracing.endpoint", `want an http or https URL, got scheme "collector"`}},
	}, {
		name: "sampleRatio out of range",
		doc:  "telemetry: {tracing: {endpoint: 'http://c:4318', sampleRatio: 1.5}}\n",
		want: []Problem{{"telemetry.tracing.sampleRatio", "1.5 is out of range: want 0 (no rollout traced) to 1 (every one)"}},
	}, {
		name: "bad headers",
		doc: `telemetry:
  tracing:
    endpoint: http://c:4318
    headers:
      "Bad Header": {env: FLOTILLA_TEST_TOKEN}
      X-Both: {env: FLOTILLA_TEST_TOKEN, file: x}
      X-Control: {env: FLOTILLA_BAD_HEADER}
      X-None: null
      X-Unset: {env: FLOTILLA_NOT_SET}
`,
		want: []Problem{
			{`telemetry.tracing.headers["Bad Header"]`, `"Bad Header" is not a valid HTTP header name`},
			{`telemetry.tracing.headers["X-Both"]`, "set exactly one of env and file"},
			{`telemetry.tracing.headers["X-Control"]`, "the value is not a valid HTTP header value (control characters?)"},
			{`telemetry.tracing.headers["X-None"]`, "required: where the value comes from (env or file)"},
			{`telemetry.tracing.headers["X-Unset"].env`, `environment variable "FLOTILLA_NOT_SET" is not set or is empty`},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(sections{events: tt.doc}.doc()), dir)
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("Parse: %v, want a *ValidationError", err)
			}
			if diff := cmp.Diff(tt.want, verr.Problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if strings.Contains(err.Error(), "a\nb") {
				t.Errorf("the error shows a header's value: %v", err)
			}
		})
	}
}

// A field tracing does not have is refused, not ignored.
func TestTracingConfigUnknownField(t *testing.T) {
	dir := testDir(t)
	_, err := Parse([]byte(sections{events: "telemetry: {tracing: {endpoint: 'http://c:4318', insecure: true}}\n"}.doc()), dir)
	if err == nil || !strings.Contains(err.Error(), `telemetry.tracing: unknown field "insecure"`) {
		t.Fatalf("Parse: %v, want an unknown field insecure", err)
	}
}
