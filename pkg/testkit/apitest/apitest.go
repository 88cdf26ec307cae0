package apitest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
	"github.com/flotilla-cd/flotilla/pkg/watch"
)

// Server is the API served with its watch stream.
type Server struct {
	URL     string
	Journal *store.Store
	Repo    *embedded.Repo
}

// Watched serves the API and its watch stream over a fresh store holding
// the rollouts ros; everything stops when t ends.
func Watched(t *testing.T, ros ...rollout.Rollout) Server {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	repo := embedded.NewRepo(s, nil)
	for _, ro := range ros {
		if _, err := repo.Create(t.Context(), ro); err != nil {
			t.Fatal(err)
		}
	}
	hub, err := watch.New(s, repo, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = hub.Run(ctx) }()
	mux := http.NewServeMux()
	api.New(repo, nil, s, nil).WithWatch(hub).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	return Server{URL: srv.URL, Journal: s, Repo: repo}
}
