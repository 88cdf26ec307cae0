package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// config check passes a valid config, and warns when it has no API token
// (every read and control would be refused) or opens the reads.
func TestConfigCheckWarnsAboutAuthentication(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := `apiVersion: v1
kind: Config
clusters: [{name: c1, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c1, context: {cluster: c1, user: u}}]
current-context: c1
`
	if err := os.WriteFile(filepath.Join(dir, "c1.kubeconfig"), []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const rest = `receivers:
  - {name: registry, type: distribution, secret: {file: secret}}
  - {name: canaries, type: flagger, secret: {file: secret}}
fleet:
  clusters: [{name: c1, kubeconfig: c1.kubeconfig}]
  waves: [{clusters: [c1]}]
applications:
  - {name: podinfo, image: registry.example.com/demo/podinfo, workload: {name: podinfo}, service: {port: 9898}}
`
	const open = "notice: no projects and no rbac: every API token may"
	for _, tc := range []struct {
		name, server string
		warnings     []string
	}{
		{"a token", "server: {apiToken: {file: secret}}\n", []string{open}},
		{"no token", "", []string{"warning: no API token is set"}},
		{"anonymous reads", "server: {apiToken: {file: secret}, anonymousRead: true}\n", []string{"warning: server.anonymousRead is on", open}},
		{"roles", "server: {apiToken: {file: secret}}\nrbac: {defaultRole: viewer}\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
			if err := os.WriteFile(path, []byte(tc.server+rest), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr strings.Builder
			if code := Main([]string{"config", "check", "--config", path}, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			if !strings.Contains(lines[0], ": valid: ") {
				t.Errorf("first line %q, want valid", lines[0])
			}
			var got []string // each warning's start, as long as tc's
			for i, l := range lines[1:] {
				w := strings.TrimPrefix(l, path+": ")
				if i < len(tc.warnings) {
					w = w[:min(len(w), len(tc.warnings[i]))]
				}
				got = append(got, w)
			}
			if diff := cmp.Diff(tc.warnings, got); diff != "" {
				t.Errorf("warnings (-want +got)\n%s\n%s", diff, stdout.String())
			}
		})
	}
}
