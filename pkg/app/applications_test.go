package app

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The applications' status is wired whole: GET /api/v1/applications lists
// the configured ones (to a token, as the other GETs), and /metrics has each
// one's flotilla_application_webhook_silent.
func TestApplicationsWired(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := runServer(t, testConfig(t, ""), Options{NoPrune: true, Registry: reg, Registerer: reg})
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := get(t, "http://"+s.Addr()+path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	want := `[{"name":"podinfo","kind":"image","repository":"registry.example.com/demo/podinfo","pollInterval":"5m0s","webhookSilent":false}]` + "\n"
	if code, body := get("/api/v1/applications"); code != http.StatusOK || body != want {
		t.Errorf("GET /api/v1/applications: %d %s, want 200 %s", code, body, want)
	}
	if code, _ := get("/api/v1/applications/nope"); code != http.StatusNotFound {
		t.Errorf("GET /api/v1/applications/nope: %d, want 404", code)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, `flotilla_application_webhook_silent{application="podinfo"} 0`) {
		t.Errorf("GET /metrics: %d, no flotilla_application_webhook_silent of podinfo at 0", code)
	}
}
