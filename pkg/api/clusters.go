package api

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/flotilla-cd/flotilla/pkg/identity"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// ClusterInfo is a configured cluster: its name, labels and the name of
// the wave it is in ("" in none).
type ClusterInfo struct {
	Name   string
	Labels map[string]string
	Wave   string
	// Source is where a discovered cluster comes from (its Argo CD
	// Secret, ClusterProfile or Cluster API Cluster), "" for the
	// configuration file's own.
	Source string
}

// WithClusters names the configured clusters, which GET /api/v1/clusters
// lists.
func (a *API) WithClusters(cs ...ClusterInfo) *API {
	a.update(func(c *catalogue) { c.clusters = cs })
	return a
}

// ClusterView is a cluster, its health and what it runs of each
// application.
type ClusterView struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	Wave   string            `json:"wave,omitempty"`
	// Source is where a discovered cluster comes from
	// ("fleet.discovery.argocd: Secret argocd/prod-eu",
	// "fleet.discovery.clusterProfiles: ClusterProfile fleet/prod-eu",
	// "fleet.discovery.clusterAPI: Cluster capi/prod-eu") or a Cluster
	// resource's ("server.resources: Cluster platform/prod-eu"); absent
	// for the file's fleet.clusters.
	Source       string             `json:"source,omitempty"`
	Applications map[string]Running `json:"applications"`
	// Health is what the cluster answered when last read (WithHealth);
	// nil when no reader is set.
	Health *ClusterHealth `json:"health,omitempty"`
}

// Health reads a cluster's health (pkg/cluster's Set: its API server, and
// whether Flagger has taken up its canaries), answering a recent read again.
type Health interface {
	Health(ctx context.Context, cluster string) ClusterHealth
}

// ClusterHealth is what a cluster answered when last read.
type ClusterHealth struct {
	// Reachable: its API server answered; Kubernetes is its version.
	Reachable  bool   `json:"reachable"`
	Kubernetes string `json:"kubernetes,omitempty"`
	// Flagger is Ready (Flagger's Canary served, and every canary of
	// flotilla's there older than 30 s carries Flagger's status), NotReady
	// (some do not), Missing (the Canary is not served) or Unknown (the
	// cluster was not read).
	Flagger string `json:"flagger"`
	// Canaries counts flotilla's canaries there, Waiting those without
	// Flagger's status.
	Canaries int `json:"canaries"`
	Waiting  int `json:"waiting,omitempty"`
	// Detail says what failed.
	Detail  string    `json:"detail,omitempty"`
	Checked time.Time `json:"checked"`
}

// WithHealth has GET /api/v1/clusters say each cluster's health, read
// from h, all clusters at once.
func (a *API) WithHealth(h Health) *API {
	a.health = h
	return a
}

// Running is what a cluster runs of an application, as flotilla's
// rollouts left it.
type Running struct {
	Tag    string `json:"tag,omitempty"`
	Digest string `json:"digest,omitempty"`
	// Rollout is the rollout that last changed it.
	Rollout string `json:"rollout,omitempty"`
	// RollingOut is the version a rollout in flight brings to it, Phase
	// the cluster's phase in that rollout, Kind that rollout's kind:
	// rollout.KindCatchUp or rollout.KindDriftRevert when it carries the
	// validated digest to the cluster without a push, "" for a version's.
	RollingOut string `json:"rollingOut,omitempty"`
	InFlight   string `json:"inFlight,omitempty"`
	Phase      string `json:"phase,omitempty"`
	Kind       string `json:"kind,omitempty"`
	// Unknown says why what it runs is not known (its revert failed).
	Unknown string `json:"unknown,omitempty"`
	// State is how Rollout left it when that rollout failed it: StateFailed
	// (its own result failed, Failure says why) or StateReverted (put back
	// because another cluster failed); "" when it took the version.
	State   string `json:"state,omitempty"`
	Failure string `json:"failure,omitempty"`
	// Drift is what the latest check of the clusters against the
	// application's validated digest (pkg/reconcile) found of this one
	// when it does not run it: nil when it does, or when a rollout put the
	// validated digest in it since.
	Drift *Drift `json:"drift,omitempty"`
}

// Drift is what a check of an application's clusters against its
// validated digest found of one cluster that does not run it.
type Drift struct {
	// State is rollout.CheckDrifted (its primary runs Image: changed by
	// hand), CheckCatchUp (new to the waves, or came back empty: a rollout
	// of kind catch-up follows), CheckNoWorkload or CheckUnreadable.
	State  string `json:"state"`
	Image  string `json:"image,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Tag and Digest are the validated version it was held against; Since
	// is when the check first found what it found.
	Tag    string    `json:"tag,omitempty"`
	Digest string    `json:"digest"`
	Since  time.Time `json:"since"`
}

// Running.State.
const (
	StateFailed   = "failed"
	StateReverted = "reverted"
)

// clusterRollouts is how many of the latest rollouts the fleet view reads.
const clusterRollouts = 500

// listClusters answers the configured clusters, each with what it runs.
func (a *API) listClusters(w http.ResponseWriter, r *http.Request) {
	page, err := a.rollouts.List(r.Context(), "", clusterRollouts)
	if err != nil {
		writeError(w, err)
		return
	}
	states, err := a.appStates(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	out := FleetView(a.catalogue().clusters, page.Rollouts, states)
	for i := range out { // another project's applications: left out
		for app := range out[i].Applications {
			if !a.mayRead(r.Context(), identity.ResourceApplications, app) {
				delete(out[i].Applications, app)
			}
		}
	}
	if a.health != nil {
		ctx := r.Context()
		var wg sync.WaitGroup
		for i := range out {
			wg.Go(func() {
				h := a.health.Health(ctx, out[i].Name)
				out[i].Health = &h
			})
		}
		wg.Wait()
	}
	writeJSON(w, http.StatusOK, out)
}

// appStateReads is how many applications' states the fleet view reads at
// once (in scale-out mode each is a round trip to the state's KV).
const appStateReads = 16

// appStates reads every configured application's state, by name.
func (a *API) appStates(ctx context.Context) (map[string]rollout.AppState, error) {
	out := map[string]rollout.AppState{}
	if a.appState == nil {
		return out, nil
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(appStateReads)
	for _, in := range a.catalogue().appInfos {
		g.Go(func() error {
			st, err := a.appState.App(gctx, in.Name)
			if err != nil {
				return fmt.Errorf("reading application %s: %w", in.Name, err)
			}
			mu.Lock()
			out[in.Name] = st
			mu.Unlock()
			return nil
		})
	}
	return out, g.Wait()
}

// FleetView says what each cluster runs of each application, from
// rollouts, newest first: the version of the latest rollout that
// finished on it (its own, or the previous one where it was put back or
// its canary failed), the version of a rollout in flight, and what the
// latest check of the clusters found of it (apps' AppState.Drift, by
// application).
func FleetView(clusters []ClusterInfo, ros []rollout.Rollout, apps map[string]rollout.AppState) []ClusterView {
	out := make([]ClusterView, len(clusters))
	at := map[string]int{}
	for i, c := range clusters {
		out[i] = ClusterView{Name: c.Name, Labels: c.Labels, Wave: c.Wave, Source: c.Source, Applications: map[string]Running{}}
		at[c.Name] = i
	}
	settled := map[[2]string]bool{}
	// took is when the latest rollout that succeeded on a cluster did.
	took := map[[2]string]time.Time{}
	for _, r := range ros {
		for _, wave := range r.Waves {
			for _, c := range wave.Clusters {
				i, ok := at[c.Name]
				key := [2]string{r.Application, c.Name}
				if !ok || settled[key] {
					continue
				}
				run := out[i].Applications[r.Application]
				settled[key] = running(&run, r, c)
				if c.Phase == rollout.ClusterSucceeded {
					took[key] = cmp.Or(c.Updated, r.Updated)
				}
				if run != (Running{}) {
					out[i].Applications[r.Application] = run
				}
			}
		}
	}
	for app, st := range apps {
		for _, d := range drifts(st) {
			i, ok := at[d.cluster]
			// A rollout that succeeded on the cluster after the check put
			// the validated digest there: the next check finds it current.
			if !ok || took[[2]string{app, d.cluster}].After(d.Since) {
				continue
			}
			run := out[i].Applications[app]
			run.Drift = &d.Drift
			out[i].Applications[app] = run
		}
	}
	return out
}

// clusterDrift is a cluster's Drift.
type clusterDrift struct {
	cluster string
	Drift
}

// drifts is what the latest check of an application's clusters found of
// those that do not run its validated digest: nothing when that check
// held them against another digest (a version rolled out since).
func drifts(st rollout.AppState) []clusterDrift {
	d := st.Drift
	if d == nil || d.Digest == "" || d.Digest != st.DeployedDigest {
		return nil
	}
	var out []clusterDrift
	for _, c := range d.Clusters {
		if c.State == rollout.CheckCurrent {
			continue
		}
		out = append(out, clusterDrift{c.Cluster, Drift{State: c.State, Image: c.Image, Reason: c.Reason, Tag: d.Tag, Digest: d.Digest, Since: d.Since}})
	}
	return out
}

// running records what rollout r says of cluster c and whether that
// settles what it runs.
func running(run *Running, r rollout.Rollout, c rollout.Cluster) bool {
	switch c.Phase {
	case rollout.ClusterSucceeded:
		run.Tag, run.Digest, run.Rollout = r.Tag, r.Digest, r.ID
		return true
	case rollout.ClusterReverted, rollout.ClusterFailed:
		// Put back, or Flagger kept the primary on what it ran.
		run.Tag, run.Digest, run.Rollout = r.PreviousTag, digestOf(c.PreviousImage), r.ID
		run.State, run.Failure = StateReverted, c.Failure
		if c.Failure != "" || c.Phase == rollout.ClusterFailed {
			run.State, run.Failure = StateFailed, cmp.Or(c.Failure, c.Message)
		}
		return true
	case rollout.ClusterRevertFailed:
		run.Unknown, run.Rollout = "its revert failed in rollout "+r.ID, r.ID
		return true
	}
	if !r.Phase.Done() && run.RollingOut == "" {
		run.RollingOut, run.InFlight, run.Phase, run.Kind = r.Tag, r.ID, string(c.Phase), r.Kind
	}
	return false
}

func digestOf(ref string) string {
	if _, d, ok := strings.Cut(ref, "@"); ok {
		return d
	}
	return ""
}
