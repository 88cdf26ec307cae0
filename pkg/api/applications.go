package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/identity"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Apps is what flotilla knows of each application (pkg/state).
type Apps interface {
	App(ctx context.Context, name string) (rollout.AppState, error)
}

// ApplicationInfo is a configured application, as the applications'
// views name it.
type ApplicationInfo struct {
	Name string
	// Kind is KindImage or KindGit.
	Kind string
	// Repository is the image ("registry/repository") or the git
	// repository's URL, without credentials; Branch the git branch.
	Repository string
	Branch     string
	// PollInterval is how often flotilla polls it (0: never).
	PollInterval time.Duration
}

// Kinds of application (ApplicationView.Kind).
const (
	KindImage = "image" // an image repository's tags
	KindGit   = "git"   // a git repository's branch (or tags)
)

// ApplicationView answers GET /api/v1/applications (a JSON array, one per
// configured application, in the configuration's order) and GET
// /api/v1/applications/{app} (one; 404 {"error": "no application \"x\" is
// configured"} for an unknown name). Both read no token, as the other
// GETs. It says what flotilla last saw of the application, which push
// started no rollout and why, what the fleet runs, and whether the
// application's webhook is silent. Times are RFC 3339 in UTC; a field
// left out (null pointer, "" or false) is something not seen yet.
//
//	{
//	  "name": "shop", "kind": "image", "repository": "registry.example.com/shop",
//	  "pollInterval": "5m0s",
//	  "deployed": {"tag": "1.4.0", "digest": "sha256:…", "rollout": "shop-3fa2…", "at": "…"},
//	  "latest": {"tag": "1.5.0", "rollout": "shop-9c1d…", "phase": "Progressing"},
//	  "queued": "shop-77ab…",
//	  "lastSeen": {"tag": "1.5.0", "digest": "sha256:…", "source": "poll", "at": "…", "eventId": "poll/…"},
//	  "lastWebhook": {"tag": "1.4.0", "digest": "sha256:…", "source": "webhook", "at": "…", "eventId": "…"},
//	  "lastSkipped": {"tag": "2.0.0", "digest": "sha256:…", "source": "webhook", "outcome": "skipped",
//	                  "reason": "2.0.0 is outside track minor of 1.4.0", "at": "…", "eventId": "…"},
//	  "webhookSilent": true,
//	  "silence": {"tag": "1.5.0", "digest": "sha256:…", "found": "…", "eventId": "poll/…", "lastWebhook": {…}},
//	  "quarantined": [{"tag": "1.3.0", "by": "ops", "reason": "…", "at": "…"}],
//	  "drift": {"digest": "sha256:…", "tag": "1.4.0", "since": "…",
//	            "clusters": [{"cluster": "eu-2", "state": "drifted", "image": "…:1.3.9", "reason": "…"}]}
//	}
//
// lastSeen.error says why a push is not verified yet (the registry's
// answer; it is retried). lastSkipped.outcome is "skipped" (the version
// policy, a tag filter, a quarantine, a git push changing nothing tracked)
// or "rejected" (unsigned, a tag the registry does not resolve, a commit
// not on the branch). webhookSilent is true from a poll finding a version
// no webhook announced (silence says which) until a webhook of the
// application arrives again.
type ApplicationView struct {
	Name         string `json:"name"`
	Kind         string `json:"kind"`
	Repository   string `json:"repository"`
	Branch       string `json:"branch,omitempty"`
	PollInterval string `json:"pollInterval,omitempty"`
	// Deployed is what the whole fleet last converged on: what last rolled
	// out (nil before a rollout of it succeeded).
	Deployed *Deployment `json:"deployed,omitempty"`
	// Latest is the newest version a rollout was started for (in flight,
	// or the deployed one).
	Latest *Latest `json:"latest,omitempty"`
	// Queued is the rollout waiting for the one in flight.
	Queued        string               `json:"queued,omitempty"`
	LastSeen      *rollout.Seen        `json:"lastSeen,omitempty"`
	LastWebhook   *rollout.Seen        `json:"lastWebhook,omitempty"`
	LastSkipped   *rollout.Skipped     `json:"lastSkipped,omitempty"`
	WebhookSilent bool                 `json:"webhookSilent"`
	Silence       *rollout.Silence     `json:"silence,omitempty"`
	Quarantined   []rollout.Quarantine `json:"quarantined,omitempty"`
	// Drift is what the latest check of the clusters against the deployed
	// digest found (pkg/reconcile): each cluster not current (to catch
	// up, drifted, without a workload, unreadable), since when; nil
	// before the first check.
	Drift *rollout.DriftStatus `json:"drift,omitempty"`
}

// Deployment is a version the fleet converged on, and the rollout that
// brought it.
type Deployment struct {
	Tag     string    `json:"tag"`
	Digest  string    `json:"digest,omitempty"`
	Rollout string    `json:"rollout,omitempty"`
	At      time.Time `json:"at,omitzero"`
}

// Latest is the newest version a rollout was started for, and where
// that rollout stands (its phase: Progressing, Queued, Failed while it
// rolls back, Succeeded, RolledBack, ...; "" when it is gone).
type Latest struct {
	Tag     string `json:"tag"`
	Rollout string `json:"rollout,omitempty"`
	Phase   string `json:"phase,omitempty"`
}

// WithApplicationInfos names the configured applications (as
// WithApplications) and has GET /api/v1/applications read what flotilla
// knows of them from apps.
func (a *API) WithApplicationInfos(apps Apps, infos ...ApplicationInfo) *API {
	a.appState = apps
	a.update(func(c *catalogue) { c.apps, c.appInfos = appNames(infos), infos })
	return a
}

// ViewOf is what the API answers of application in from its state st.
func ViewOf(in ApplicationInfo, st rollout.AppState) ApplicationView {
	v := ApplicationView{Name: in.Name, Kind: in.Kind, Repository: in.Repository, Branch: in.Branch,
		Queued: st.Queued, LastSeen: st.LastSeen, LastWebhook: st.LastWebhook, LastSkipped: st.LastSkipped,
		WebhookSilent: st.WebhookSilent != nil, Silence: st.WebhookSilent, Quarantined: st.Quarantined, Drift: st.Drift}
	if in.PollInterval > 0 {
		v.PollInterval = in.PollInterval.String()
	}
	if st.DeployedTag != "" || st.DeployedDigest != "" {
		v.Deployed = &Deployment{Tag: st.DeployedTag, Digest: st.DeployedDigest, Rollout: st.DeployedRollout, At: st.DeployedAt}
	}
	if st.LatestTag != "" {
		v.Latest = &Latest{Tag: st.LatestTag, Rollout: st.LatestRollout}
	}
	return v
}

// listApplications answers every configured application.
func (a *API) listApplications(w http.ResponseWriter, r *http.Request) {
	infos := a.catalogue().appInfos // one catalogue for the whole answer
	out := make([]ApplicationView, 0, len(infos))
	for _, in := range infos {
		if !a.mayRead(r.Context(), identity.ResourceApplications, in.Name) {
			continue // another project's
		}
		v, err := a.application(r.Context(), in)
		if err != nil {
			writeError(w, err)
			return
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, out)
}

// getApplication answers one application.
func (a *API) getApplication(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("app")
	for _, in := range a.catalogue().appInfos {
		if in.Name == name {
			v, err := a.application(r.Context(), in)
			if err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, http.StatusOK, v)
			return
		}
	}
	writeError(w, fault.New(fault.ErrNotFound, fmt.Sprintf("no application %q is configured", name)))
}

func (a *API) application(ctx context.Context, in ApplicationInfo) (ApplicationView, error) {
	st, err := a.appState.App(ctx, in.Name)
	if err != nil {
		return ApplicationView{}, fmt.Errorf("reading application %s: %w", in.Name, err)
	}
	v := ViewOf(in, st)
	if v.Latest != nil && v.Latest.Rollout != "" {
		ro, err := a.rollouts.Get(ctx, v.Latest.Rollout)
		switch {
		case err == nil:
			v.Latest.Phase = string(ro.Phase)
		case !errors.Is(err, rollout.ErrNotFound):
			return ApplicationView{}, fmt.Errorf("reading rollout %s of %s: %w", v.Latest.Rollout, in.Name, err)
		}
	}
	return v, nil
}
