package api_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/gates"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// GET /api/v1/applications and /api/v1/applications/{app}: every
// configured application, in order, with what the state keeps of it; no
// token needed; an unknown application is 404 saying so.
func TestApplications(t *testing.T) {
	s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	repo := embedded.NewRepo(s, nil)
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	hook := rollout.Seen{Tag: "1.4.0", Digest: "sha256:a", Source: rollout.SourceWebhook, At: at, EventID: "h1"}
	poll := rollout.Seen{Tag: "1.5.0", Digest: "sha256:b", Source: rollout.SourcePoll, At: at.Add(5 * time.Minute), EventID: "p1"}
	skip := rollout.Skipped{Tag: "2.0.0", Digest: "sha256:c", Source: rollout.SourceWebhook, Outcome: rollout.OutcomeSkipped,
		Reason: "2.0.0 is a major upgrade of 1.4.0", At: at.Add(time.Minute), EventID: "h2"}
	if err := repo.UpdateApp(t.Context(), "shop", func(st *rollout.AppState) error {
		st.DeployedTag, st.DeployedDigest, st.DeployedRollout, st.DeployedAt = "1.4.0", "sha256:a", "shop-1", at
		st.LatestTag, st.LatestRollout = "1.5.0", "shop-2"
		st.Saw(hook)
		st.Skip(skip)
		st.Saw(poll)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Create(t.Context(), rollout.Rollout{ID: "shop-2", Application: "shop", Tag: "1.5.0", Phase: rollout.Progressing}); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, api.New(repo, gates.NewStoreApprovals(s), s, nil).WithApplicationInfos(repo,
		api.ApplicationInfo{Name: "shop", Kind: api.KindImage, Repository: "registry.test/shop", PollInterval: 5 * time.Minute},
		api.ApplicationInfo{Name: "site", Kind: api.KindGit, Repository: "https://git.test/site", Branch: "main"},
	), map[string]string{"ops": token})

	shop := api.ApplicationView{Name: "shop", Kind: "image", Repository: "registry.test/shop", PollInterval: "5m0s",
		Deployed: &api.Deployment{Tag: "1.4.0", Digest: "sha256:a", Rollout: "shop-1", At: at},
		Latest:   &api.Latest{Tag: "1.5.0", Rollout: "shop-2", Phase: "Progressing"},
		LastSeen: &poll, LastWebhook: &hook, LastSkipped: &skip, WebhookSilent: true,
		Silence: &rollout.Silence{Tag: "1.5.0", Digest: "sha256:b", Found: poll.At, EventID: "p1", LastWebhook: &hook}}
	site := api.ApplicationView{Name: "site", Kind: "git", Repository: "https://git.test/site", Branch: "main"}

	code, _, body := call(t, srv, http.MethodGet, "/api/v1/applications", token, "")
	var list []api.ApplicationView
	if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/v1/applications: %d %s (%v)", code, body, err)
	}
	if diff := cmp.Diff([]api.ApplicationView{shop, site}, list); diff != "" {
		t.Errorf("GET /api/v1/applications (-want +got)\n%s", diff)
	}
	code, _, body = call(t, srv, http.MethodGet, "/api/v1/applications/shop", token, "")
	var one api.ApplicationView
	if err := json.Unmarshal([]byte(body), &one); code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/v1/applications/shop: %d %s (%v)", code, body, err)
	}
	if diff := cmp.Diff(shop, one); diff != "" {
		t.Errorf("GET /api/v1/applications/shop (-want +got)\n%s", diff)
	}
	code, _, body = call(t, srv, http.MethodGet, "/api/v1/applications/nope", token, "")
	if want := `{"error":"no application \"nope\" is configured"}` + "\n"; code != http.StatusNotFound || body != want {
		t.Errorf("GET /api/v1/applications/nope: %d %s, want 404 %s", code, body, want)
	}
	// The JSON's names, as the UI reads them.
	code, _, body = call(t, srv, http.MethodGet, "/api/v1/applications/site", token, "")
	if want := `{"name":"site","kind":"git","repository":"https://git.test/site","branch":"main","webhookSilent":false}` + "\n"; code != http.StatusOK || body != want {
		t.Errorf("GET /api/v1/applications/site: %d %s, want %s", code, body, want)
	}
}
