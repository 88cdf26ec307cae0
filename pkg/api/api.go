package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gates"
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
	tokens    map[string]string // name -> token
	apps      map[string]bool   // the configured applications
	clusters  []ClusterInfo     // the configured clusters
	watch     Watch
	refresher Refresher
	appState  Apps              // what flotilla knows of each application
	appInfos  []ApplicationInfo // the configured applications, in order
	log       *slog.Logger

	health Health // the clusters' health (GET /api/v1/clusters)
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

// New returns the API; tokens are the API tokens by name (none refuses
// every call that changes something; a call is recorded as done by its
// token's name); log (default none) records every control.
func New(rollouts Rollouts, approvals Approvals, journal Journal, tokens map[string]string, log *slog.Logger) *API {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &API{rollouts: rollouts, approvals: approvals, journal: journal, tokens: tokens, log: log}
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
}

// authorize checks the API token of a request that changes something and
// returns the token's name: who the request is recorded as.
func (a *API) authorize(r *http.Request) (string, error) {
	if len(a.tokens) == 0 {
		return "", fault.New(fault.ErrUnauthenticated, "this call changes state and needs an API token: set server.apiToken or server.apiTokens in the config")
	}
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", fault.New(fault.ErrUnauthenticated, "missing Authorization: Bearer <API token>")
	}
	g := sha256.Sum256([]byte(got))
	name := ""
	for n, want := range a.tokens { // every token compared, in constant time
		w := sha256.Sum256([]byte(want))
		if subtle.ConstantTimeCompare(g[:], w[:]) == 1 {
			name = n
		}
	}
	if name == "" {
		return "", fault.New(fault.ErrUnauthenticated, "wrong API token")
	}
	return name, nil
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
