package cli_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/cli"
)

var auditPage = api.AuditPage{Records: []api.AuditEntry{
	{Seq: 9, Time: appsAt.Add(2 * time.Minute), AuditRecorded: events.AuditRecorded{
		Principal: events.AuditPrincipal{Name: "ci", Via: "token"}, Action: "approve", Application: "shop", RolloutID: "shop-2",
		WaveNumber: 2, WaveName: "prod", Decision: "refused", Why: "ci may not approve in project payments (needs approve)", RemoteAddr: "10.0.0.9"}},
	{Seq: 7, Time: appsAt.Add(time.Minute), AuditRecorded: events.AuditRecorded{
		Principal: events.AuditPrincipal{Name: "alice", Via: "session"}, Action: "stop-line", Detail: "stop",
		Reason: "black friday", Decision: "allowed", RemoteAddr: "203.0.113.7"}},
	{Seq: 5, Time: appsAt, AuditRecorded: events.AuditRecorded{
		Principal: events.AuditPrincipal{Name: "ops", Via: "token"}, Action: "pause", Application: "shop", RolloutID: "shop-2",
		Reason: "incident 42", Decision: "allowed", RemoteAddr: "127.0.0.1"}},
}}

func TestPrintAudit(t *testing.T) {
	var b strings.Builder
	cli.PrintAudit(&b, auditPage)
	want := `TIME                  NAME   VIA      ACTION            APPLICATION  ROLLOUT  WAVE    DECISION  FROM         REASON        WHY
2026-11-28T12:02:00Z  ci     token    approve           shop         shop-2   2 prod  refused   10.0.0.9     -             ci may not approve in project payments (needs approve)
2026-11-28T12:01:00Z  alice  session  stop-line (stop)  -            -        -       allowed   203.0.113.7  black friday  -
2026-11-28T12:00:00Z  ops    token    pause             shop         shop-2   -       allowed   127.0.0.1    incident 42   -
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("get audit (-want +got)\n%s", diff)
	}
	b.Reset()
	cli.PrintAudit(&b, api.AuditPage{Truncated: true})
	if !strings.Contains(b.String(), "no audit records") || !strings.Contains(b.String(), "more records may match") {
		t.Errorf("an empty, truncated page prints %q", b.String())
	}
}

// `flotilla get audit`'s flags become the API's query; -o json prints the
// page as the API answered it.
func TestGetAudit(t *testing.T) {
	var query []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query = append(query, r.URL.Path+"?"+r.URL.RawQuery+" "+r.Header.Get("Authorization"))
		_ = json.NewEncoder(w).Encode(auditPage)
	}))
	t.Cleanup(srv.Close)
	var out, errOut strings.Builder
	if code := cli.Main([]string{"get", "audit", "--server", srv.URL, "--token", "t0k", "--application", "shop", "--since", "1h", "--limit", "5", "-o", "json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if code := cli.Main([]string{"get", "audit", "--server", srv.URL, "--token", "t0k"}, &strings.Builder{}, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	want := []string{"/api/v1/audit?application=shop&limit=5&since=1h Bearer t0k", "/api/v1/audit? Bearer t0k"}
	if diff := cmp.Diff(want, query); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	var got api.AuditPage
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(auditPage, got); diff != "" {
		t.Errorf("-o json (-want +got):\n%s", diff)
	}
}
