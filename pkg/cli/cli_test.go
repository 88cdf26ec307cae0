package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestMain_version(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		check    func(t *testing.T, stdout, stderr string)
	}{
		{
			name: "text", args: []string{"version"},
			check: func(t *testing.T, stdout, _ string) {
				t.Helper()
				if !strings.HasPrefix(stdout, "flotilla ") {
					t.Errorf("stdout = %q, want it to start with 'flotilla '", stdout)
				}
			},
		},
		{
			name: "json", args: []string{"version", "-o", "json"},
			check: func(t *testing.T, stdout, _ string) {
				t.Helper()
				var v map[string]string
				if err := json.Unmarshal([]byte(stdout), &v); err != nil || v["version"] == "" {
					t.Errorf("stdout = %q: want JSON with a version (err %v)", stdout, err)
				}
			},
		},
		{
			name: "unknown format", args: []string{"version", "-o", "xml"}, wantCode: 2,
			check: func(t *testing.T, _, stderr string) {
				t.Helper()
				if !strings.Contains(stderr, `unknown output format "xml"`) {
					t.Errorf("stderr = %q", stderr)
				}
			},
		},
		{
			name: "unknown flag", args: []string{"version", "--bogus"}, wantCode: 2,
			check: func(t *testing.T, _, stderr string) {
				t.Helper()
				if !strings.Contains(stderr, "unknown flag: --bogus") {
					t.Errorf("stderr = %q", stderr)
				}
			},
		},
		{
			name: "unknown command", args: []string{"bogus"}, wantCode: exitUsage,
			check: func(t *testing.T, _, stderr string) {
				t.Helper()
				if !strings.Contains(stderr, `unknown command "bogus"`) {
					t.Errorf("stderr = %q", stderr)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := Main(tt.args, &stdout, &stderr); code != tt.wantCode {
				t.Fatalf("exit code = %d, want %d (stderr %q)", code, tt.wantCode, stderr.String())
			}
			tt.check(t, stdout.String(), stderr.String())
		})
	}
}
