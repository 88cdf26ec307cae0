package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/identity"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// RetryRequest is the body of POST /api/v1/rollouts/{id}/retry (all
// optional).
type RetryRequest struct {
	// Cluster limits the retry to one cluster of the rollout.
	Cluster string `json:"cluster,omitempty"`
	// By names who asked, for the record.
	By string `json:"by,omitempty"`
	// Reason is why, for the audit.
	Reason string `json:"reason,omitempty"`
}

// RetryResponse answers a retry: the event journaled for it.
type RetryResponse struct {
	EventID string `json:"eventId"`
	Attempt int    `json:"attempt"`
	// Retrying says what will be tried again.
	Retrying string `json:"retrying"`
}

// retry journals a user's retry of a rollout: the reverts of a rollback
// that failed, and the events functions gave up on (see functions/rollback).
func (a *API) retry(w http.ResponseWriter, r *http.Request) {
	var req RetryRequest
	name, ok := a.authorizedRequest(w, r, &req)
	if !ok {
		return
	}
	id := r.PathValue("id")
	ro, err := a.rollouts.Get(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	if req.Cluster != "" && !hasCluster(ro, req.Cluster) {
		writeError(w, fault.Permanent(fmt.Errorf("rollout %s has no cluster %q", id, req.Cluster)))
		return
	}
	if ro.Phase.Done() {
		writeError(w, fault.New(fault.ErrConflict, fmt.Sprintf("rollout %s has finished (%s): a finished rollout does not change, push the image again to roll it out anew", id, ro.Phase)))
		return
	}
	what := retrying(ro, req.Cluster)
	if what == "" {
		writeError(w, fault.New(fault.ErrConflict, fmt.Sprintf("rollout %s is %s and nothing of it failed that a retry could do again", id, ro.Phase)))
		return
	}
	attempt := ro.Retries + 1
	e, ok := a.journalEvent(w, r, fmt.Sprintf("retry/%s/%d", id, attempt), events.TypeRolloutRetryRequested, id,
		events.RolloutRetryRequested{RolloutID: id, Cluster: req.Cluster, Attempt: attempt, User: who(name, req.By)},
		a.auditOf(r, ActionRetry, events.AuditRecorded{Application: ro.Application, RolloutID: id, Cluster: req.Cluster, Reason: req.Reason}))
	if !ok {
		return
	}
	writeJSON(w, http.StatusAccepted, RetryResponse{EventID: e.ID(), Attempt: attempt, Retrying: what})
}

// retrying says what a retry of ro (limited to cluster, when set) would do
// again, "" when nothing.
func retrying(ro rollout.Rollout, cluster string) string {
	var reverts, failures []string
	var what []string
	if ro.Phase == rollout.Progressing {
		var clusters []string
		for w := 0; w <= ro.Wave && w < len(ro.Waves); w++ {
			for _, c := range ro.Waves[w].Clusters {
				if c.Phase == rollout.ClusterFailed && (cluster == "" || c.Name == cluster) {
					clusters = append(clusters, c.Name)
				}
			}
		}
		if len(clusters) > 0 {
			what = append(what, fmt.Sprintf("the failed clusters %v (applied again; Flagger analyses them anew)", clusters))
		}
		if ro.Wave < len(ro.Waves) && cluster == "" && ro.Waves[ro.Wave].PullRequest.MergeFailed() {
			pr := ro.Waves[ro.Wave].PullRequest
			what = append(what, fmt.Sprintf("the merge of pull request #%d (the host is asked again)", pr.Number))
		}
	}
	if ro.Phase == rollout.RollbackFailed {
		for _, c := range ro.InPhase(rollout.ClusterRevertFailed) {
			if cluster == "" || c.Name == cluster {
				reverts = append(reverts, c.Name)
			}
		}
	}
	for _, f := range ro.Failures {
		if !f.Retried && (cluster == "" || f.Cluster == cluster) && f.EventType != events.TypePipelineRunRequested {
			failures = append(failures, f.Function+" on "+f.EventType)
		}
	}
	if len(reverts) > 0 {
		what = append(what, fmt.Sprintf("the reverts of %v", reverts))
	}
	if len(failures) > 0 {
		what = append(what, fmt.Sprintf("%v", failures))
	}
	return strings.Join(what, ", and ")
}

// ControlRequest is the body of the controls (pause, resume, abort, fleet
// stop and start; all optional).
type ControlRequest struct {
	Reason string `json:"reason,omitempty"`
	// By names the client's user, recorded after the token's name.
	By string `json:"by,omitempty"`
}

// ControlResponse answers a control: the event journaled for it.
type ControlResponse struct {
	EventID string `json:"eventId"`
	By      string `json:"by"`
}

// control reads a control's body and who sent it.
func (a *API) control(w http.ResponseWriter, r *http.Request) (events.Control, bool) {
	var req ControlRequest
	name, ok := a.authorizedRequest(w, r, &req)
	if !ok {
		return events.Control{}, false
	}
	return events.Control{User: who(name, req.By), Reason: req.Reason}, true
}

// authorizedRequest authorizes a request that changes something and
// decodes its (optional) JSON body into req, unknown fields refused; it
// answers the error itself and reports false on one. It returns the
// token's name.
func (a *API) authorizedRequest(w http.ResponseWriter, r *http.Request, req any) (string, bool) {
	name, err := a.authorize(r)
	if err != nil {
		writeError(w, err)
		return "", false
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, fault.Permanent(fmt.Errorf("decoding the request: %w", err)))
		return "", false
	}
	return name, true
}

// journalControl journals a control with its audit record au and answers
// 202.
func (a *API) journalControl(w http.ResponseWriter, r *http.Request, typ string, c events.Control, au events.AuditRecorded) {
	if e, ok := a.journalEvent(w, r, fmt.Sprintf("control/%s/%d", typ, time.Now().UnixNano()), typ, c.RolloutID, c, au); ok {
		writeJSON(w, http.StatusAccepted, ControlResponse{EventID: e.ID(), By: c.User})
	}
}

// journalEvent journals a user's control as an event of type typ with
// payload p (of rollout rolloutID, if set), and beside it, in the same
// append, its audit record au (a.auditOf), and logs it; on a failure it
// answers the error itself and reports false.
func (a *API) journalEvent(w http.ResponseWriter, r *http.Request, id, typ, rolloutID string, p any, au events.AuditRecorded) (cloudevents.Event, bool) {
	e, err := events.New(id, "/flotilla/api", typ, p)
	if err != nil {
		writeError(w, err)
		return e, false
	}
	if rolloutID != "" {
		e.SetExtension(events.ExtRolloutID, rolloutID)
	}
	ae, err := auditEvent(au, id)
	if err != nil {
		writeError(w, err)
		return e, false
	}
	if _, err := a.journal.Append(r.Context(), e, ae); err != nil {
		writeError(w, fmt.Errorf("journaling %s: %w", typ, err))
		return e, false
	}
	a.log.InfoContext(r.Context(), "control requested", "type", typ, "id", id, "rollout_id", rolloutID, "payload", p)
	return e, true
}

// rolloutControl pauses, resumes or aborts a rollout; 409 when the rollout
// is in no state for it.
func (a *API) rolloutControl(typ string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := a.control(w, r)
		if !ok {
			return
		}
		id := r.PathValue("id")
		ro, err := a.rollouts.Get(r.Context(), id)
		if err != nil {
			writeError(w, err)
			return
		}
		if typ == events.TypeRolloutOverrideRequested && strings.TrimSpace(c.Reason) == "" {
			writeError(w, fault.Permanent(errors.New("an override needs a reason, for the record")))
			return
		}
		if msg := controlConflict(typ, ro); msg != "" {
			writeError(w, fault.New(fault.ErrConflict, fmt.Sprintf("rollout %s %s", id, msg)))
			return
		}
		c.RolloutID = id
		a.journalControl(w, r, typ, c, a.auditOf(r, actionOf[typ], events.AuditRecorded{Application: ro.Application, RolloutID: id, Reason: c.Reason}))
	}
}

// controlConflict says why ro cannot take a control of type typ, "" if it
// can.
func controlConflict(typ string, ro rollout.Rollout) string {
	switch {
	case ro.Phase.Done():
		return fmt.Sprintf("has finished (%s)", ro.Phase)
	case typ == events.TypeRolloutPauseRequested && ro.Paused != "":
		return "is paused already (" + ro.Paused + ")"
	case typ == events.TypeRolloutResumeRequested && ro.Paused == "":
		return "is not paused"
	case typ == events.TypeRolloutOverrideRequested && !strings.HasPrefix(ro.Waiting, "freeze window"):
		return "is not held by a freeze window"
	case typ != events.TypeRolloutResumeRequested && ro.Phase != rollout.Progressing && ro.Phase != rollout.Queued:
		return fmt.Sprintf("is %s: only a rollout in progress or queued can be paused or aborted", ro.Phase)
	}
	return ""
}

// fleetControl stops or starts the line.
func (a *API) fleetControl(typ string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := a.control(w, r)
		if !ok {
			return
		}
		detail := "stop"
		if typ == events.TypeFleetStartRequested {
			detail = "start"
		}
		a.journalControl(w, r, typ, c, a.auditOf(r, actionOf[typ], events.AuditRecorded{Detail: detail, Reason: c.Reason}))
	}
}

// getFleet answers the fleet's state.
func (a *API) getFleet(w http.ResponseWriter, r *http.Request) {
	st, err := a.rollouts.Fleet(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// approveWave records the caller (its principal's name) as an approver of
// a wave, named by its number (from 1) or name; 409 when the wave needs no
// approval, has started, or has the caller's already; 403, audited as
// refused, when the caller's approval does not count (automation, not
// among the wave's approvals.from, the version's pusher under
// separationOfDuties: approvers.go).
func (a *API) approveWave(w http.ResponseWriter, r *http.Request) {
	var req ControlRequest
	name, ok := a.authorizedRequest(w, r, &req)
	if !ok {
		return
	}
	id := r.PathValue("id")
	ro, err := a.rollouts.Get(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	idx, err := waveIndex(ro, r.PathValue("wave"))
	if err != nil {
		writeError(w, err)
		return
	}
	wave := ro.Waves[idx]
	conflict := ""
	switch {
	case ro.Phase.Done():
		conflict = fmt.Sprintf("has finished (%s)", ro.Phase)
	case wave.Approvals == 0:
		conflict = fmt.Sprintf("needs no approval for wave %d (%s)", idx+1, wave.Name)
	case idx < ro.Wave:
		conflict = fmt.Sprintf("is past wave %d (%s)", idx+1, wave.Name)
	case slices.Contains(wave.Approvers, name):
		conflict = fmt.Sprintf("has %s's approval of wave %d (%s) already: approvals must come from distinct people", name, idx+1, wave.Name)
	}
	if conflict != "" {
		writeError(w, fault.New(fault.ErrConflict, "rollout "+id+" "+conflict))
		return
	}
	p, _ := identity.FromContext(r.Context())
	if why := ro.ApprovalRefused(idx, p); why != "" {
		a.refuseApproval(w, r, events.AuditRecorded{Application: ro.Application, RolloutID: id}, why)
		return
	}
	user := who(name, req.By)
	if e, ok := a.journalEvent(w, r, fmt.Sprintf("approval/%s/%d/%s", id, idx, name), events.TypeWaveApprovalRequested, id,
		events.WaveApproval{RolloutID: id, Wave: idx, Approver: name, User: user, Reason: req.Reason},
		a.auditOf(r, ActionApprove, events.AuditRecorded{Application: ro.Application, RolloutID: id, WaveNumber: idx + 1, WaveName: wave.Name, Reason: req.Reason})); ok {
		writeJSON(w, http.StatusAccepted, ControlResponse{EventID: e.ID(), By: user})
	}
}

// waveIndex finds a wave of ro by number (from 1) or name.
func waveIndex(ro rollout.Rollout, ref string) (int, error) {
	for i, w := range ro.Waves {
		if w.Name == ref || strconv.Itoa(i+1) == ref {
			return i, nil
		}
	}
	return 0, fault.Permanent(fmt.Errorf("rollout %s has no wave %q (its waves: 1 to %d, or by name)", ro.ID, ref, len(ro.Waves)))
}

// QuarantineRequest is the body of POST
// /api/v1/applications/{app}/quarantine: a tag (every digest of it) or a
// digest, and why (required).
type QuarantineRequest struct {
	Tag    string `json:"tag,omitempty"`
	Digest string `json:"digest,omitempty"`
	Reason string `json:"reason"`
	By     string `json:"by,omitempty"`
}

// quarantine marks a version of an application bad: refused from now on,
// and the rollouts in flight carrying it are aborted.
func (a *API) quarantine(w http.ResponseWriter, r *http.Request) {
	var req QuarantineRequest
	name, ok := a.authorizedRequest(w, r, &req)
	if !ok {
		return
	}
	app := r.PathValue("app")
	switch {
	case !a.catalogue().apps[app]:
		writeError(w, fault.New(fault.ErrNotFound, fmt.Sprintf("no application %q is configured", app)))
		return
	case (req.Tag == "") == (req.Digest == ""):
		writeError(w, fault.Permanent(errors.New("name the version to quarantine: exactly one of tag and digest")))
		return
	case strings.TrimSpace(req.Reason) == "":
		writeError(w, fault.Permanent(errors.New("a quarantine needs a reason, for the record")))
		return
	}
	user := who(name, req.By)
	if e, ok := a.journalEvent(w, r, fmt.Sprintf("quarantine/%s/%s%s/%d", app, req.Tag, req.Digest, time.Now().UnixNano()),
		events.TypeVersionQuarantineRequested, "",
		events.QuarantineRequested{Application: app, Tag: req.Tag, Digest: req.Digest, User: user, Reason: req.Reason},
		a.auditOf(r, ActionQuarantine, events.AuditRecorded{Application: app, Detail: req.Tag + req.Digest, Reason: req.Reason})); ok {
		writeJSON(w, http.StatusAccepted, ControlResponse{EventID: e.ID(), By: user})
	}
}

// rollBack rolls the fleet back from a succeeded rollout to the version
// before it; 409 unless the rollout succeeded and was not rolled back yet.
func (a *API) rollBack(w http.ResponseWriter, r *http.Request) {
	c, ok := a.control(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	ro, err := a.rollouts.Get(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	if ro.Phase != rollout.Succeeded {
		writeError(w, fault.New(fault.ErrConflict, fmt.Sprintf("rollout %s is %s: only a succeeded rollout is rolled back this way (abort one in progress)", id, ro.Phase)))
		return
	}
	if _, err := a.rollouts.Get(r.Context(), "rollback-"+id); err == nil {
		writeError(w, fault.New(fault.ErrConflict, fmt.Sprintf("rollout %s is rolled back already: see rollout rollback-%s", id, id)))
		return
	}
	c.RolloutID = id
	a.journalControl(w, r, events.TypeRolloutRollbackRequested, c,
		a.auditOf(r, ActionRollback, events.AuditRecorded{Application: ro.Application, RolloutID: id, Reason: c.Reason}))
}
