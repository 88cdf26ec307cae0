package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gates"
	"github.com/flotilla-cd/flotilla/pkg/identity"
)

// ApprovalRequest is the body of POST /api/v1/rollouts/{id}/approval.
type ApprovalRequest struct {
	// Status is "valid" (promote) or "invalid" (roll back).
	Status gates.Status `json:"status"`
	// Cluster limits the verdict to one cluster; empty means every cluster.
	Cluster string `json:"cluster,omitempty"`
	By      string `json:"by,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// WithClock sets the clock the approvals are dated by (default time.Now):
// the engine's (app.Options.Clock), virtual under `flotilla simulate`.
func (a *API) WithClock(now func() time.Time) *API {
	a.now = now
	return a
}

// clock is the time an approval is given at.
func (a *API) clock() time.Time {
	if a.now == nil {
		return time.Now()
	}
	return a.now()
}

// approve records a manual verdict on a rollout, for one cluster or all.
// A verdict promoting the canary (valid) is refused 403, audited as
// refused, when the caller's approval of the cluster's wave would not
// count (automation, not among the wave's approvals.from, the version's
// pusher under separationOfDuties: approvers.go); a rejection (invalid)
// needs the approve permission only.
func (a *API) approve(w http.ResponseWriter, r *http.Request) {
	name, err := a.authorize(r)
	if err != nil {
		writeError(w, err)
		return
	}
	id := r.PathValue("id")
	var req ApprovalRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, fault.Permanent(fmt.Errorf("decoding approval: %w", err)))
		return
	}
	ro, err := a.rollouts.Get(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	if req.Cluster != "" && !hasCluster(ro, req.Cluster) {
		writeError(w, fault.Permanent(fmt.Errorf("rollout %s has no cluster %q", id, req.Cluster)))
		return
	}
	if req.Status != gates.StatusValid && req.Status != gates.StatusInvalid {
		writeError(w, fault.Permanent(fmt.Errorf("%w: status %q, want valid or invalid", gates.ErrInvalidApproval, req.Status)))
		return
	}
	rec := events.AuditRecorded{Application: ro.Application, RolloutID: id, Cluster: req.Cluster, Detail: string(req.Status), Reason: req.Reason}
	if req.Status == gates.StatusValid {
		// Promoting is approving the cluster's wave: the same rule as the
		// wave's approvals (pkg/rollout's VerdictRefused).
		p, _ := identity.FromContext(r.Context())
		if why := ro.VerdictRefused(req.Cluster, p); why != "" {
			a.refuseApproval(w, r, rec, why)
			return
		}
	}
	v := gates.Approval{Status: req.Status, By: who(name, req.By), Reason: req.Reason, At: a.clock().UTC()}
	// Audited before it is kept: no approval without its record.
	if !a.audit(w, r, a.auditOf(r, ActionApprove, rec)) {
		return
	}
	if err := a.approvals.Approve(r.Context(), id, req.Cluster, v); err != nil {
		if errors.Is(err, gates.ErrInvalidApproval) {
			err = fault.Permanent(err)
		}
		writeError(w, err)
		return
	}
	a.log.InfoContext(r.Context(), "rollout approval recorded", "rollout_id", id, "cluster", req.Cluster, "status", req.Status, "by", v.By)
	writeJSON(w, http.StatusOK, v)
}
