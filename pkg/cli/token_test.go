package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// tokenServer answers every call with an empty result when it carries
// `Authorization: Bearer s3cret`, else 401 as flotilla does; it records
// each call's method, path and Authorization header.
func tokenServer(t *testing.T) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="flotilla"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"this call needs an API token"}`))
			return
		}
		switch r.URL.Path {
		case "/api/v1/watch":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("event: rollout\ndata: {\"id\":\"r1\",\"phase\":\"Succeeded\"}\n\n"))
		case "/api/v1/rollouts", "/api/v1/applications":
			_, _ = w.Write([]byte(`[]`))
		default:
			_, _ = w.Write([]byte(`{}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := calls
		calls = nil
		return out
	}
}

// Every command that talks to flotilla sends the token of --token, or of
// FLOTILLA_TOKEN, with its reads as with its controls.
func TestEveryCallSendsTheToken(t *testing.T) {
	srv, calls := tokenServer(t)
	for _, tc := range []struct {
		name string
		env  string
		args []string
		want []string
	}{
		{"get rollouts", "", []string{"get", "rollouts", "--token", "s3cret"}, []string{"GET /api/v1/rollouts Bearer s3cret"}},
		{"get applications", "s3cret", []string{"get", "applications"}, []string{"GET /api/v1/applications Bearer s3cret"}},
		{"describe rollout", "s3cret", []string{"describe", "rollout", "r1"}, []string{"GET /api/v1/rollouts/r1 Bearer s3cret"}},
		{"describe application", "", []string{"describe", "application", "shop", "--token", "s3cret"}, []string{"GET /api/v1/applications/shop Bearer s3cret"}},
		{"fleet", "s3cret", []string{"fleet"}, []string{"GET /api/v1/fleet Bearer s3cret"}},
		{"pause", "s3cret", []string{"pause", "r1"}, []string{"POST /api/v1/rollouts/r1/pause Bearer s3cret"}},
		{"flag over env", "other", []string{"fleet", "stop", "--token", "s3cret"}, []string{"POST /api/v1/fleet/stop Bearer s3cret"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("FLOTILLA_TOKEN", tc.env)
			var stdout, stderr strings.Builder
			if code := Main(append(tc.args, "--server", srv.URL), &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			if diff := cmp.Diff(tc.want, calls()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

// The watch stream is read with the token too.
func TestWatchStreamSendsTheToken(t *testing.T) {
	srv, calls := tokenServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	out := make(chan rollout.Rollout, 1)
	if err := (apiClient{base: srv.URL, token: "s3cret"}).stream(ctx, "", out); err != nil {
		t.Fatal(err)
	}
	if r := <-out; r.ID != "r1" {
		t.Errorf("stream sent %+v, want r1", r)
	}
	err := (apiClient{base: srv.URL}).stream(ctx, "", out)
	if err == nil || !strings.Contains(err.Error(), unauthorized) {
		t.Errorf("stream without a token: %v, want %q", err, unauthorized)
	}
	want := []string{"GET /api/v1/watch Bearer s3cret", "GET /api/v1/watch "}
	if diff := cmp.Diff(want, calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// Without a token (or with a wrong one) the command says what to set, and
// what flotilla answered; a read is not asked again.
func TestUnauthorizedSaysWhatToSet(t *testing.T) {
	srv, calls := tokenServer(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no token", []string{"get", "rollouts"}},
		{"wrong token", []string{"describe", "rollout", "r1", "--token", "wrong"}},
		{"control", []string{"abort", "r1", "--token", "wrong"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("FLOTILLA_TOKEN", "")
			var stdout, stderr strings.Builder
			code := Main(append(tc.args, "--server", srv.URL), &stdout, &stderr)
			want := "Error: flotilla answered 401: set --token or FLOTILLA_TOKEN (an API token of the server): this call needs an API token\n"
			if code != 1 || stderr.String() != want {
				t.Errorf("exit %d, stderr %q; want 1, %q", code, stderr.String(), want)
			}
			if n := len(calls()); n != 1 {
				t.Errorf("%d calls, want 1", n)
			}
		})
	}
}
