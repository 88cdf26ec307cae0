package api

import (
	"cmp"
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// ClusterInfo is a configured cluster.
type ClusterInfo struct {
	Name   string
	Labels map[string]string
}

// WithClusters names the configured clusters, which GET /api/v1/clusters
// lists.
func (a *API) WithClusters(cs ...ClusterInfo) *API {
	a.clusters = cs
	return a
}

// ClusterView is a cluster, its health and what it runs of each
// application.
type ClusterView struct {
	Name         string             `json:"name"`
	Labels       map[string]string  `json:"labels,omitempty"`
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
	// the cluster's phase in that rollout.
	RollingOut string `json:"rollingOut,omitempty"`
	InFlight   string `json:"inFlight,omitempty"`
	Phase      string `json:"phase,omitempty"`
	// Unknown says why what it runs is not known (its revert failed).
	Unknown string `json:"unknown,omitempty"`
	// State is how Rollout left it when that rollout failed it: StateFailed
	// (its own result failed, Failure says why) or StateReverted (put back
	// because another cluster failed); "" when it took the version.
	State   string `json:"state,omitempty"`
	Failure string `json:"failure,omitempty"`
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
	out := FleetView(a.clusters, page.Rollouts)
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

// FleetView says what each cluster runs of each application, from
// rollouts, newest first: the version of the latest rollout that
// finished on it (its own, or the previous one where it was put back or
// its canary failed), and the version of a rollout in flight.
func FleetView(clusters []ClusterInfo, ros []rollout.Rollout) []ClusterView {
	out := make([]ClusterView, len(clusters))
	at := map[string]int{}
	for i, c := range clusters {
		out[i] = ClusterView{Name: c.Name, Labels: c.Labels, Applications: map[string]Running{}}
		at[c.Name] = i
	}
	settled := map[[2]string]bool{}
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
				if run != (Running{}) {
					out[i].Applications[r.Application] = run
				}
			}
		}
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
		run.RollingOut, run.InFlight, run.Phase = r.Tag, r.ID, string(c.Phase)
	}
	return false
}

func digestOf(ref string) string {
	if _, d, ok := strings.Cut(ref, "@"); ok {
		return d
	}
	return ""
}
