package config

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSecrets(t *testing.T) {
	dir := testDir(t)
	t.Setenv("FLOTILLA_GITHUB_SECRET", "gh-secret")
	writeFile(t, filepath.Join(dir, "secrets", "flagger"), "flagger-token\n")
	writeFile(t, filepath.Join(dir, "crlf"), "crlf-token\r\n\n")
	writeFile(t, filepath.Join(dir, "multi"), "  line one\nline two \n")
	abs := writeFile(t, filepath.Join(t.TempDir(), "abs"), "abs-token")

	doc := sections{receivers: `
receivers:
  - {name: registry, type: distribution, secret: {env: FLOTILLA_TEST_TOKEN}}
  - {name: github, type: github, secret: {env: FLOTILLA_GITHUB_SECRET}}
  - {name: flagger, type: flagger, secret: {file: secrets/flagger}}
  - {name: crlf, type: flagger, secret: {file: ./crlf}}
  - {name: multi, type: flagger, secret: {file: multi}}
  - {name: abs, type: flagger, secret: {file: '` + abs + `'}}
`}.doc()
	c, err := Parse([]byte(doc), dir)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := []Receiver{
		{Name: "registry", Type: "distribution", Secret: &Secret{Env: "FLOTILLA_TEST_TOKEN"}, SecretValue: testToken},
		{Name: "github", Type: "github", Secret: &Secret{Env: "FLOTILLA_GITHUB_SECRET"}, SecretValue: "gh-secret"},
		{Name: "flagger", Type: "flagger", Secret: &Secret{File: filepath.Join(dir, "secrets", "flagger")}, SecretValue: "flagger-token"},
		{Name: "crlf", Type: "flagger", Secret: &Secret{File: filepath.Join(dir, "crlf")}, SecretValue: "crlf-token"},
		{Name: "multi", Type: "flagger", Secret: &Secret{File: filepath.Join(dir, "multi")}, SecretValue: "  line one\nline two "},
		{Name: "abs", Type: "flagger", Secret: &Secret{File: abs}, SecretValue: "abs-token"},
	}
	if diff := cmp.Diff(want, c.Receivers); diff != "" {
		t.Errorf("receivers (-want +got):\n%s", diff)
	}

	b, err := json.Marshal(c)
	if err != nil {
		t.Fatalf("marshalling config: %v", err)
	}
	for _, r := range want {
		if strings.Contains(string(b), r.SecretValue) {
			t.Errorf("marshalled config holds the secret of receiver %s: %s", r.Name, b)
		}
	}
}

// TestSecretsNotInErrors makes every check near a secret fail and looks for
// the secrets' values in the message.
func TestSecretsNotInErrors(t *testing.T) {
	dir := testDir(t)
	const fileSecret = "file-secret-value"
	writeFile(t, filepath.Join(dir, "token"), fileSecret+"\n")
	t.Setenv("FLOTILLA_GITHUB_SECRET", "gh-secret-value")

	docs := map[string]string{
		"validation": sections{
			receivers: `
receivers:
  - {name: Registry, type: nope, insecure: true, secret: {env: FLOTILLA_TEST_TOKEN}}
  - {name: Registry, type: nope, insecure: true, secret: {file: token}}
  - {name: both, type: github, secret: {env: FLOTILLA_GITHUB_SECRET, file: token}}
`,
			fleet:        "fleet: {clusters: [{name: c1, kubeconfig: token}], waves: [{clusters: [c9]}]}\n",
			applications: "applications: [{}]\n",
		}.doc(),
		"decoding": `
receivers:
  - {name: r, type: github, secret: {env: FLOTILLA_TEST_TOKEN, value: x}, insecure: maybe}
`,
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(doc), dir)
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			t.Logf("error:\n%v", err)
			for _, secret := range []string{testToken, fileSecret, "gh-secret-value"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error holds secret %q:\n%v", secret, err)
				}
			}
		})
	}
}
