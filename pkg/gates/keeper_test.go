package gates

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/store"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// fakeLabels injects the labels a cluster would report.
type fakeLabels struct {
	deployment map[string]string
	pods       []map[string]string
	err        error
}

func (f fakeLabels) WorkloadLabels(context.Context, string, string, string, string) (map[string]string, []map[string]string, error) {
	return f.deployment, f.pods, f.err
}

func openStore(t *testing.T) *StoreApprovals {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return NewStoreApprovals(s)
}

func TestKeeper(t *testing.T) {
	manual := func(after Status) Policy {
		return Policy{Period: 10 * time.Minute, Manual: &Manual{StatusAfterDeadline: after}}
	}
	watch := Policy{Period: 10 * time.Minute, LabelWatch: &LabelWatch{
		DeploymentInvalidationLabels: map[string]string{"validation": "failed"},
		PodInvalidationLabels:        map[string]string{"monitoring-alert": "high-cpu"},
	}}
	tests := []struct {
		name     string
		policy   *Policy // nil: no application owns the canary
		approval *Approval
		labels   fakeLabels
		elapsed  time.Duration // since the revision was first seen
		gate     string
		wantOpen bool
		wantIn   string // in the reason
		wantErr  bool
	}{
		{name: "no policy: gates open", gate: ConfirmPromotion, wantOpen: true},
		{name: "no policy: no rollback", gate: RollbackGate, wantOpen: false},
		{name: "manual, no verdict: hold", policy: ptr(manual(StatusNone)), gate: ConfirmPromotion, wantIn: "flotilla approve r-1 --cluster eu-1"},
		{name: "manual, approved", policy: ptr(manual(StatusNone)), approval: &Approval{Status: StatusValid, By: "ops"}, gate: ConfirmPromotion, wantOpen: true, wantIn: "approved by ops"},
		{name: "manual, approved: no rollback", policy: ptr(manual(StatusNone)), approval: &Approval{Status: StatusValid}, gate: RollbackGate},
		{name: "manual, rejected: hold promotion", policy: ptr(manual(StatusNone)), approval: &Approval{Status: StatusInvalid}, gate: ConfirmPromotion, wantIn: "rejected"},
		{name: "manual, rejected: roll back", policy: ptr(manual(StatusNone)), approval: &Approval{Status: StatusInvalid, By: "ops"}, gate: RollbackGate, wantOpen: true, wantIn: "rejected by ops"},
		{name: "manual, deadline passed, none: hold", policy: ptr(manual(StatusNone)), elapsed: time.Hour, gate: ConfirmPromotion},
		{name: "manual, deadline passed, valid: promote", policy: ptr(manual(StatusValid)), elapsed: time.Hour, gate: ConfirmPromotion, wantOpen: true, wantIn: "validation deadline"},
		{name: "manual, deadline not passed, valid: hold", policy: ptr(manual(StatusValid)), elapsed: time.Minute, gate: ConfirmPromotion},
		{name: "manual, deadline passed, invalid: roll back", policy: ptr(manual(StatusInvalid)), elapsed: time.Hour, gate: RollbackGate, wantOpen: true},
		{name: "manual: other gates open", policy: ptr(manual(StatusNone)), gate: ConfirmRollout, wantOpen: true},
		{name: "watch, clean, period running: hold", policy: &watch, elapsed: time.Minute, gate: ConfirmPromotion, wantIn: "9m0s left"},
		{name: "watch, clean, period over: promote", policy: &watch, elapsed: time.Hour, gate: ConfirmPromotion, wantOpen: true},
		{name: "watch, clean: no rollback", policy: &watch, gate: RollbackGate},
		{name: "watch, deployment label: roll back", policy: &watch, labels: fakeLabels{deployment: map[string]string{"validation": "failed"}}, gate: RollbackGate, wantOpen: true, wantIn: "deployment label validation=failed"},
		{name: "watch, pod label: roll back", policy: &watch, labels: fakeLabels{pods: []map[string]string{{"app": "api"}, {"monitoring-alert": "high-cpu"}}}, gate: RollbackGate, wantOpen: true, wantIn: "pod label monitoring-alert=high-cpu"},
		{name: "watch, pod label: no promotion even after the period", policy: &watch, elapsed: time.Hour, labels: fakeLabels{pods: []map[string]string{{"monitoring-alert": "high-cpu"}}}, gate: ConfirmPromotion},
		{name: "watch, other value: no rollback", policy: &watch, labels: fakeLabels{deployment: map[string]string{"validation": "passed"}}, gate: RollbackGate},
		{name: "watch, labels unreadable: error", policy: &watch, labels: fakeLabels{err: errors.New("connection refused")}, gate: RollbackGate, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			approvals := openStore(t)
			call := Call{Gate: tt.gate, Cluster: "eu-1", Namespace: "shop", Name: "api", Checksum: "abc", RolloutID: "r-1"}
			// The revision was first seen tt.elapsed ago.
			if _, err := approvals.FirstSeen(ctx, revisionKey(call), t0.Add(-tt.elapsed)); err != nil {
				t.Fatal(err)
			}
			if tt.approval != nil {
				if err := approvals.Approve(ctx, "r-1", "", *tt.approval); err != nil {
					t.Fatal(err)
				}
			}
			policies := func(cluster, ns, name string) (Policy, bool) {
				if tt.policy == nil || cluster != "eu-1" || ns != "shop" || name != "api" {
					return Policy{}, false
				}
				return *tt.policy, true
			}
			k := NewKeeper(policies, approvals, tt.labels, func() time.Time { return t0 })
			dec, err := k.Decide(ctx, call)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Decide error %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if dec.Open != tt.wantOpen || !strings.Contains(dec.Reason, tt.wantIn) {
				t.Errorf("Decide = %+v, want open %v and reason containing %q", dec, tt.wantOpen, tt.wantIn)
			}
		})
	}
}

func TestApprovals(t *testing.T) {
	ctx := t.Context()
	a := openStore(t)
	if _, ok, err := a.Approval(ctx, "r-1", "eu-1"); ok || err != nil {
		t.Fatalf("Approval before any = %v, %v", ok, err)
	}
	if err := a.Approve(ctx, "r-1", "", Approval{Status: StatusValid, By: "ops", At: t0}); err != nil {
		t.Fatal(err)
	}
	if err := a.Approve(ctx, "r-1", "us-1", Approval{Status: StatusInvalid, By: "sre", At: t0}); err != nil {
		t.Fatal(err)
	}
	for cluster, want := range map[string]Status{"eu-1": StatusValid, "us-1": StatusInvalid} {
		got, ok, err := a.Approval(ctx, "r-1", cluster)
		if err != nil || !ok || got.Status != want {
			t.Errorf("Approval(r-1, %s) = %+v, %v, %v; want %s", cluster, got, ok, err, want)
		}
	}
	for _, bad := range []Approval{{Status: StatusNone}, {Status: "maybe"}} {
		if err := a.Approve(ctx, "r-1", "", bad); !errors.Is(err, ErrInvalidApproval) {
			t.Errorf("Approve(%q) = %v, want ErrInvalidApproval", bad.Status, err)
		}
	}
	first, err := a.FirstSeen(ctx, "k", t0)
	if err != nil || !first.Equal(t0) {
		t.Fatalf("FirstSeen = %v, %v", first, err)
	}
	if again, err := a.FirstSeen(ctx, "k", t0.Add(time.Hour)); err != nil || !again.Equal(t0) {
		t.Errorf("FirstSeen again = %v, %v; want the first time kept", again, err)
	}
}

func ptr[T any](v T) *T { return &v }
