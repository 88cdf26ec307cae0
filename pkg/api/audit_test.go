package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/gates"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// auditAPI serves an API whose controls are audited, with rollouts r1 (in
// progress) and r4 (its second wave, prod, needs an approval) of shop,
// tokens ops and ann, and 127.0.0.0/8 as a trusted proxy.
func auditAPI(t *testing.T) (string, *store.Store) {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	repo := embedded.NewRepo(s, nil)
	for _, ro := range []rollout.Rollout{
		{ID: "r1", Application: "shop", Phase: rollout.Progressing, Waves: []rollout.Wave{{Name: "all", Clusters: []rollout.Cluster{{Name: "c1"}}}}},
		{ID: "r4", Application: "shop", Phase: rollout.Progressing, Waves: []rollout.Wave{
			{Name: "all", Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterFailed}}},
			{Name: "prod", Approvals: 1, Clusters: []rollout.Cluster{{Name: "c3"}}},
		}},
	} {
		if _, err := repo.Create(t.Context(), ro); err != nil {
			t.Fatal(err)
		}
	}
	a := api.New(repo, gates.NewStoreApprovals(s), s, nil).WithApplications("shop").WithAuditLog(s).
		WithTrustedProxies(netip.MustParsePrefix("127.0.0.0/8"))
	return serve(t, a, map[string]string{"ops": "ops-token", "ann": "ann-token"}).URL, s
}

// request sends a request with headers, answering the status and body.
func request(t *testing.T, method, url, tok, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
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

// Every control allowed is journaled with its audit record, which GET
// /api/v1/audit answers newest first: who, from where, with what, why.
func TestControlsAreAudited(t *testing.T) {
	base, s := auditAPI(t)
	proxied := map[string]string{"X-Forwarded-For": "203.0.113.7, 127.0.0.9", "User-Agent": "audit-test/1"}
	for _, c := range []struct {
		tok, path, body string
		header          map[string]string
		want            int
	}{
		{"ops-token", "/api/v1/rollouts/r1/pause", `{"reason":"incident 42"}`, proxied, 202},
		{"ann-token", "/api/v1/rollouts/r4/waves/prod/approval", `{"reason":"CAB-7"}`, nil, 202},
		{"ops-token", "/api/v1/rollouts/r1/approval", `{"status":"valid","cluster":"c1","reason":"looks good"}`, nil, 200},
		{"ops-token", "/api/v1/rollouts/r4/retry", `{"reason":"flake"}`, nil, 202},
		{"ops-token", "/api/v1/applications/shop/quarantine", `{"tag":"1.2.0","reason":"CVE-1"}`, nil, 202},
		{"ops-token", "/api/v1/fleet/stop", `{"reason":"black friday"}`, nil, 202},
		{"ops-token", "/api/v1/rollouts/r1/abort", `{}`, nil, 202},
		// A conflict (the state of r1 here is not paused: nothing
		// handles the pause): no control is done, nothing is audited.
		{"ops-token", "/api/v1/rollouts/r1/resume", `{}`, nil, 409},
	} {
		if got, body := request(t, "POST", base+c.path, c.tok, c.body, c.header); got != c.want {
			t.Fatalf("POST %s = %d %s, want %d", c.path, got, body, c.want)
		}
	}
	status, body := request(t, "GET", base+"/api/v1/audit", "ops-token", "", nil)
	var page api.AuditPage
	if err := json.Unmarshal([]byte(body), &page); err != nil || status != 200 {
		t.Fatalf("GET /api/v1/audit = %d %s (%v)", status, body, err)
	}
	type row struct{ Name, Action, App, Rollout, Wave, Detail, Reason, Decision, Remote, UA string }
	var got []row
	for _, e := range page.Records {
		wave := ""
		if e.WaveNumber > 0 {
			wave = e.WaveName
		}
		got = append(got, row{e.Principal.Name, e.Action, e.Application, e.RolloutID, wave, e.Detail + e.Cluster, e.Reason, e.Decision, e.RemoteAddr, e.UserAgent})
	}
	ua := "Go-http-client/1.1"
	want := []row{
		{"ops", "abort", "shop", "r1", "", "", "", "allowed", "127.0.0.1", ua},
		{"ops", "stop-line", "", "", "", "stop", "black friday", "allowed", "127.0.0.1", ua},
		{"ops", "quarantine", "shop", "", "", "1.2.0", "CVE-1", "allowed", "127.0.0.1", ua},
		{"ops", "retry", "shop", "r4", "", "", "flake", "allowed", "127.0.0.1", ua},
		{"ops", "approve", "shop", "r1", "", "validc1", "looks good", "allowed", "127.0.0.1", ua},
		{"ann", "approve", "shop", "r4", "prod", "", "CAB-7", "allowed", "127.0.0.1", ua},
		{"ops", "pause", "shop", "r1", "", "", "incident 42", "allowed", "203.0.113.7", "audit-test/1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	// A control's record is appended with it, right after it, naming it;
	// both carry the rollout's id (its timeline shows the record).
	recs, err := s.Read(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if r.Event.Type() != events.TypeAuditRecorded {
			continue
		}
		p, err := events.Decode[events.AuditRecorded](r.Event)
		if err != nil {
			t.Fatal(err)
		}
		if p.EventID == "" {
			continue // an approval of a cluster journals no event of its own
		}
		if i == 0 || recs[i-1].Event.ID() != p.EventID || events.RolloutID(recs[i-1].Event) != events.RolloutID(r.Event) {
			t.Errorf("audit record %s names %s, not the event before it", r.Event.ID(), p.EventID)
		}
	}
}

// GET /api/v1/audit's query: filters, bounds, and 400 naming what is
// wrong.
func TestAuditQuery(t *testing.T) {
	base, _ := auditAPI(t)
	for _, path := range []string{"/api/v1/rollouts/r1/pause", "/api/v1/rollouts/r1/abort", "/api/v1/fleet/stop"} {
		if got, body := request(t, "POST", base+path, "ops-token", `{"reason":"x"}`, nil); got != 202 {
			t.Fatalf("POST %s = %d %s", path, got, body)
		}
	}
	tests := []struct {
		query   string
		status  int
		actions []string
		err     string
	}{
		{"", 200, []string{"stop-line", "abort", "pause"}, ""},
		{"?application=shop", 200, []string{"abort", "pause"}, ""},
		{"?application=cart", 200, nil, ""},
		{"?rollout=r1&limit=1", 200, []string{"abort"}, ""},
		{"?since=1h", 200, []string{"stop-line", "abort", "pause"}, ""},
		{"?since=" + time.Now().Add(time.Hour).UTC().Format(time.RFC3339), 200, nil, ""},
		{"?since=yesterday", 400, nil, `since: want a duration back from now (such as 1h) or an RFC 3339 time, got "yesterday"`},
		{"?since=-1h", 400, nil, `since: want a duration back from now (such as 1h) or an RFC 3339 time, got "-1h" (negative)`},
		{"?limit=0", 400, nil, `limit: want a number from 1 to 1000, got "0"`},
		{"?limit=1001", 400, nil, `limit: want a number from 1 to 1000, got "1001"`},
		{"?app=shop", 400, nil, `unknown parameter "app": the audit takes application, rollout, since and limit`},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			status, body := request(t, "GET", base+"/api/v1/audit"+tt.query, "ops-token", "", nil)
			var page struct {
				api.AuditPage
				Error string `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &page); err != nil {
				t.Fatalf("%d %s: %v", status, body, err)
			}
			var actions []string
			for _, r := range page.Records {
				actions = append(actions, r.Action)
			}
			if diff := cmp.Diff([]any{tt.status, tt.actions, tt.err}, []any{status, actions, page.Error}); diff != "" {
				t.Errorf("GET /api/v1/audit%s (-want +got):\n%s", tt.query, diff)
			}
		})
	}
}

// memLog is a journal in memory from seq first on (retention removed the
// records before).
type memLog struct {
	first uint64
	recs  []bus.Record
}

func (m memLog) Read(_ context.Context, after uint64, limit int) ([]bus.Record, error) {
	var out []bus.Record
	for _, r := range m.recs {
		if r.Seq > after && (limit <= 0 || len(out) < limit) {
			out = append(out, r)
		}
	}
	return out, nil
}
func (m memLog) FirstSeq() uint64 { return m.first }
func (m memLog) LastSeq() uint64  { return m.recs[len(m.recs)-1].Seq }

// ReadAudit reads newest first across many chunks of the journal, stops
// at ?since= and at the limit, and says when retention cut it short.
func TestReadAudit(t *testing.T) {
	start := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	var log memLog
	log.first = 101
	for seq := uint64(101); seq <= 5100; seq++ {
		typ, payload := events.TypeWaveStarted, any(events.WaveStarted{RolloutID: "r"})
		if seq%7 == 0 {
			typ, payload = events.TypeAuditRecorded, any(events.AuditRecorded{Action: "pause", Application: "shop", Decision: "allowed"})
		}
		e, err := events.New(fmt.Sprint(seq), "/test", typ, payload)
		if err != nil {
			t.Fatal(err)
		}
		e.SetTime(start.Add(time.Duration(seq) * time.Second))
		log.recs = append(log.recs, bus.Record{Seq: seq, Event: e})
	}
	seqs := func(p api.AuditPage) (n int, newest, oldest uint64) {
		if len(p.Records) == 0 {
			return 0, 0, 0
		}
		for i := 1; i < len(p.Records); i++ {
			if p.Records[i].Seq >= p.Records[i-1].Seq {
				t.Fatalf("records not newest first at %d", i)
			}
		}
		return len(p.Records), p.Records[0].Seq, p.Records[len(p.Records)-1].Seq
	}
	tests := []struct {
		name  string
		q     api.AuditQuery
		want  []any
		trunc bool
	}{
		{"the limit, across chunks", api.AuditQuery{Limit: 500}, []any{500, uint64(5096), uint64(1603)}, false},
		{"since: 700 s back from the last", api.AuditQuery{Limit: 1000, Since: start.Add(4400 * time.Second)}, []any{100, uint64(5096), uint64(4403)}, false},
		{"everything kept: retention cut the start", api.AuditQuery{Limit: 1000}, []any{714, uint64(5096), uint64(105)}, true},
		{"another application", api.AuditQuery{Limit: 10, Application: "cart"}, []any{0, uint64(0), uint64(0)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := api.ReadAudit(t.Context(), log, tt.q)
			if err != nil {
				t.Fatal(err)
			}
			n, newest, oldest := seqs(p)
			if diff := cmp.Diff(append(tt.want, tt.trunc), []any{n, newest, oldest, p.Truncated}); diff != "" {
				t.Errorf("ReadAudit (-want +got):\n%s", diff)
			}
		})
	}
}
