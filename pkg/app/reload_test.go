package app

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/reload"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// reloadDoc is testConfig's file with more applications (YAML flow
// entries) and more server fields.
func reloadDoc(server, apps string) string {
	return `
server:
  listen: 127.0.0.1:0
  dataDir: data
  apiToken: {env: FLOTILLA_TEST_API_TOKEN}
` + server + `
receivers:
  - {name: canaries, type: flagger, secret: {env: FLOTILLA_SERVER_TEST_SECRET}}
fleet:
  clusters: [{name: c1, kubeconfig: c1.kubeconfig}]
  waves: [{clusters: [c1]}]
applications:
` + apps
}

const (
	podinfoApp = "  - {name: podinfo, image: registry.example.com/demo/podinfo, workload: {name: podinfo}, service: {port: 9898}}\n"
	otherApp   = "  - {name: other, image: registry.example.com/demo/other, workload: {name: other}, service: {port: 8080}}\n"
)

// TestReloadSwapsWhatFlotillaServes: the running server's reload of its
// file, one edit after the other: what is applied is what the API
// answers at once; what is refused (invalid, a field that needs a restart,
// an application removed under its rollout in flight) leaves it as it was.
func TestReloadSwapsWhatFlotillaServes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "flotilla.yaml")
	write := func(doc string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "c1.kubeconfig"), []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FLOTILLA_SERVER_TEST_SECRET", "q9X/3vT+k2==")
	t.Setenv("FLOTILLA_TEST_API_TOKEN", testToken)
	write(reloadDoc("", podinfoApp))
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	s := runServer(t, cfg, Options{NoPrune: true, ConfigFile: path})
	// A rollout of podinfo in flight: removing podinfo is refused.
	if _, err := s.repo.Create(t.Context(), rollout.Rollout{ID: "r1", Application: "podinfo", Phase: rollout.Progressing}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		doc     string
		outcome reload.Outcome
		fields  []string
		errText string
		apps    []string // what the API lists after
	}{
		{name: "an application added", doc: reloadDoc("", podinfoApp+otherApp), outcome: reload.Applied, apps: []string{"podinfo", "other"}},
		{name: "invalid", doc: reloadDoc("", podinfoApp+otherApp+"  - {name: third, image: registry.example.com/third, track: Sometimes, workload: {name: third}, service: {port: 80}}\n"),
			outcome: reload.Invalid, errText: "applications[2].track", apps: []string{"podinfo", "other"}},
		{name: "a field that needs a restart, with an application removed", doc: reloadDoc("  workers: 3\n", podinfoApp),
			outcome: reload.RestartNeeded, fields: []string{"server.workers"}, apps: []string{"podinfo", "other"}},
		{name: "an application removed under its rollout in flight", doc: reloadDoc("", otherApp),
			outcome: reload.Invalid, errText: "applications[podinfo]: removed while its rollout r1 is in flight", apps: []string{"podinfo", "other"}},
		{name: "an application removed", doc: reloadDoc("", podinfoApp), outcome: reload.Applied, apps: []string{"podinfo"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			write(tc.doc)
			res := s.Reload(t.Context(), path)
			if res.Outcome != tc.outcome || (tc.errText != "") != (res.Err != nil) || res.Err != nil && !strings.Contains(res.Err.Error(), tc.errText) {
				t.Errorf("Reload: %s (%v), want %s (%q)", res.Outcome, res.Err, tc.outcome, tc.errText)
			}
			if diff := cmp.Diff(tc.fields, res.Fields); diff != "" {
				t.Errorf("fields that need a restart (-want +got):\n%s", diff)
			}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+s.Addr()+"/api/v1/applications", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			var got []struct{ Name string }
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatalf("GET /api/v1/applications: %s: %v", resp.Status, err)
			}
			var names []string
			for _, a := range got {
				names = append(names, a.Name)
			}
			if diff := cmp.Diff(tc.apps, names); diff != "" {
				t.Errorf("applications the API lists (-want +got):\n%s", diff)
			}
		})
	}
}
