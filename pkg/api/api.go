package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/authz"
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
	// cat is the configured applications and clusters, swapped whole
	// when the configuration reloads (SetCatalogue).
	cat       atomic.Pointer[catalogue]
	watch     Watch
	refresher Refresher
	appState  Apps // what flotilla knows of each application
	log       *slog.Logger

	tokens     TokenRegistry     // created tokens (tokens.go); nil: none kept
	configSums map[string]string // the config tokens' SHA-256 (hex) by name

	health Health // the clusters' health (GET /api/v1/clusters)

	auditLog AuditLog       // GET /api/v1/audit reads it (audit.go)
	proxies  []netip.Prefix // server.trustedProxies: their X-Forwarded-For is believed

	authz     *authz.Authorizer  // the projects' roles (authz.go); nil: every route served
	forbidden prometheus.Counter // flotilla_api_requests_refused_total{reason="forbidden"}

	automation map[string]bool // the API tokens of machines (approvers.go)

	now func() time.Time // the engine's clock (approve.go); nil: time.Now
}

// catalogue is what the API knows of the configuration.
type catalogue struct {
	apps     map[string]bool   // the configured applications; nil: any
	appInfos []ApplicationInfo // the configured applications, in order
	clusters []ClusterInfo     // the configured clusters
}

// catalogue is the configuration the API answers with now.
func (a *API) catalogue() *catalogue {
	if c := a.cat.Load(); c != nil {
		return c
	}
	return &catalogue{}
}

// update swaps in a copy of the catalogue changed by edit.
func (a *API) update(edit func(c *catalogue)) {
	c := *a.catalogue()
	edit(&c)
	a.cat.Store(&c)
}

func appNames(infos []ApplicationInfo) map[string]bool {
	out := make(map[string]bool, len(infos))
	for _, in := range infos {
		out[in.Name] = true
	}
	return out
}

// WithApplications names the configured applications, which the calls
// about an application accept (others are 404).
func (a *API) WithApplications(names ...string) *API {
	a.update(func(c *catalogue) {
		c.apps = map[string]bool{}
		for _, n := range names {
			c.apps[n] = true
		}
	})
	return a
}

// SetCatalogue swaps in the applications and clusters of a configuration
// reloaded live (pkg/reload): the next call answers with them.
func (a *API) SetCatalogue(infos []ApplicationInfo, clusters []ClusterInfo) {
	a.update(func(c *catalogue) { c.apps, c.appInfos, c.clusters = appNames(infos), infos, clusters })
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

// routes is the API's route table: each route's pattern, the permission
// it needs (docs/design/identity.md: GET reads need read, each control its
// own), on which resource, what names the project it is checked in
// (authz.go), and its handler.
func (a *API) routes() []route {
	const ros, apps, fleet = identity.ResourceRollouts, identity.ResourceApplications, identity.ResourceFleet
	return []route{
		{"GET /api/v1/rollouts", identity.Read, ros, scopeFiltered, a.listRollouts},
		{"GET /api/v1/rollouts/{id}", identity.Read, ros, scopeRollout, a.getRollout},
		{"POST /api/v1/rollouts/{id}/approval", identity.Approve, ros, scopeRollout, a.approve},
		{"POST /api/v1/rollouts/{id}/retry", identity.Retry, ros, scopeRollout, a.retry},
		{"POST /api/v1/rollouts/{id}/pause", identity.Pause, ros, scopeRollout, a.rolloutControl(events.TypeRolloutPauseRequested)},
		{"POST /api/v1/rollouts/{id}/resume", identity.Resume, ros, scopeRollout, a.rolloutControl(events.TypeRolloutResumeRequested)},
		{"POST /api/v1/rollouts/{id}/abort", identity.Abort, ros, scopeRollout, a.rolloutControl(events.TypeRolloutAbortRequested)},
		{"POST /api/v1/rollouts/{id}/override", identity.Override, ros, scopeRollout, a.rolloutControl(events.TypeRolloutOverrideRequested)},
		{"POST /api/v1/rollouts/{id}/rollback", identity.Rollback, ros, scopeRollout, a.rollBack},
		{"POST /api/v1/rollouts/{id}/waves/{wave}/approval", identity.Approve, ros, scopeRollout, a.approveWave},
		{"GET /api/v1/rollouts/{id}/events", identity.Read, ros, scopeRollout, a.getTimeline},
		{"GET /api/v1/fleet", identity.Read, fleet, scopeFiltered, a.getFleet}, // the line stopped or not: every reader's
		{"GET /api/v1/clusters", identity.Read, apps, scopeFiltered, a.listClusters},
		{"GET /api/v1/watch", identity.Read, ros, scopeFiltered, a.watchStream},
		{"GET /api/v1/applications", identity.Read, apps, scopeFiltered, a.listApplications},
		{"GET /api/v1/applications/{app}", identity.Read, apps, scopeApplication, a.getApplication},
		{"POST /api/v1/applications/{app}/quarantine", identity.Quarantine, apps, scopeApplication, a.quarantine},
		{"POST /api/v1/applications/{app}/refresh", identity.Refresh, apps, scopeApplication, a.refresh},
		{"POST /api/v1/fleet/stop", identity.StopLine, fleet, scopeFleet, a.fleetControl(events.TypeFleetStopRequested)},
		{"POST /api/v1/fleet/start", identity.StopLine, fleet, scopeFleet, a.fleetControl(events.TypeFleetStartRequested)},
		{"GET /api/v1/whoami", identity.Read, ros, scopeFiltered, a.whoami}, // who asks, and what it may
		{"GET /api/v1/audit", identity.Read, ros, scopeFiltered, a.listAudit},
		{"POST /api/v1/tokens", identity.ManageTokens, fleet, scopeFleet, a.createToken},
		{"GET /api/v1/tokens", identity.ManageTokens, fleet, scopeFleet, a.listTokens},
		{"POST /api/v1/tokens/{name}/revoke", identity.ManageTokens, fleet, scopeFleet, a.revokeToken},
	}
}

// Register adds the API's routes to mux, each behind its authorization.
func (a *API) Register(mux *http.ServeMux) {
	for _, rt := range a.routes() {
		mux.Handle(rt.pattern, a.marked(a.authorized(rt)))
	}
}

// Whoami is the answer of GET /api/v1/whoami: who the request came from.
type Whoami struct {
	// Name is the API token's name, or a person's e-mail when they signed
	// in through server.sso ("anonymous" without a credential, where
	// server.anonymousRead opens reads).
	Name string `json:"name"`
	// Username is a person's login name at the OpenID provider
	// (server.sso.usernameClaim): the name separation of duties compares
	// with a pusher's. Empty for an API token.
	Username string `json:"username,omitempty"`
	// Via is how the request proved it: token, session or anonymous.
	Via identity.Via `json:"via"`
	// Groups are the API token's groups (server.apiTokens[].groups), or
	// the groups the provider gave a person (server.sso.groupsClaim).
	Groups []string `json:"groups,omitempty"`
	// Permissions are what it may do, per project ("*": the fleet-wide
	// stop-line); a project where it may do nothing is left out. Without
	// projects and rbac, "default" holds every permission.
	Permissions Permissions `json:"permissions"`
	// Applications are the project of each application it may read
	// (the web UI offers the controls its project's permissions allow).
	Applications map[string]string `json:"applications"`
}

func (a *API) whoami(w http.ResponseWriter, r *http.Request) {
	p, ok := identity.FromContext(r.Context())
	if !ok {
		writeError(w, fault.New(fault.ErrUnauthenticated, msgNeedsToken))
		return
	}
	perms, err := a.permissionsOf(p)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, Whoami{Name: p.Name, Username: p.Username, Via: p.Via, Groups: p.Groups, Permissions: perms, Applications: a.projectsOf(r.Context())})
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
