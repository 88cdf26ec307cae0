package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-cd/flotilla/pkg/authz"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/identity"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/watch"
)

// scope is what names the project a route's permission is checked in.
type scope int

const (
	// scopeFiltered: a read of many (the lists, the fleet, the watch
	// stream): it answers only what the principal may read.
	scopeFiltered scope = iota
	// scopeRollout: the project of rollout {id}'s application.
	scopeRollout
	// scopeApplication: the project of application {app}.
	scopeApplication
	// scopeFleet: fleet-wide (stop-line): a role granted in every project.
	scopeFleet
)

// route is one route of the API: its pattern, the permission it needs
// on which resource, what names the project, and its handler. The table
// is API.routes, in api.go.
type route struct {
	pattern  string
	perm     identity.Permission
	resource string
	scope    scope
	handle   http.HandlerFunc
}

// WithAuthorizer has every route checked against az (pkg/authz: the
// projects' roles) after the authentication, answering 403 naming the
// missing permission (counted by forbidden, nil: not counted), and the
// reads filtered to what the principal may read. Without it (tests) every
// route is served as it is.
func (a *API) WithAuthorizer(az *authz.Authorizer, forbidden prometheus.Counter) *API {
	a.authz, a.forbidden = az, forbidden
	return a
}

// authorized serves rt's handler to the requests its principal may make.
func (a *API) authorized(rt route) http.Handler {
	if a.authz == nil {
		return rt.handle
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := identity.FromContext(r.Context())
		if !ok {
			writeError(w, fault.New(fault.ErrUnauthenticated, msgNeedsToken))
			return
		}
		app, rolloutID := "", ""
		switch rt.scope {
		case scopeFiltered:
			rt.handle(w, r) // the handler keeps what p may read
			return
		case scopeRollout:
			rolloutID = r.PathValue("id")
			ro, err := a.rollouts.Get(r.Context(), rolloutID)
			if err != nil {
				writeError(w, err) // 404 names no project
				return
			}
			app = ro.Application
		case scopeApplication:
			app = r.PathValue("app")
			if apps := a.catalogue().apps; apps != nil && !apps[app] {
				rt.handle(w, r) // 404: no application of that name
				return
			}
		}
		allowed, err := a.authz.Allowed(p, rt.resource, rt.perm, app)
		if err != nil {
			writeError(w, err)
			return
		}
		if !allowed {
			a.refuse(w, r, p, rt.perm, app, rolloutID)
			return
		}
		rt.handle(w, r)
	})
}

// refuse answers 403 saying what p lacks, counted and (for a control)
// audited.
func (a *API) refuse(w http.ResponseWriter, r *http.Request, p identity.Principal, perm identity.Permission, app, rolloutID string) {
	msg := fmt.Sprintf("%s may not %s in project %s (needs %s)", p.Name, perm, a.authz.ProjectOf(app), perm)
	if app == "" {
		msg = fmt.Sprintf("%s may not %s (needs %s in every project: role admin granted with *)", p.Name, perm, perm)
	}
	if a.forbidden != nil {
		a.forbidden.Inc()
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		a.auditRefused(r, string(perm), app, rolloutID, msg)
	}
	a.log.InfoContext(r.Context(), "request refused", "by", p.Name, "permission", perm, "application", app, "rollout_id", rolloutID)
	writeError(w, fault.New(fault.ErrForbidden, msg))
}

// mayRead says whether the principal of ctx may read resource res of
// application app; with no authorizer (tests), yes.
func (a *API) mayRead(ctx context.Context, res, app string) bool {
	if a.authz == nil {
		return true
	}
	p, ok := identity.FromContext(ctx)
	if !ok {
		return false
	}
	allowed, err := a.authz.Allowed(p, res, identity.Read, app)
	return err == nil && allowed
}

// readableRollouts keeps the rollouts the principal of ctx may read.
func (a *API) readableRollouts(ctx context.Context, ros []rollout.Rollout) []rollout.Rollout {
	if a.authz == nil {
		return ros
	}
	out := ros[:0:0]
	for _, ro := range ros {
		if a.mayRead(ctx, identity.ResourceRollouts, ro.Application) {
			out = append(out, ro)
		}
	}
	return out
}

// forbidRead answers 403 when the principal of r may not read res of app;
// it reports whether it did.
func (a *API) forbidRead(w http.ResponseWriter, r *http.Request, res, app string) bool {
	if a.mayRead(r.Context(), res, app) {
		return false
	}
	p, _ := identity.FromContext(r.Context())
	a.refuse(w, r, p, identity.Read, app, "")
	return true
}

// watchFilter keeps the watch stream's messages the principal of ctx may
// read: a rollout's and its events by the rollout's application (read
// from the rollout's message, else from the state, once per rollout),
// an event of no rollout by the application its payload names; an event
// naming none (the fleet stopped) goes to everyone.
type watchFilter struct {
	a    *API
	ctx  context.Context
	apps map[string]string // rollout id -> application
	read map[string]bool   // application -> may read
}

func (a *API) watchFilter(ctx context.Context) *watchFilter {
	if a.authz == nil {
		return nil
	}
	return &watchFilter{a: a, ctx: ctx, apps: map[string]string{}, read: map[string]bool{}}
}

// keep says whether m goes to the watcher.
func (f *watchFilter) keep(m watch.Message) bool {
	if f == nil {
		return true
	}
	app, known := f.apps[m.Rollout]
	switch {
	case m.Rollout != "" && !known && m.Kind == watch.KindRollout:
		var ro struct {
			Application string `json:"application"`
		}
		_ = json.Unmarshal(m.Data, &ro)
		app = ro.Application
		f.apps[m.Rollout] = app
	case m.Rollout != "" && !known:
		if ro, err := f.a.rollouts.Get(f.ctx, m.Rollout); err == nil {
			app = ro.Application
		}
		f.apps[m.Rollout] = app
	case m.Rollout == "":
		var e struct {
			Data struct {
				Application string `json:"application"`
			} `json:"data"`
		}
		_ = json.Unmarshal(m.Data, &e)
		app = e.Data.Application
		if app == "" {
			return true
		}
	}
	if app == "" {
		return false // a rollout whose application is not known: not shown
	}
	ok, seen := f.read[app]
	if !seen {
		ok = f.a.mayRead(f.ctx, identity.ResourceRollouts, app)
		f.read[app] = ok
	}
	return ok
}

// readableAudit keeps the audit records the principal of ctx may read:
// an application's by its project, the fleet's (no application) all.
func (a *API) readableAudit(ctx context.Context, recs []AuditEntry) []AuditEntry {
	if a.authz == nil {
		return recs
	}
	out := recs[:0:0]
	for _, rec := range recs {
		if rec.Application == "" || a.mayRead(ctx, identity.ResourceRollouts, rec.Application) {
			out = append(out, rec)
		}
	}
	return out
}

// projectsOf is the project of each configured application the principal
// of ctx may read.
func (a *API) projectsOf(ctx context.Context) map[string]string {
	out := map[string]string{}
	az := a.authz
	if az == nil {
		az = authz.Open()
	}
	for name := range a.catalogue().apps {
		if a.mayRead(ctx, identity.ResourceApplications, name) {
			out[name] = az.ProjectOf(name)
		}
	}
	return out
}

// Permissions is GET /api/v1/whoami's permissions: per project (its
// name, "*" for the fleet-wide ones), what the principal may do there.
type Permissions map[string][]identity.Permission

// permissionsOf is what p may do per project: everything everywhere
// without an authorizer.
func (a *API) permissionsOf(p identity.Principal) (Permissions, error) {
	az := a.authz
	if az == nil {
		az = authz.Open()
	}
	return az.Permissions(p)
}
