package api

import (
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/identity"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// X-Forwarded-For is believed only from a trusted proxy, read from its
// end: the nearest hop that is not a trusted proxy (a client's own header,
// which the proxy appends to, is not believed).
func TestRemoteAddr(t *testing.T) {
	a := New(nil, nil, nil, nil).WithTrustedProxies(netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::1/128"))
	tests := []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"no proxy", "192.0.2.1:5000", nil, "192.0.2.1"},
		{"an untrusted peer's header is ignored", "192.0.2.1:5000", []string{"203.0.113.7"}, "192.0.2.1"},
		{"a trusted proxy: the hop it was reached from", "10.1.2.3:5000", []string{"203.0.113.7"}, "203.0.113.7"},
		{"a chain of trusted proxies: the nearest untrusted hop", "10.1.2.3:5000", []string{"203.0.113.7, 10.9.9.9"}, "203.0.113.7"},
		{"a client's forged hop before the proxy's: the proxy's", "10.1.2.3:5000", []string{"198.51.100.66, 203.0.113.7"}, "203.0.113.7"},
		{"two headers: one list, read from its end", "10.1.2.3:5000", []string{"198.51.100.66", "203.0.113.7"}, "203.0.113.7"},
		{"every hop trusted: the first", "10.1.2.3:5000", []string{"10.4.4.4, 10.9.9.9"}, "10.4.4.4"},
		{"a trusted proxy without the header", "10.1.2.3:5000", nil, "10.1.2.3"},
		{"a trusted proxy, an empty header", "10.1.2.3:5000", []string{" "}, "10.1.2.3"},
		{"a trusted IPv6 proxy", "[2001:db8::1]:443", []string{"2001:db8::42"}, "2001:db8::42"},
		{"an untrusted IPv6 peer", "[2001:db8::2]:443", []string{"2001:db8::42"}, "2001:db8::2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/api/v1/fleet/stop", nil)
			r.RemoteAddr = tt.peer
			for _, h := range tt.xff {
				r.Header.Add("X-Forwarded-For", h)
			}
			if diff := cmp.Diff(tt.want, a.remoteAddr(r)); diff != "" {
				t.Errorf("remoteAddr (-want +got):\n%s", diff)
			}
		})
	}
}

// auditRefused (the authorization's 403s call it) journals the refusal
// with who asked, from where, and why, in the rollout's timeline.
func TestAuditRefused(t *testing.T) {
	s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	a := New(nil, nil, s, nil)
	r := httptest.NewRequest("POST", "/api/v1/rollouts/r4/waves/prod/approval", nil)
	r.SetPathValue("id", "r4")
	r.SetPathValue("wave", "2")
	r.Header.Set("User-Agent", "flotilla/1.0")
	p := identity.OfToken("ci", identity.ViaToken)
	p.Groups, p.Automation = []string{"ci"}, true
	r = r.WithContext(identity.WithPrincipal(r.Context(), p))
	a.auditRefused(r, ActionApprove, "shop", "r4", "ci may not approve in project payments (needs approve)")
	recs, err := s.Read(t.Context(), 0, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("journal: %d records (%v), want 1", len(recs), err)
	}
	got, err := events.Decode[events.AuditRecorded](recs[0].Event)
	if err != nil {
		t.Fatal(err)
	}
	want := events.AuditRecorded{
		Principal: events.AuditPrincipal{Subject: "ci", Name: "ci", Groups: []string{"ci"}, Token: "ci", Automation: true, Via: "token"},
		Action:    "approve", Application: "shop", RolloutID: "r4", WaveNumber: 2,
		Decision: "refused", Why: "ci may not approve in project payments (needs approve)",
		RemoteAddr: "192.0.2.1", UserAgent: "flotilla/1.0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit record (-want +got):\n%s", diff)
	}
	if rid := events.RolloutID(recs[0].Event); rid != "r4" || recs[0].Event.Type() != events.TypeAuditRecorded {
		t.Errorf("event %s of rollout %q, want %s of r4", recs[0].Event.Type(), rid, events.TypeAuditRecorded)
	}
}
