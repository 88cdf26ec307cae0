package api

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Page sizes of GET /api/v1/rollouts.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// listRollouts answers a page of rollouts, newest first: every rollout in
// flight, then up to ?limit= finished ones; a Link header (rel="next")
// names the next page (?before=).
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
	page, err := a.rollouts.List(r.Context(), q.Get("before"), limit)
	if err != nil {
		writeError(w, err)
		return
	}
	ros := page.Rollouts
	if ros == nil {
		ros = []rollout.Rollout{}
	}
	if page.Next != "" {
		next := url.Values{"before": {page.Next}, "limit": {strconv.Itoa(limit)}}
		w.Header().Set("Link", fmt.Sprintf(`</api/v1/rollouts?%s>; rel="next"`, next.Encode()))
	}
	writeJSON(w, http.StatusOK, ros)
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
