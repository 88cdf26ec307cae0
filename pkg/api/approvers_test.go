package api_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/gates"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// approversSite serves the API on an embedded store holding rollout r1
// of shop (1.2.0, pushed by alice): its wave canary (c1) needs no
// approval, prod (c2) two from group:release-managers with separation of
// duties. Its tokens are the automation's, default and ci, and the
// people's, alice and bob (release managers) and dev: "<name>-token". It
// returns the store (its journal and audit log), the approvals and the
// API's base URL.
func approversSite(t *testing.T) (*store.Store, *gates.StoreApprovals, string) {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	repo := embedded.NewRepo(s, nil)
	ro := rollout.Rollout{ID: "r1", Application: "shop", Tag: "1.2.0", PushedBy: "alice", Phase: rollout.Progressing, Waves: []rollout.Wave{
		{Name: "canary", Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterProgressing}}},
		{Name: "prod", Approvals: 2, ApprovalsFrom: []string{"group:release-managers"}, SeparationOfDuties: true, Clusters: []rollout.Cluster{{Name: "c2"}}},
	}}
	if _, err := repo.Create(t.Context(), ro); err != nil {
		t.Fatal(err)
	}
	approvals := gates.NewStoreApprovals(s)
	a := api.New(repo, approvals, s, nil).WithApplications("shop").WithAuditLog(s).WithAutomation("default", "ci")
	srv := serve(t, a, map[string]string{"default": "default-token", "ci": "ci-token", "alice": "alice-token", "bob": "bob-token", "dev": "dev-token"},
		api.TokenGroups(map[string][]string{"ci": {"release-managers"}, "alice": {"release-managers"}, "bob": {"release-managers"}, "dev": {"developers"}}))
	return s, approvals, srv.URL
}

// A wave's approval counts only from people: automation, those the wave's
// approvals.from does not name and, with separation of duties, the
// version's pusher are refused (403, audited as refused, nothing
// journaled for the wave); the others are accepted.
func TestApproversArePeople(t *testing.T) {
	s, _, base := approversSite(t)
	for _, c := range []struct {
		tok  string
		want int
		body string
	}{
		{"ci-token", 403, "ci is automation and never counts as an approver"},
		{"default-token", 403, "default is automation and never counts as an approver"},
		{"dev-token", 403, "dev is not among those who may approve wave 2 (prod): group:release-managers"},
		{"alice-token", 403, "alice pushed 1.2.0 and may not approve its rollout (separationOfDuties)"},
		{"bob-token", 202, `"by":"bob"`},
	} {
		got, body := request(t, "POST", base+"/api/v1/rollouts/r1/waves/prod/approval", c.tok, `{"reason":"CAB-9"}`, nil)
		if got != c.want || !strings.Contains(body, c.body) {
			t.Errorf("approval with %s = %d %s, want %d %s", c.tok, got, body, c.want, c.body)
		}
	}
	recs, err := s.Read(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Type, Name string
		Automation bool
		Decision   string
	}
	var got []row
	for _, r := range recs {
		switch r.Event.Type() {
		case events.TypeAuditRecorded:
			p, err := events.Decode[events.AuditRecorded](r.Event)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, row{"audit", p.Principal.Name, p.Principal.Automation, p.Decision + " " + p.Why})
		case events.TypeWaveApprovalRequested:
			p, err := events.Decode[events.WaveApproval](r.Event)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, row{Type: "approval", Name: p.Approver})
		}
	}
	want := []row{
		{"audit", "ci", true, "refused ci is automation and never counts as an approver"},
		{"audit", "default", true, "refused default is automation and never counts as an approver"},
		{"audit", "dev", false, "refused dev is not among those who may approve wave 2 (prod): group:release-managers"},
		{"audit", "alice", false, "refused alice pushed 1.2.0 and may not approve its rollout (separationOfDuties)"},
		{Type: "approval", Name: "bob"},
		{"audit", "bob", false, "allowed "},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		b, _ := json.Marshal(got)
		t.Errorf("journal (-want +got):\n%s\n%s", diff, b)
	}
}

// A manual verdict promoting the canary in a cluster is an approval of the
// cluster's wave: where the wave names approvers it is held to the same
// rule (403 naming why, audited as refused with the cluster and the
// verdict, nothing kept), and a verdict on every cluster to every such
// wave's. A cluster of a wave that needs no approval, and a rejection,
// need the approve permission only.
func TestVerdictsAreApprovals(t *testing.T) {
	s, approvals, base := approversSite(t)
	type answer struct {
		Status int
		Body   string
	}
	var got []answer
	for _, c := range []struct{ tok, body string }{
		{"ci-token", `{"status":"valid","cluster":"c2"}`},
		{"default-token", `{"status":"valid"}`},
		{"dev-token", `{"status":"valid","cluster":"c2","reason":"CAB-9"}`},
		{"alice-token", `{"status":"valid","cluster":"c2"}`},
		{"ci-token", `{"status":"valid","cluster":"c1"}`},
		{"alice-token", `{"status":"invalid","cluster":"c2","reason":"smoke test failed"}`},
		{"bob-token", `{"status":"valid","cluster":"c2","reason":"CAB-9"}`},
	} {
		status, body := request(t, "POST", base+"/api/v1/rollouts/r1/approval", c.tok, c.body, nil)
		var v struct{ Error, By, Status string }
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatalf("%s: %d %s", c.tok, status, body)
		}
		got = append(got, answer{status, v.Error + v.By + " " + v.Status})
	}
	want := []answer{
		{403, "ci is automation and never counts as an approver "},
		{403, "default is automation and never counts as an approver "},
		{403, "dev is not among those who may approve wave 2 (prod): group:release-managers "},
		{403, "alice pushed 1.2.0 and may not approve its rollout (separationOfDuties) "},
		{200, "ci valid"},
		{200, "alice invalid"},
		{200, "bob valid"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	kept, _, err := approvals.Approval(t.Context(), "r1", "c2")
	if err != nil {
		t.Fatal(err)
	}
	if kept.Status != gates.StatusValid || kept.By != "bob" {
		t.Errorf("c2's verdict is %+v, want bob's valid", kept)
	}
	recs, err := s.Read(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ Name, Cluster, Detail, Reason, Decision, Why string }
	var audit []row
	for _, r := range recs {
		if r.Event.Type() != events.TypeAuditRecorded {
			continue
		}
		p, err := events.Decode[events.AuditRecorded](r.Event)
		if err != nil {
			t.Fatal(err)
		}
		if p.Action != api.ActionApprove || p.RolloutID != "r1" || p.Application != "shop" {
			t.Errorf("audit record %+v: want approve of shop's r1", p)
		}
		audit = append(audit, row{p.Principal.Name, p.Cluster, p.Detail, p.Reason, p.Decision, p.Why})
	}
	wantAudit := []row{
		{"ci", "c2", "valid", "", "refused", "ci is automation and never counts as an approver"},
		{"default", "", "valid", "", "refused", "default is automation and never counts as an approver"},
		{"dev", "c2", "valid", "CAB-9", "refused", "dev is not among those who may approve wave 2 (prod): group:release-managers"},
		{"alice", "c2", "valid", "", "refused", "alice pushed 1.2.0 and may not approve its rollout (separationOfDuties)"},
		{"ci", "c1", "valid", "", "allowed", ""},
		{"alice", "c2", "invalid", "smoke test failed", "allowed", ""},
		{"bob", "c2", "valid", "CAB-9", "allowed", ""},
	}
	if diff := cmp.Diff(wantAudit, audit); diff != "" {
		t.Errorf("audit records (-want +got):\n%s", diff)
	}
}
