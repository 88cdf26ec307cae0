package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/identity"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Page sizes of GET /api/v1/rollouts.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// listRollouts answers a page of rollouts, newest first: every rollout in
// flight, then up to ?limit= finished ones; a Link header (rel="next")
// names the next page (?before=). ?application= keeps one application's.
func (a *API) listRollouts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := defaultPageSize
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxPageSize {
			writeError(w, fault.Permanent(fmt.Errorf("limit: want a number from 1 to %d, got %q", maxPageSize, l)))
			return
		}
		limit = n
	}
	app := q.Get("application")
	if app != "" && a.catalogue().apps[app] && a.forbidRead(w, r, identity.ResourceRollouts, app) {
		return
	}
	var page rollout.Page
	var err error
	if app == "" {
		page, err = a.rollouts.List(r.Context(), q.Get("before"), limit)
	} else {
		page, err = a.listOf(r.Context(), app, q.Get("before"), limit)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	ros := a.readableRollouts(r.Context(), page.Rollouts) // another project's: left out
	if ros == nil {
		ros = []rollout.Rollout{}
	}
	if page.Next != "" {
		next := url.Values{"before": {page.Next}, "limit": {strconv.Itoa(limit)}}
		if app != "" {
			next.Set("application", app)
		}
		w.Header().Set("Link", fmt.Sprintf(`</api/v1/rollouts?%s>; rel="next"`, next.Encode()))
	}
	writeJSON(w, http.StatusOK, ros)
}

// maxScanned bounds the rollouts one page of ?application= reads: past
// it the page ends early, its Link naming where to go on.
const maxScanned = 5 * maxPageSize

// listOf is a page of the rollouts of application app, newest first: its
// rollouts in flight, then up to limit finished ones. The state's pages
// are read, each no longer than what is still wanted, so every rollout
// of a page read is answered and the next page starts where it ended.
func (a *API) listOf(ctx context.Context, app, before string, limit int) (rollout.Page, error) {
	if apps := a.catalogue().apps; apps != nil && !apps[app] {
		return rollout.Page{}, fault.New(fault.ErrNotFound, fmt.Sprintf("no application %q is configured", app))
	}
	var out rollout.Page
	finished, scanned := 0, 0
	for {
		page, err := a.rollouts.List(ctx, before, limit-finished)
		if err != nil {
			return out, err
		}
		for _, ro := range page.Rollouts {
			if !ro.Phase.Done() && before == "" {
				if ro.Application == app {
					out.Rollouts = append(out.Rollouts, ro)
				}
				continue
			}
			scanned++
			if ro.Application == app {
				out.Rollouts = append(out.Rollouts, ro)
				finished++
			}
		}
		before, out.Next = page.Next, page.Next
		if page.Next == "" || finished >= limit || scanned >= maxScanned {
			return out, nil
		}
	}
}

// getRollout answers one rollout, in flight or finished.
func (a *API) getRollout(w http.ResponseWriter, r *http.Request) {
	ro, err := a.rollouts.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ro)
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
