package config

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

func TestDurationUnmarshal(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{in: `"10s"`, want: 10 * time.Second},
		{in: `"1m30s"`, want: 90 * time.Second},
		{in: `"1h"`, want: time.Hour},
		{in: `"250ms"`, want: 250 * time.Millisecond},
		{in: `"-5s"`, want: -5 * time.Second},
		{in: `"0s"`, want: 0},
		{in: `null`, want: 42}, // null leaves the value alone
		{in: `"10"`, wantErr: `parsing duration "10": want a Go duration such as "10s" or "1m30s"`},
		{in: `"ten seconds"`, wantErr: `parsing duration "ten seconds": want a Go duration such as "10s" or "1m30s"`},
		{in: `""`, wantErr: `parsing duration "": want a Go duration such as "10s" or "1m30s"`},
		{in: `10`, wantErr: `parsing duration 10: want a string such as "10s"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			d := Duration{42}
			err := d.UnmarshalJSON([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Errorf("UnmarshalJSON = %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("UnmarshalJSON: %v", err)
			}
			if diff := cmp.Diff(tt.want, d.Duration); diff != "" {
				t.Errorf("duration (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDurationMarshal(t *testing.T) {
	type durations struct {
		Interval         Duration `json:"interval"`
		ProgressDeadline Duration `json:"progressDeadline"`
	}
	in := durations{Interval: Duration{90 * time.Second}, ProgressDeadline: Duration{10 * time.Minute}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	want := `{"interval":"1m30s","progressDeadline":"10m0s"}`
	if diff := cmp.Diff(want, string(b)); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}

	y, err := yaml.Marshal(in)
	if err != nil {
		t.Fatalf("marshalling YAML: %v", err)
	}
	var out durations
	if err := yaml.UnmarshalStrict(y, &out); err != nil {
		t.Fatalf("unmarshalling YAML: %v", err)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("YAML round trip (-want +got):\n%s", diff)
	}
}
