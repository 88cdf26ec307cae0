package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/gates"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
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

// approve records a manual verdict on a rollout. It needs the API token.
func (a *API) approve(w http.ResponseWriter, r *http.Request) {
	if err := a.authorize(r); err != nil {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": err.Error()})
		return
	}
	id := r.PathValue("id")
	var req ApprovalRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "decoding approval: " + err.Error()})
		return
	}
	ro, err := a.rollouts.Get(r.Context(), id)
	switch {
	case errors.Is(err, rollout.ErrNotFound):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		return
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	if req.Cluster != "" && !hasCluster(ro, req.Cluster) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("rollout %s has no cluster %q", id, req.Cluster)})
		return
	}
	v := gates.Approval{Status: req.Status, By: req.By, Reason: req.Reason, At: time.Now().UTC()}
	if err := a.approvals.Approve(r.Context(), id, req.Cluster, v); err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, gates.ErrInvalidApproval) {
			status = http.StatusBadRequest
		}
		writeJSON(w, status, map[string]string{"error": err.Error()})
		return
	}
	a.log.Info("rollout approval recorded", "rollout", id, "cluster", req.Cluster, "status", req.Status, "by", req.By)
	writeJSON(w, http.StatusOK, v)
}
