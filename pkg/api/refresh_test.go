package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/gates"
	"github.com/flotilla-cd/flotilla/pkg/poll"
	"github.com/flotilla-cd/flotilla/pkg/registry"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// pollRefresher is pkg/app's adapter of the poll to the API.
type pollRefresher struct{ p *poll.Poller }

func (r pollRefresher) Refresh(ctx context.Context, app string) (api.RefreshResponse, error) {
	res, err := r.p.Poll(ctx, app)
	return api.RefreshResponse{Application: res.Application, Image: res.Image, Tags: res.Tags, Newest: res.Newest,
		Digest: res.Digest, Started: res.Started, EventID: res.EventID, Reason: res.Reason}, err
}

type appendCounter struct{ s *store.Store }

func (a appendCounter) Append(ctx context.Context, evs ...cloudevents.Event) (int, error) {
	recs, err := a.s.Append(ctx, evs...)
	return len(recs), err
}

// POST /api/v1/applications/{app}/refresh polls the application's real
// registry now: what it found, fed in once; a token required; a registry
// that fails is a 502.
func TestRefresh(t *testing.T) {
	reg := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	host := strings.TrimPrefix(reg.URL, "http://")
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(host + "/team/shop:1.3.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	digest, _ := img.Digest()

	s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	repo := embedded.NewRepo(s, nil)
	cfg := &config.Config{Applications: []config.Application{
		{Name: "shop", Image: host + "/team/shop", Track: config.TrackMinorVersion},
		{Name: "gone", Image: host + "/team/gone", Track: config.TrackMinorVersion},
	}}
	p, err := poll.New(cfg, registry.NewRemote(registry.WithKeychain(authn.NewMultiKeychain())), repo, appendCounter{s}, poll.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, api.New(repo, gates.NewStoreApprovals(s), s, nil).WithApplications("shop", "gone").
		WithRefresher(pollRefresher{p}), map[string]string{"ops": token})

	type answer struct {
		Tags    int    `json:"tags"`
		Newest  string `json:"newest"`
		Digest  string `json:"digest"`
		Started bool   `json:"started"`
		By      string `json:"by"`
		Error   string `json:"error"`
	}
	tests := []struct {
		name, app, token string
		status           int
		want             answer
	}{
		{"no token", "shop", "", 401, answer{Error: "this call changes state and needs an API token: send Authorization: Bearer <token> (server.apiTokens)"}},
		{"unknown application", "cart", token, 404, answer{Error: `no application "cart" is configured`}},
		{"found and fed in", "shop", token, 200, answer{Tags: 1, Newest: "1.3.0", Digest: digest.String(), Started: true, By: "ops (alice)"}},
		{"again: fed in before", "shop", token, 200, answer{Tags: 1, Newest: "1.3.0", Digest: digest.String(), By: "ops (alice)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := call(t, srv, "POST", "/api/v1/applications/"+tt.app+"/refresh", tt.token, `{"by":"alice"}`)
			var got answer
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("%d %s: %v", status, body, err)
			}
			if diff := cmp.Diff([]any{tt.status, tt.want}, []any{status, got}); diff != "" {
				t.Errorf("refresh (-want +got):\n%s", diff)
			}
		})
	}
	// A repository the registry does not know: the registry's refusal, 502.
	status, _, body := call(t, srv, "POST", "/api/v1/applications/gone/refresh", token, "")
	if status != http.StatusBadGateway || !strings.Contains(body, "NAME_UNKNOWN") {
		t.Errorf("refresh of a repository the registry does not know = %d %s, want 502 naming NAME_UNKNOWN", status, body)
	}
	recs, err := s.Read(t.Context(), 0, 10)
	var types []string
	for _, r := range recs {
		types = append(types, r.Event.Type())
	}
	// Each refresh allowed is audited before the poll, the one that
	// failed at the registry too.
	want := []string{events.TypeAuditRecorded, events.TypeImagePushed, events.TypeAuditRecorded, events.TypeAuditRecorded}
	if diff := cmp.Diff(want, types); err != nil || diff != "" {
		t.Errorf("journal (%v) (-want +got):\n%s", err, diff)
	}
}
