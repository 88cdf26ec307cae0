package rollout_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/identity"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

func TestApprovalRefused(t *testing.T) {
	person := func(name string, groups ...string) identity.Principal {
		return identity.Principal{Subject: name, Name: name, Groups: groups, Token: name, Via: identity.ViaToken}
	}
	sso := identity.Principal{Subject: "00u1", Name: "dave@example.com", Via: identity.ViaSession}
	// A person signed in at Keycloak, Okta or Dex: an opaque subject, the
	// email, and the preferred_username the registry and git host know.
	kc := identity.Principal{Subject: "f3b1c2d4-7e0a", Name: "alice@example.com", Username: "alice",
		Groups: []string{"release-managers"}, Via: identity.ViaSession}
	// At Google: an opaque subject and the email, no username.
	google := identity.Principal{Subject: "104233", Name: "alice@example.com", Groups: []string{"release-managers"}, Via: identity.ViaSession}
	ci := person("ci", "release-managers")
	ci.Automation = true
	rm := []string{"group:release-managers", "user:00u1"}
	tests := []struct {
		name     string
		from     []string
		sod      bool
		pushedBy string
		p        identity.Principal
		want     string
	}{
		{name: "anyone who is not automation", p: person("bob"), want: ""},
		{name: "automation never counts", p: ci, want: "ci is automation and never counts as an approver"},
		{name: "automation never counts, even in the group", from: rm, p: ci, want: "ci is automation and never counts as an approver"},
		{name: "a member of the group", from: rm, p: person("alice", "release-managers"), want: ""},
		{name: "a user by subject", from: rm, p: sso, want: ""},
		{name: "a user by name", from: []string{"user:dave@example.com"}, p: sso, want: ""},
		{name: "not among them", from: rm, p: person("bob", "developers"),
			want: "bob is not among those who may approve wave 2 (wave-2): group:release-managers, user:00u1"},
		{name: "the pusher, with separation of duties", from: rm, sod: true, pushedBy: "Alice", p: person("alice", "release-managers"),
			want: "alice pushed 1.2.0 and may not approve its rollout (separationOfDuties)"},
		{name: "the pusher by subject", sod: true, pushedBy: "00u1", p: sso,
			want: "dave@example.com is 00u1, who pushed 1.2.0, and may not approve its rollout (separationOfDuties)"},
		{name: "the pusher by the provider's username", from: rm, sod: true, pushedBy: "alice", p: kc,
			want: "alice@example.com is alice, who pushed 1.2.0, and may not approve its rollout (separationOfDuties)"},
		{name: "the pusher by the provider's username, case aside", from: rm, sod: true, pushedBy: "Alice", p: kc,
			want: "alice@example.com is alice, who pushed 1.2.0, and may not approve its rollout (separationOfDuties)"},
		{name: "the pusher by email", from: rm, sod: true, pushedBy: "alice@example.com", p: google,
			want: "alice@example.com pushed 1.2.0 and may not approve its rollout (separationOfDuties)"},
		{name: "the email's local part is no name of the person", from: rm, sod: true, pushedBy: "alice", p: google, want: ""},
		{name: "another than the pusher, signed in", from: rm, sod: true, pushedBy: "bob", p: kc, want: ""},
		{name: "a user by the provider's username", from: []string{"user:alice"}, p: kc, want: ""},
		{name: "a user by the email's local part is not", from: []string{"user:alice"}, p: google,
			want: "alice@example.com is not among those who may approve wave 2 (wave-2): user:alice"},
		{name: "the pusher, without separation of duties", from: rm, pushedBy: "alice", p: person("alice", "release-managers"), want: ""},
		{name: "another than the pusher", from: rm, sod: true, pushedBy: "alice", p: person("carol", "release-managers"), want: ""},
		{name: "an unknown pusher refuses no one", from: rm, sod: true, p: person("alice", "release-managers"), want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := waves([]rollout.Cluster{cl("c1", rollout.ClusterSucceeded, "")}, []rollout.Cluster{cl("c2", rollout.ClusterPending, "")})
			r.Tag, r.PushedBy = "1.2.0", tt.pushedBy
			r.Waves[1].Approvals, r.Waves[1].ApprovalsFrom, r.Waves[1].SeparationOfDuties = 2, tt.from, tt.sod
			if diff := cmp.Diff(tt.want, r.ApprovalRefused(1, tt.p)); diff != "" {
				t.Errorf("ApprovalRefused (-want +got):\n%s", diff)
			}
		})
	}
}

// A manual verdict promoting the canary in a cluster is an approval of the
// cluster's wave: held to that wave's rule when it names approvers, to
// every such wave's for a verdict on every cluster, and to none where no
// wave needs an approval.
func TestVerdictRefused(t *testing.T) {
	person := func(name string, groups ...string) identity.Principal {
		return identity.Principal{Subject: name, Name: name, Groups: groups, Token: name, Via: identity.ViaToken}
	}
	ci := person("ci", "release-managers")
	ci.Automation = true
	rm := []string{"group:release-managers"}
	tests := []struct {
		name    string
		cluster string
		// approvals, from and sod are wave 2's (c2, c3); wave 1 (c1) needs
		// none.
		approvals int
		from      []string
		sod       bool
		p         identity.Principal
		want      string
	}{
		{name: "no wave needs an approval: automation may", cluster: "c2", p: ci, want: ""},
		{name: "no wave needs an approval: anyone may", cluster: "", p: person("dev"), want: ""},
		{name: "a cluster of a wave that needs none", cluster: "c1", approvals: 2, from: rm, sod: true, p: ci, want: ""},
		{name: "automation, in a wave that needs approvals", cluster: "c3", approvals: 1, p: ci,
			want: "ci is automation and never counts as an approver"},
		{name: "not among those the wave names", cluster: "c2", approvals: 2, from: rm, p: person("dev", "developers"),
			want: "dev is not among those who may approve wave 2 (wave-2): group:release-managers"},
		{name: "the pusher, with separation of duties", cluster: "c2", approvals: 2, from: rm, sod: true, p: person("alice", "release-managers"),
			want: "alice pushed 1.2.0 and may not approve its rollout (separationOfDuties)"},
		{name: "every cluster: the waves that name approvers", cluster: "", approvals: 2, from: rm, p: person("dev", "developers"),
			want: "dev is not among those who may approve wave 2 (wave-2): group:release-managers"},
		{name: "a member, not the pusher", cluster: "c2", approvals: 2, from: rm, sod: true, p: person("bob", "release-managers"), want: ""},
		{name: "every cluster, a member", cluster: "", approvals: 2, from: rm, sod: true, p: person("bob", "release-managers"), want: ""},
		{name: "a cluster of no wave", cluster: "c9", approvals: 2, from: rm, p: ci, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := waves([]rollout.Cluster{cl("c1", rollout.ClusterSucceeded, "")},
				[]rollout.Cluster{cl("c2", rollout.ClusterProgressing, ""), cl("c3", rollout.ClusterPending, "")})
			r.Tag, r.PushedBy = "1.2.0", "alice"
			r.Waves[1].Approvals, r.Waves[1].ApprovalsFrom, r.Waves[1].SeparationOfDuties = tt.approvals, tt.from, tt.sod
			if diff := cmp.Diff(tt.want, r.VerdictRefused(tt.cluster, tt.p)); diff != "" {
				t.Errorf("VerdictRefused(%q) (-want +got):\n%s", tt.cluster, diff)
			}
		})
	}
}

// The gate says who approved and how many more approvals it needs from
// whom.
func TestApprovalsWaiting(t *testing.T) {
	tests := []struct {
		name      string
		from      []string
		approvers []string
		want      string
	}{
		{name: "from anyone, none yet", want: "wave 2 (wave-2) waits for 2 approvals, has none"},
		{name: "from anyone, one", approvers: []string{"alice"}, want: "wave 2 (wave-2) waits for 2 approvals, has 1 (alice)"},
		{name: "from a group, none yet", from: []string{"group:release-managers"},
			want: "wave 2 (wave-2) waits for 2 approvals, has none: needs 2 more approvals from group:release-managers"},
		{name: "from a group or a user, one", from: []string{"group:release-managers", "user:carol"}, approvers: []string{"bob"},
			want: "wave 2 (wave-2) waits for 2 approvals, has 1 (bob): needs 1 more approval from group:release-managers or user:carol"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := waves([]rollout.Cluster{cl("c1", rollout.ClusterProgressing, "")}, []rollout.Cluster{cl("c2", rollout.ClusterPending, "")})
			r.Phase = rollout.Progressing
			r.Waves[1].Approvals, r.Waves[1].ApprovalsFrom, r.Waves[1].Approvers = 2, tt.from, tt.approvers
			if _, err := r.Record(events.ClusterResult{RolloutID: r.ID, Cluster: "c1"}, true); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Advance(cause(t), rollout.Gates{App: config.Application{Name: "app"}, Now: t0}); err != nil {
				t.Fatal(err)
			}
			if r.Waiting != tt.want {
				t.Errorf("waiting %q, want %q", r.Waiting, tt.want)
			}
		})
	}
}

// Plan carries the push's pusher and each wave's approvals policy.
func TestPlanApprovers(t *testing.T) {
	cfg := &config.Config{Fleet: config.Fleet{
		Clusters: []config.Cluster{{Name: "c1"}, {Name: "c2"}},
		Waves: []config.Wave{{Name: "canary", Clusters: []string{"c1"}},
			{Name: "prod", Clusters: []string{"c2"}, Approvals: &config.Approvals{Required: 2, From: []string{"group:rm"}, SeparationOfDuties: true}}},
	}}
	app := config.Application{Name: "app", Image: "registry.test/team/app", Track: config.TrackNewest}
	ro, skip, err := rollout.Plan(cfg, app, rollout.AppState{}, nil,
		events.ImageVerified{Image: "registry.test/team/app", Tag: "1.2.0", Digest: "sha256:abc", PushedBy: "alice"}, "app-1", nil)
	if err != nil || skip != "" {
		t.Fatalf("Plan: %q, %v", skip, err)
	}
	if ro.PushedBy != "alice" {
		t.Errorf("pushedBy %q, want alice", ro.PushedBy)
	}
	w := ro.Waves[1]
	if w.Approvals != 2 || len(w.ApprovalsFrom) != 1 || w.ApprovalsFrom[0] != "group:rm" || !w.SeparationOfDuties || ro.Waves[0].Approvals != 0 {
		t.Errorf("waves %+v, want prod needing 2 from group:rm with separation of duties", ro.Waves)
	}
}

// An approval that does not yet release its wave says so in the rollout's
// waiting: who approved so far, and how many more it needs.
func TestApprovalUpdatesWaiting(t *testing.T) {
	r := waves([]rollout.Cluster{cl("c1", rollout.ClusterProgressing, "")}, []rollout.Cluster{cl("c2", rollout.ClusterPending, "")})
	r.Phase = rollout.Progressing
	r.Waves[1].Approvals, r.Waves[1].ApprovalsFrom = 2, []string{"group:release-managers"}
	if _, err := r.Record(events.ClusterResult{RolloutID: r.ID, Cluster: "c1"}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Advance(cause(t), rollout.Gates{App: config.Application{Name: "app"}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, who := range []string{"bob", "bob", "carol"} {
		evs, err := r.Approve(cause(t), 1, who)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s: %d events, %s", who, len(evs), r.Waiting))
	}
	want := []string{
		"bob: 0 events, wave 2 (wave-2) waits for 2 approvals, has 1 (bob): needs 1 more approval from group:release-managers",
		"bob: 0 events, wave 2 (wave-2) waits for 2 approvals, has 1 (bob): needs 1 more approval from group:release-managers",
		"carol: 1 events, ",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waiting after each approval (-want +got):\n%s", diff)
	}
}
