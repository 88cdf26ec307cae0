package app

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flotilla-cd/flotilla/events/intake"
)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(intake.EventsPath, s.intake)
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	// Open: the hooks and the intake's events (their receivers
	// authenticate senders their own way), health, metrics, the UI's
	// assets and its login. Everything under /api/ needs an identity
	// (server.anonymousRead opens its reads), and so do the UI's pages
	// (the UI asks s.authn itself, to answer with its login page).
	protected := http.NewServeMux()
	s.api.Register(protected)
	mux.Handle("/api/", s.authn.Require(protected))
	s.ui.Register(mux)
	if sso := s.authn.SSO(); sso != nil { // server.sso's /auth/*: they make or end an identity
		sso.Register(mux)
	}
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
	if err := s.bus.Err(); err != nil {
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

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
