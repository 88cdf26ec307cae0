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

// A wave's approval counts only from people: automation, those the wave's
// approvals.from does not name and, with separation of duties, the
// version's pusher are refused (403, audited as refused, nothing
// journaled for the wave); the others are accepted.
func TestApproversArePeople(t *testing.T) {
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
	a := api.New(repo, gates.NewStoreApprovals(s), s, nil).WithApplications("shop").WithAuditLog(s).WithAutomation("default", "ci")
	base := serve(t, a, map[string]string{"default": "default-token", "ci": "ci-token", "alice": "alice-token", "bob": "bob-token", "dev": "dev-token"},
		api.TokenGroups(map[string][]string{"ci": {"release-managers"}, "alice": {"release-managers"}, "bob": {"release-managers"}, "dev": {"developers"}})).URL
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
