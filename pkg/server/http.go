package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(events.EventsPath, s.intake)
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /api/v1/rollouts", s.listRollouts)
	mux.HandleFunc("GET /api/v1/rollouts/{id}", s.getRollout)
	mux.HandleFunc("POST /api/v1/rollouts/{id}/approval", s.approve)
	mux.HandleFunc("POST /api/v1/rollouts/{id}/retry", s.retry)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Hooks bypass the mux: its path cleaning would redirect a path
		// token holding "//" or "/../", which the intake reads whole.
		if strings.HasPrefix(r.URL.Path, "/hooks/") {
			s.intake.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// healthz fails once the journal has stopped taking events (a disk write
// failed) or the runtime is stalled on it: a restart recovers the journal,
// so a liveness probe should restart flotilla.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	if status, err := s.unhealthy(); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": status, "error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// unhealthy says what is wrong, if anything.
func (s *Server) unhealthy() (string, error) {
	if err := s.store.Err(); err != nil {
		return "journal stopped", err
	}
	if err := s.dispatch.Err(); err != nil {
		return "dispatch stalled", err
	}
	return "", nil
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if status, err := s.unhealthy(); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": status, "error": err.Error()})
		return
	}
	select {
	case <-s.ready:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	default:
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "starting"})
	}
}

// Page sizes of GET /api/v1/rollouts.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// listRollouts answers a page of rollouts, newest first: every rollout in
// flight, then up to ?limit= finished ones; a Link header (rel="next")
// names the next page (?before=).
func (s *Server) listRollouts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := defaultPageSize
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxPageSize {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("limit: want a number from 1 to %d, got %q", maxPageSize, l)})
			return
		}
		limit = n
	}
	page, err := s.repo.List(r.Context(), q.Get("before"), limit)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
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

func (s *Server) getRollout(w http.ResponseWriter, r *http.Request) {
	ro, err := s.repo.Get(r.Context(), r.PathValue("id"))
	switch {
	case errors.Is(err, rollout.ErrNotFound):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	default:
		writeJSON(w, http.StatusOK, ro)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
