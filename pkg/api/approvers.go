package api

import (
	"net/http"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/identity"
)

// WithAutomation names the API tokens machines use (server.apiToken's
// "default" and server.apiTokens[].automation): their principals are
// marked automation (identity.Principal.Automation), so the audit says so
// and their approval of a wave never counts (pkg/rollout's
// ApprovalRefused).
func (a *API) WithAutomation(tokens ...string) *API {
	a.automation = map[string]bool{}
	for _, t := range tokens {
		a.automation[t] = true
	}
	return a
}

// marked serves h with the principal of r marked automation when its
// token is one of a.automation.
func (a *API) marked(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := identity.FromContext(r.Context()); ok && p.Token != "" && a.automation[p.Token] && !p.Automation {
			p.Automation = true
			r = r.WithContext(identity.WithPrincipal(r.Context(), p))
		}
		h.ServeHTTP(w, r)
	})
}

// refuseApproval answers 403 to an approval that does not count (why:
// pkg/rollout's ApprovalRefused, of a wave or of a cluster's verdict),
// audited as refused with rec (the application, rollout, cluster or wave
// it was about): it changes nothing.
func (a *API) refuseApproval(w http.ResponseWriter, r *http.Request, rec events.AuditRecorded, why string) {
	if a.forbidden != nil {
		a.forbidden.Inc()
	}
	a.auditRefusal(r, ActionApprove, pathWave(r, rec), why)
	a.log.InfoContext(r.Context(), "approval refused", "rollout_id", rec.RolloutID, "cluster", rec.Cluster, "why", why)
	writeError(w, fault.New(fault.ErrForbidden, why))
}
