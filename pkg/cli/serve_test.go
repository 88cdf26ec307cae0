package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServe_badInvocation(t *testing.T) {
	dir := t.TempDir()
	invalid := filepath.Join(dir, "invalid.yaml")
	if err := os.WriteFile(invalid, []byte(`
receivers:
  - name: registry
    type: distribution
applications:
  - name: podinfo
    image: 127.0.0.1:5000/demo/podinfo
    track: Minor
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string
	}{
		{name: "no config", args: []string{"serve"}, wantCode: 2, want: []string{"--config is required"}},
		{name: "missing file", args: []string{"serve", "--config", filepath.Join(dir, "nope.yaml")}, wantCode: 1, want: []string{"nope.yaml"}},
		{
			name: "every problem listed with its path", args: []string{"serve", "--config", invalid}, wantCode: 1,
			want: []string{`applications[0].track: unknown track "Minor"`, "receivers[0].secret", "fleet.clusters"},
		},
		{name: "bad log level", args: []string{"serve", "--config", invalid, "--log-level", "loud"}, wantCode: 2, want: []string{"--log-level"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := Main(tt.args, &stdout, &stderr); code != tt.wantCode {
				t.Fatalf("exit code = %d, want %d (stderr %q)", code, tt.wantCode, stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}

func TestGet_serverDown(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Main([]string{"get", "rollouts", "--server", "http://127.0.0.1:1"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "is `flotilla serve` running?") {
		t.Errorf("code %d, stderr %q: want 1 and a hint that the server is not running", code, stderr.String())
	}
}
