package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// Refresher polls an application's registry now (pkg/poll.Poller).
type Refresher interface {
	Refresh(ctx context.Context, app string) (RefreshResponse, error)
}

// RefreshResponse answers POST /api/v1/applications/{app}/refresh: what the
// poll found.
type RefreshResponse struct {
	Application string `json:"application"`
	Image       string `json:"image"`
	// Tags is how many tags the registry listed.
	Tags int `json:"tags"`
	// Newest is the newest tag the application would roll out that no
	// rollout was started for ("" when none: Reason says why), Digest what
	// it points at.
	Newest string `json:"newest,omitempty"`
	Digest string `json:"digest,omitempty"`
	// Started: Newest was fed in as a push (EventID), marked source poll;
	// verify and plan take it from there, as a webhook's.
	Started bool      `json:"started"`
	EventID string    `json:"eventId,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at"`
	// By is who asked (the API token's name, and the client's user).
	By string `json:"by"`
	// Members, of a release set of image members, is what the poll of
	// each member's repository found; the fields above sum them up.
	Members []RefreshMember `json:"members,omitempty"`
}

// RefreshMember is what a refresh of a release set found of one image
// member.
type RefreshMember struct {
	Application string `json:"application"`
	Image       string `json:"image"`
	Tags        int    `json:"tags"`
	Newest      string `json:"newest,omitempty"`
	Digest      string `json:"digest,omitempty"`
	Started     bool   `json:"started"`
	EventID     string `json:"eventId,omitempty"`
	Reason      string `json:"reason,omitempty"`
}

// WithRefresher lets the API poll an application now.
func (a *API) WithRefresher(r Refresher) *API {
	a.refresher = r
	return a
}

// refresh polls an application's registry now and answers what it found.
// It needs an API token: it may start a rollout.
func (a *API) refresh(w http.ResponseWriter, r *http.Request) {
	var req ControlRequest
	name, ok := a.authorizedRequest(w, r, &req)
	if !ok {
		return
	}
	app := r.PathValue("app")
	switch {
	case !a.catalogue().apps[app]:
		writeError(w, fault.New(fault.ErrNotFound, fmt.Sprintf("no application %q is configured", app)))
		return
	case a.refresher == nil:
		writeError(w, fault.New(fault.ErrNotFound, "this flotilla does not poll registries"))
		return
	}
	// Audited before the poll: it may start a rollout.
	if !a.audit(w, r, a.auditOf(r, ActionRefresh, events.AuditRecorded{Application: app, Reason: req.Reason})) {
		return
	}
	res, err := a.refresher.Refresh(r.Context(), app)
	if err != nil {
		writeError(w, fmt.Errorf("refreshing %s: %w", app, err))
		return
	}
	res.By = who(name, req.By)
	a.log.InfoContext(r.Context(), "refresh requested", "application", app, "by", res.By, "newest", res.Newest,
		"started", res.Started, "event_id", res.EventID)
	writeJSON(w, http.StatusOK, res)
}
