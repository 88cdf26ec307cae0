package api_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/gates"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// An approval is dated by the engine's clock (WithClock), the wall clock
// without one: the keeper reads it against that clock. Catches the API
// dating approvals with time.Now under `flotilla simulate`'s virtual clock.
func TestApprovalIsDatedByTheClock(t *testing.T) {
	virtual := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		clock func() time.Time
		want  func(at time.Time) bool
	}{
		{"the injected clock", func() time.Time { return virtual }, func(at time.Time) bool { return at.Equal(virtual) }},
		{"the wall clock by default", nil, func(at time.Time) bool { return time.Since(at).Abs() < time.Minute }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			repo := embedded.NewRepo(s, nil)
			if _, err := repo.Create(t.Context(), rollout.Rollout{ID: "r1", Application: "shop", Phase: rollout.Progressing,
				Waves: []rollout.Wave{{Name: "all", Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterPending}}}}}); err != nil {
				t.Fatal(err)
			}
			approvals := gates.NewStoreApprovals(s)
			a := api.New(repo, approvals, s, nil).WithApplications("shop")
			if tc.clock != nil {
				a = a.WithClock(tc.clock)
			}
			srv := serve(t, a, map[string]string{"ops": token})
			code, _, body := call(t, srv, "POST", "/api/v1/rollouts/r1/approval", token, `{"status":"valid","by":"alice"}`)
			if code != 200 {
				t.Fatalf("approval: %d %s", code, body)
			}
			var answered gates.Approval
			if err := json.Unmarshal([]byte(body), &answered); err != nil {
				t.Fatal(err)
			}
			kept, ok, err := approvals.Approval(t.Context(), "r1", "")
			if err != nil || !ok {
				t.Fatalf("approval kept: %v %v", ok, err)
			}
			if diff := cmp.Diff(answered, kept); diff != "" {
				t.Errorf("kept approval differs from the answer (-answer +kept):\n%s", diff)
			}
			if !tc.want(kept.At) {
				t.Errorf("approval dated %s", kept.At)
			}
		})
	}
}
