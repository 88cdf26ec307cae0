package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
	"github.com/flotilla-cd/flotilla/pkg/ui"
	"github.com/flotilla-cd/flotilla/pkg/watch"
)

// The rollout page of a release set of image members shows, in a real
// browser, the set's version (each member's tag and digest, in order),
// the one before it, each entry's signer or why it is unsigned, and the
// wave the rollout stops before, as `flotilla describe rollout` does; a
// rollout of an application shows no set's versions nor signatures.
// Catches: the set's page naming only the pushed member's signer (the
// api's unsigned entry, taken along by the frontend's push, unseen), an
// entry's reason dropped.
func TestRolloutPageShowsTheSetsVersions(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("no chromium on PATH: `make deps` installs Debian's chromium")
	}
	const unsigned = "registry.test/shop/api@sha256:0123456789abcdef0123 is not signed"
	api1 := rollout.MemberVersion{Application: "shop-api", Image: "registry.test/shop/api", Tag: "1.1.0", Digest: "sha256:0123456789abcdef0123", Unsigned: unsigned}
	api0 := rollout.MemberVersion{Application: "shop-api", Image: "registry.test/shop/api", Tag: "1.0.0", Digest: "sha256:aaaaaaaaaaaaaaaa0000"}
	fe := rollout.MemberVersion{Application: "shop-frontend", Image: "registry.test/shop/frontend", Tag: "1.0.0", Digest: "sha256:fedcba9876543210fedc", SignedBy: "key release"}
	set := rollout.Rollout{ID: "shop-1", Application: "shop", Image: "shop", Phase: rollout.Progressing, Members: []string{"shop-api", "shop-frontend"},
		Versions: rollout.SetVersion{api1, fe}, PreviousVersions: rollout.SetVersion{api0, fe}, Created: time.Now(), Updated: time.Now(),
		StopsBefore: "production", Unsigned: "shop-api: " + unsigned,
		Waves: []rollout.Wave{{Name: "canary", Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterPending}}}}}
	set.Tag, set.Digest = set.Versions.Tag(), set.Versions.Digest()
	app := rollout.Rollout{ID: "web-1", Application: "web", Image: "registry.test/web", Tag: "2.0.0", Digest: "sha256:2222", Phase: rollout.Progressing,
		Created: time.Now(), Updated: time.Now(), Waves: set.Waves, SignedBy: "key release"}
	base := serveWithRollouts(t, set, app)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(profileDir(t)))
	actx, acancel := chromedp.NewExecAllocator(t.Context(), opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	ctx, cancel := context.WithTimeout(bctx, time.Minute)
	defer cancel()
	if err := chromedp.Run(ctx,
		chromedp.Navigate(base+ui.Path),
		chromedp.WaitVisible(`#login-token`, chromedp.ByQuery),
		chromedp.SendKeys(`#login-token`, token, chromedp.ByQuery),
		chromedp.Click(`#login-submit`, chromedp.ByQuery),
		chromedp.WaitReady(`body[data-live="true"]`, chromedp.ByQuery),
		chromedp.Evaluate(`location.hash = "#/rollouts/shop-1"`, nil),
	); err != nil {
		t.Fatalf("logging in and opening the set's rollout: %v", err)
	}
	// The page is drawn again as the rollout's details come: read once
	// both lines are there.
	var shownVersions struct {
		Versions, Previous, StopsBefore string
		Signatures                      []string
	}
	if err := chromedp.Run(ctx, chromedp.Poll(`(() => {
		const v = document.querySelector('#versions'), p = document.querySelector('#previous-versions'),
			s = document.querySelector('#stops-before'), sig = [...document.querySelectorAll('#signatures li')];
		return v && p && s && sig.length && v.textContent && p.textContent ?
			{Versions: v.textContent, Previous: p.textContent, StopsBefore: s.textContent,
				Signatures: sig.map((li) => li.dataset.member + "|" + li.dataset.signed + "|" + li.textContent)} : null;
	})()`, &shownVersions, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		var page string
		_ = chromedp.Run(bctx, chromedp.Evaluate(`document.body.innerText`, &page))
		t.Fatalf("reading the set's versions: %v; the page shows:\n%s", err, page)
	}
	versions, previous := shownVersions.Versions, shownVersions.Previous
	if want := "shop-api 1.1.0 (sha256:0123456789ab), shop-frontend 1.0.0 (sha256:fedcba987654)"; versions != want {
		t.Errorf("Versions %q, want %q", versions, want)
	}
	if want := "shop-api 1.0.0 (sha256:aaaaaaaaaaaa), shop-frontend 1.0.0 (sha256:fedcba987654)"; previous != want {
		t.Errorf("Previous versions %q, want %q", previous, want)
	}
	wantSignatures := []string{
		"shop-api|false|shop-api 1.1.0: unsigned: " + unsigned,
		"shop-frontend|true|shop-frontend 1.0.0: signed by key release",
	}
	if diff := cmp.Diff(wantSignatures, shownVersions.Signatures); diff != "" {
		t.Errorf("the set's signatures (member|signed|text, -want +got):\n%s", diff)
	}
	if want := "production (the first wave requiring a signature)"; shownVersions.StopsBefore != want {
		t.Errorf("Stops before %q, want %q", shownVersions.StopsBefore, want)
	}
	var app1 struct {
		Shown    bool
		SignedBy string
	}
	if err := chromedp.Run(ctx,
		chromedp.Evaluate(`location.hash = "#/rollouts/web-1"`, nil),
		chromedp.WaitVisible(`#title`, chromedp.ByQuery),
		chromedp.Poll(`document.querySelector('#title').textContent.includes("2.0.0")`, nil),
		chromedp.Evaluate(`({Shown: !!(document.querySelector('#versions') || document.querySelector('#previous-versions') ||
			document.querySelector('#signatures') || document.querySelector('#stops-before')),
			SignedBy: [...document.querySelectorAll('dl.facts dt')].filter((dt) => dt.textContent === "Signed by").map((dt) => dt.nextElementSibling.textContent).join()})`, &app1),
	); err != nil {
		t.Fatalf("opening the application's rollout: %v", err)
	}
	if app1.Shown {
		t.Error("an application's rollout page shows a set's versions or signatures")
	}
	if app1.SignedBy != "key release" {
		t.Errorf("the application's rollout page says signed by %q, want %q", app1.SignedBy, "key release")
	}
}

// profileDir is a directory for chromium's profile, removed after the
// test. Not t.TempDir: chromium's helper processes may still write to
// the profile for a moment after the browser exited, and t.TempDir's
// removal fails the test when a file appears while it removes the rest
// (it did in CI: "directory not empty").
func profileDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "flotilla-ui-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := 0; ; i++ {
			err := os.RemoveAll(dir)
			if err == nil {
				return
			}
			if i == 50 {
				t.Logf("leaving chromium's profile %s: %v", dir, err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return dir
}

// serveWithRollouts serves the UI and the API, with its watch stream,
// over a fresh state holding ros, behind the authentication of token.
func serveWithRollouts(t *testing.T, ros ...rollout.Rollout) string {
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
	authn, err := api.NewAuthn(map[string]string{"ops": token})
	if err != nil {
		t.Fatal(err)
	}
	h, err := ui.New(authn, nil)
	if err != nil {
		t.Fatal(err)
	}
	mux, apis := http.NewServeMux(), http.NewServeMux()
	h.Register(mux)
	api.New(repo, nil, s, nil).WithWatch(hub).Register(apis)
	mux.Handle("/api/", authn.Require(apis))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	return srv.URL
}
