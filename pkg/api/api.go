package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/netip"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gates"
	"github.com/flotilla-cd/flotilla/pkg/identity"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Rollouts is the rollout state the API reads (pkg/state).
type Rollouts interface {
	Get(ctx context.Context, id string) (rollout.Rollout, error)
	List(ctx context.Context, before string, limit int) (rollout.Page, error)
	Fleet(ctx context.Context) (rollout.FleetState, error)
}

// Approvals records manual verdicts (pkg/gates).
type Approvals interface {
	Approve(ctx context.Context, rolloutID, cluster string, a gates.Approval) error
}

// Journal is where the API records the controls users send (pkg/bus).
type Journal interface {
	Append(ctx context.Context, evs ...cloudevents.Event) ([]bus.Record, error)
}

// API serves /api/v1.
type API struct {
	rollouts  Rollouts
	approvals Approvals
	journal   Journal
	apps      map[string]bool // the configured applications
	clusters  []ClusterInfo   // the configured clusters
	watch     Watch
	refresher Refresher
	appState  Apps              // what flotilla knows of each application
	appInfos  []ApplicationInfo // the configured applications, in order
	log       *slog.Logger

	health Health // the clusters' health (GET /api/v1/clusters)

	auditLog AuditLog       // GET /api/v1/audit reads it (audit.go)
	proxies  []netip.Prefix // server.trustedProxies: their X-Forwarded-For is believed
}

// WithApplications names the configured applications, which the calls
// about an application accept (others are 404).
func (a *API) WithApplications(names ...string) *API {
	a.apps = map[string]bool{}
	for _, n := range names {
		a.apps[n] = true
	}
	return a
}

// New returns the API; log (default none) records every control. Serve
// it behind an Authn (Authn.Require): a call that changes something is
// recorded as done by the principal Authn finds, and refused without one.
func New(rollouts Rollouts, approvals Approvals, journal Journal, log *slog.Logger) *API {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &API{rollouts: rollouts, approvals: approvals, journal: journal, log: log}
}

// Register adds the API's routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/rollouts", a.listRollouts)
	mux.HandleFunc("GET /api/v1/rollouts/{id}", a.getRollout)
	mux.HandleFunc("POST /api/v1/rollouts/{id}/approval", a.approve)
	mux.HandleFunc("POST /api/v1/rollouts/{id}/retry", a.retry)
	mux.HandleFunc("POST /api/v1/rollouts/{id}/pause", a.rolloutControl(events.TypeRolloutPauseRequested))
	mux.HandleFunc("POST /api/v1/rollouts/{id}/resume", a.rolloutControl(events.TypeRolloutResumeRequested))
	mux.HandleFunc("POST /api/v1/rollouts/{id}/abort", a.rolloutControl(events.TypeRolloutAbortRequested))
	mux.HandleFunc("POST /api/v1/rollouts/{id}/override", a.rolloutControl(events.TypeRolloutOverrideRequested))
	mux.HandleFunc("POST /api/v1/rollouts/{id}/rollback", a.rollBack)
	mux.HandleFunc("POST /api/v1/rollouts/{id}/waves/{wave}/approval", a.approveWave)
	mux.HandleFunc("GET /api/v1/fleet", a.getFleet)
	mux.HandleFunc("GET /api/v1/clusters", a.listClusters)
	mux.HandleFunc("GET /api/v1/watch", a.watchStream)
	mux.HandleFunc("GET /api/v1/rollouts/{id}/events", a.getTimeline)
	mux.HandleFunc("GET /api/v1/applications", a.listApplications)
	mux.HandleFunc("GET /api/v1/applications/{app}", a.getApplication)
	mux.HandleFunc("POST /api/v1/applications/{app}/quarantine", a.quarantine)
	mux.HandleFunc("POST /api/v1/applications/{app}/refresh", a.refresh)
	mux.HandleFunc("POST /api/v1/fleet/stop", a.fleetControl(events.TypeFleetStopRequested))
	mux.HandleFunc("POST /api/v1/fleet/start", a.fleetControl(events.TypeFleetStartRequested))
	mux.HandleFunc("GET /api/v1/whoami", a.whoami)
	mux.HandleFunc("GET /api/v1/audit", a.listAudit)
}

// Whoami is the answer of GET /api/v1/whoami: who the request came from.
type Whoami struct {
	// Name is the API token's name ("anonymous" without a credential,
	// where server.anonymousRead opens reads).
	Name string `json:"name"`
	// Via is how the request proved it: token, session or anonymous.
	Via identity.Via `json:"via"`
}

func (a *API) whoami(w http.ResponseWriter, r *http.Request) {
	p, ok := identity.FromContext(r.Context())
	if !ok {
		writeError(w, fault.New(fault.ErrUnauthenticated, msgNeedsToken))
		return
	}
	writeJSON(w, http.StatusOK, Whoami{Name: p.Name, Via: p.Via})
}

// authorize returns the name a request that changes something is recorded
// as: its principal's, which the authentication (Authn) put in its
// context. A request without one, or anonymous, is refused.
func (a *API) authorize(r *http.Request) (string, error) {
	p, ok := identity.FromContext(r.Context())
	if !ok || !p.Authenticated() {
		return "", fault.New(fault.ErrUnauthenticated, msgControlNeeds)
	}
	return p.Name, nil
}

// who is how a control is recorded: the token's name, and the name the
// client gave (its user), if different.
func who(token, by string) string {
	if by == "" || by == token {
		return token
	}
	return token + " (" + by + ")"
}

// writeError answers err with the status pkg/fault's table gives its kind
// (503, retry, for an error of no kind) and {"error": "..."}.
func writeError(w http.ResponseWriter, err error) {
	status, _, _ := fault.Status(err)
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
