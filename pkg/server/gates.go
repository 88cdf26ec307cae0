package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/gates"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// validationPolicies maps the canaries of cfg's applications to their
// validation policies.
func validationPolicies(cfg *config.Config) gates.Policies {
	return func(cluster, namespace, name string) (gates.Policy, bool) {
		for _, a := range cfg.Applications {
			if a.Namespace == namespace && a.Workload.Name == name {
				return policyOf(a), true
			}
		}
		return gates.Policy{}, false
	}
}

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
func (s *Server) approve(w http.ResponseWriter, r *http.Request) {
	if err := s.authorize(r); err != nil {
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
	ro, err := s.repo.Get(r.Context(), id)
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
	a := gates.Approval{Status: req.Status, By: req.By, Reason: req.Reason, At: time.Now().UTC()}
	if err := s.approvals.Approve(r.Context(), id, req.Cluster, a); err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, gates.ErrInvalidApproval) {
			status = http.StatusBadRequest
		}
		writeJSON(w, status, map[string]string{"error": err.Error()})
		return
	}
	s.log.Info("rollout approval recorded", "rollout", id, "cluster", req.Cluster, "status", req.Status, "by", req.By)
	writeJSON(w, http.StatusOK, a)
}

// authorize checks the API token of a request that changes something.
func (s *Server) authorize(r *http.Request) error {
	want := s.cfg.Server.APITokenValue
	if want == "" {
		return errors.New("this call changes state and needs an API token: set server.apiToken in the config")
	}
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return errors.New("missing Authorization: Bearer <server.apiToken>")
	}
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	if subtle.ConstantTimeCompare(g[:], w[:]) != 1 {
		return errors.New("wrong API token")
	}
	return nil
}

func hasCluster(ro rollout.Rollout, name string) bool {
	for _, w := range ro.Waves {
		for _, c := range w.Clusters {
			if c.Name == name {
				return true
			}
		}
	}
	return false
}

// policyOf translates an application's Kanary validations for pkg/gates.
// PromQL items are Flagger metrics: pkg/canary renders them.
func policyOf(a config.Application) gates.Policy {
	v := a.Validation
	if v == nil {
		return gates.Policy{}
	}
	p := gates.Policy{Kind: a.Workload.Kind, Period: v.ValidationPeriod.Duration}
	for _, it := range v.Items {
		switch {
		case it.Manual != nil:
			p.Manual = &gates.Manual{StatusAfterDeadline: gates.Status(it.Manual.StatusAfterDeadline)}
		case it.LabelWatch != nil:
			if p.LabelWatch == nil {
				p.LabelWatch = &gates.LabelWatch{DeploymentInvalidationLabels: map[string]string{}, PodInvalidationLabels: map[string]string{}}
			}
			maps.Copy(p.LabelWatch.DeploymentInvalidationLabels, it.LabelWatch.DeploymentInvalidationLabels)
			maps.Copy(p.LabelWatch.PodInvalidationLabels, it.LabelWatch.PodInvalidationLabels)
		}
	}
	return p
}
