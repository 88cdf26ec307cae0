package poll_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/poll"
	"github.com/flotilla-cd/flotilla/pkg/registry"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
	"github.com/flotilla-cd/flotilla/pkg/testkit/gittest"
)

// startRegistry runs go-containerregistry's in-process registry, optionally
// behind wrap, and returns its "127.0.0.1:port".
func startRegistry(t *testing.T, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	h := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// push writes a random image to image:tag and returns its digest.
func push(t *testing.T, image, tag string) string {
	t.Helper()
	return pushBuilt(t, image, tag, time.Time{})
}

// journal adapts the real store to the Poller's Journal.
type journal struct{ s *store.Store }

func (j journal) Append(ctx context.Context, evs ...cloudevents.Event) (int, error) {
	recs, err := j.s.Append(ctx, evs...)
	return len(recs), err
}

type fixture struct {
	cfg   *config.Config
	store *store.Store
	repo  *embedded.Repo
	reg   *prometheus.Registry
}

func newFixture(t *testing.T, apps ...config.Application) *fixture {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	cfg := &config.Config{Fleet: config.Fleet{Poll: config.Poll{Interval: &config.Duration{Duration: time.Second}}}, Applications: apps}
	return &fixture{cfg: cfg, store: s, repo: embedded.NewRepo(s, nil), reg: prometheus.NewRegistry()}
}

func (f *fixture) poller(t *testing.T, reg poll.Registry, o poll.Options) *poll.Poller {
	t.Helper()
	o.Metrics = f.reg
	p, err := poll.New(f.cfg, reg, f.repo, journal{f.store}, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// pushes are the image.pushed events in the journal, as image:tag@digest
// source.
func (f *fixture) pushes(t *testing.T) []string {
	t.Helper()
	recs, err := f.store.Read(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		p, err := events.Decode[events.ImagePushed](r.Event)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Image()+":"+p.Tag+"@"+p.Digest+" "+p.Source)
	}
	return out
}

var anonymous = registry.WithKeychain(authn.NewMultiKeychain())

func app(image string) config.Application {
	return config.Application{Name: "shop", Image: image, Track: config.TrackMinorVersion}
}

// A poll feeds in the newest version the application takes that no
// rollout was started for, once; what a webhook brought changes nothing.
func TestPoll(t *testing.T) {
	host := startRegistry(t, nil)
	image := host + "/team/shop"
	d120 := push(t, image, "1.2.0")
	d130 := push(t, image, "1.3.0")
	push(t, image, "2.0.0")
	tests := []struct {
		name   string
		st     rollout.AppState
		polls  int
		want   []poll.Result
		pushes []string
	}{{
		name:  "a version no webhook brought is fed in once",
		st:    rollout.AppState{DeployedTag: "1.2.0", LatestTag: "1.2.0"},
		polls: 2,
		want: []poll.Result{
			{Application: "shop", Image: image, Tags: 3, Newest: "1.3.0", Digest: d130, Started: true},
			{Application: "shop", Image: image, Tags: 3, Newest: "1.3.0", Digest: d130, Reason: "1.3.0 was fed in before"},
		},
		pushes: []string{image + ":1.3.0@" + d130 + " poll"},
	}, {
		name:  "a version a webhook brought changes nothing",
		st:    rollout.AppState{DeployedTag: "1.2.0", DeployedDigest: d120, LatestTag: "1.3.0"},
		polls: 1,
		want: []poll.Result{
			{Application: "shop", Image: image, Tags: 3, Reason: "none of the 3 tags is newer than 1.3.0 that the application takes"},
		},
	}, {
		// The webhook's push of a tag pushed again rolls it out too.
		name:  "the deployed tag pushed again with a new digest is fed in once",
		st:    rollout.AppState{DeployedTag: "1.3.0", DeployedDigest: "sha256:before", LatestTag: "1.3.0"},
		polls: 2,
		want: []poll.Result{
			{Application: "shop", Image: image, Tags: 3, Newest: "1.3.0", Digest: d130, Started: true},
			{Application: "shop", Image: image, Tags: 3, Newest: "1.3.0", Digest: d130, Reason: "1.3.0 was fed in before"},
		},
		pushes: []string{image + ":1.3.0@" + d130 + " poll"},
	}, {
		name:  "the deployed tag at the deployed digest changes nothing",
		st:    rollout.AppState{DeployedTag: "1.3.0", DeployedDigest: d130, LatestTag: "1.3.0"},
		polls: 1,
		want: []poll.Result{
			{Application: "shop", Image: image, Tags: 3, Reason: "none of the 3 tags is newer than 1.3.0 that the application takes"},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, app(image))
			if err := f.repo.UpdateApp(t.Context(), "shop", func(st *rollout.AppState) error { *st = tt.st; return nil }); err != nil {
				t.Fatal(err)
			}
			p := f.poller(t, registry.NewRemote(anonymous), poll.Options{})
			var got []poll.Result
			for range tt.polls {
				res, err := p.Poll(t.Context(), "shop")
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, res)
			}
			opts := []cmp.Option{
				cmpopts.IgnoreFields(poll.Result{}, "At", "EventID"),
				cmp.Transformer("reason", func(r poll.Result) poll.Result { r.Reason, _, _ = strings.Cut(r.Reason, " (event"); return r }),
			}
			if diff := cmp.Diff(tt.want, got, opts...); diff != "" {
				t.Errorf("polls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.pushes, f.pushes(t)); diff != "" {
				t.Errorf("journaled pushes (-want +got):\n%s", diff)
			}
		})
	}
}

// The poll's push is the one a registry's webhook makes, keyed with the
// same subject, its id derived from what was found.
func TestEvent(t *testing.T) {
	a, err := poll.Event("registry.test:5000/team/shop", "1.3.0", "sha256:abc")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := poll.Event("registry.test:5000/team/shop", "1.3.0", "sha256:abc")
	c, _ := poll.Event("registry.test:5000/team/shop", "1.3.0", "sha256:def")
	if a.ID() != b.ID() || a.ID() == c.ID() || !strings.HasPrefix(a.ID(), "poll/") {
		t.Errorf("ids %s, %s, %s: want the same for the same tag and digest, another for another digest", a.ID(), b.ID(), c.ID())
	}
	p, err := events.Decode[events.ImagePushed](a)
	if err != nil {
		t.Fatal(err)
	}
	want := events.ImagePushed{Registry: "registry.test:5000", Repository: "team/shop", Tag: "1.3.0", Digest: "sha256:abc",
		Sender: "poll", Receiver: "poll", Source: events.SourcePoll}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("payload (-want +got):\n%s", diff)
	}
	if a.Type() != events.TypeImagePushed || a.Subject() != "registry.test:5000/team/shop:1.3.0" {
		t.Errorf("type %s subject %s", a.Type(), a.Subject())
	}
}

// A failing registry: an error, counted, nothing journaled; the waits
// grow while it fails.
func TestPollRegistryFailure(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	host := startRegistry(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if failing.Load() && strings.HasSuffix(r.URL.Path, "/tags/list") {
				http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	image := host + "/team/shop"
	d := push(t, image, "1.3.0")
	f := newFixture(t, app(image))
	p := f.poller(t, registry.NewRemote(anonymous), poll.Options{})
	res, err := p.Poll(t.Context(), "shop")
	if err == nil || !strings.Contains(res.Reason, "503") {
		t.Fatalf("Poll of a failing registry = %+v, %v; want an error saying 503", res, err)
	}
	failing.Store(false)
	if res, err = p.Poll(t.Context(), "shop"); err != nil || !res.Started || res.Digest != d {
		t.Errorf("Poll once the registry is back = %+v, %v; want %s fed in", res, err, d)
	}
	want := `# HELP flotilla_polls_total Polls of the applications' registries by outcome: current (nothing newer), found (a newer version fed in as a push), repeat (fed in before), error.
# TYPE flotilla_polls_total counter
flotilla_polls_total{outcome="error"} 1
flotilla_polls_total{outcome="found"} 1
# HELP flotilla_poll_found_total Versions a poll found that no webhook had brought, fed in as pushes (their rollouts say source: poll).
# TYPE flotilla_poll_found_total counter
flotilla_poll_found_total{application="shop"} 1
`
	if err := testutil.GatherAndCompare(f.reg, strings.NewReader(want), "flotilla_polls_total", "flotilla_poll_found_total"); err != nil {
		t.Error(err)
	}
	if len(f.pushes(t)) != 1 {
		t.Errorf("pushes %v, want the one found once the registry was back", f.pushes(t))
	}
}

func TestWait(t *testing.T) {
	tests := []struct {
		failures int
		rand     float64
		want     time.Duration
	}{
		{0, 0, time.Minute},
		{0, 0.5, time.Minute + 3*time.Second},
		{1, 0, 2 * time.Minute},
		{2, 0, 4 * time.Minute},
		{3, 0, 8 * time.Minute},
		{9, 0, 8 * time.Minute},
		{9, 0.999, 8*time.Minute + 47952*time.Millisecond},
	}
	for _, tt := range tests {
		f := newFixture(t)
		p := f.poller(t, nil, poll.Options{Rand: func() float64 { return tt.rand }})
		if got := p.Wait(time.Minute, tt.failures); got.Round(time.Millisecond) != tt.want {
			t.Errorf("Wait(1m, %d failures, rand %v) = %v, want %v", tt.failures, tt.rand, got, tt.want)
		}
	}
}

// Run polls the applications this replica owns, within a jitter of its
// start, and stops with its context.
func TestRun(t *testing.T) {
	host := startRegistry(t, nil)
	shop, cart := host+"/team/shop", host+"/team/cart"
	ds := push(t, shop, "1.0.0")
	push(t, cart, "1.0.0")
	f := newFixture(t, app(shop), config.Application{Name: "cart", Image: cart, Track: config.TrackMinorVersion},
		config.Application{Name: "off", Image: host + "/team/off", Poll: &config.Poll{Disabled: true}})
	var asked atomic.Int32
	p := f.poller(t, registry.NewRemote(anonymous), poll.Options{Owns: func(a config.Application) bool {
		asked.Add(1)
		return a.Name == "shop"
	}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(f.pushes(t)) == 0 || asked.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("nothing polled within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop within 5s of its context's end")
	}
	if diff := cmp.Diff([]string{shop + ":1.0.0@" + ds + " poll"}, f.pushes(t)); diff != "" {
		t.Errorf("pushes (-want +got):\n%s", diff)
	}
	if _, ok := p.Last()["off"]; ok {
		t.Error("the application with polling disabled was polled")
	}
}

// heads reads branch heads with git ls-remote (pkg/gitops).
type heads struct{}

func (heads) Head(ctx context.Context, src config.GitSource) (string, error) {
	return gitops.Head(ctx, gitops.Repo{URL: src.URL, Branch: src.Branch})
}

// A git application's branch: its head, when no rollout was started for
// it, is fed in once as the git push a webhook would have made (before:
// the deployed commit).
func TestPollGit(t *testing.T) {
	url := gittest.NewRepo(t, map[string]string{"web/app.yaml": "a: 1\n"})
	deployed := gittest.Head(t, url).Hash.String()
	web := config.Application{Name: "web", Source: &config.Source{Git: &config.GitSource{URL: url, Branch: "main", Paths: []string{"web"}}}}
	f := newFixture(t, web)
	if err := f.repo.UpdateApp(t.Context(), "web", func(st *rollout.AppState) error {
		st.DeployedDigest, st.LatestTag = deployed, "main@"+deployed[:12]
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	p := f.poller(t, nil, poll.Options{Heads: heads{}})
	res, err := p.Poll(t.Context(), "web")
	if err != nil || res.Started || res.Reason != "commit "+deployed[:12]+" is the newest a rollout was started for" {
		t.Errorf("Poll of the deployed head = %+v, %v; want nothing started", res, err)
	}
	next := gittest.Commit(t, url, "main", "next", map[string]string{"web/app.yaml": "a: 2\n"})
	res, err = p.Poll(t.Context(), "web")
	if err != nil || !res.Started || res.Newest != "main@"+next[:12] || res.Digest != next {
		t.Errorf("Poll after a push = %+v, %v; want main@%s fed in", res, err, next[:12])
	}
	if res, err = p.Poll(t.Context(), "web"); err != nil || res.Started {
		t.Errorf("Poll again = %+v, %v; want nothing new", res, err)
	}
	recs, err := f.store.Read(t.Context(), 0, 10)
	if err != nil || len(recs) != 1 {
		t.Fatalf("journal: %d events, %v; want the one push", len(recs), err)
	}
	got, err := events.Decode[events.GitPushed](recs[0].Event)
	if err != nil {
		t.Fatal(err)
	}
	want := events.GitPushed{RepoURL: url, Ref: "refs/heads/main", Branch: "main", Before: deployed, After: next,
		Sender: "poll", Receiver: "poll", Source: events.SourcePoll}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the poll's git push (-want +got):\n%s", diff)
	}
	if s := recs[0].Event.Subject(); s != url+"#refs/heads/main" {
		t.Errorf("subject %q, want the webhook's repository#ref", s)
	}
}

// Poll refuses an application it does not know, and a git application
// without a way to read branches.
func TestPollRefuses(t *testing.T) {
	f := newFixture(t, config.Application{Name: "web", Source: &config.Source{Git: &config.GitSource{URL: "file:///x.git", Branch: "main"}}})
	p := f.poller(t, nil, poll.Options{})
	if _, err := p.Poll(t.Context(), "nope"); !errors.Is(err, fault.ErrNotFound) {
		t.Errorf("Poll of an unknown application: %v, want not found", err)
	}
	if _, err := p.Poll(t.Context(), "web"); !errors.Is(err, poll.ErrNotPolled) || !fault.IsPermanent(err) {
		t.Errorf("Poll of a git application without Heads: %v, want permanent ErrNotPolled", err)
	}
}

// pushBuilt writes a random image built at built (zero: no build time)
// to image:tag and returns its digest.
func pushBuilt(t *testing.T, image, tag string, built time.Time) string {
	t.Helper()
	img, err := random.Image(128, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !built.IsZero() {
		if img, err = mutate.CreatedAt(img, v1.Time{Time: built}); err != nil {
			t.Fatal(err)
		}
	}
	ref, err := name.NewTag(image + ":" + tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// Track Newest follows when images were built: a poll reads each tag's
// digest and build time once, and feeds in the most recently built build
// the application takes, not the lexically last tag.
func TestPollTrackNewest(t *testing.T) {
	var manifests atomic.Int32
	host := startRegistry(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "/manifests/") {
				manifests.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	})
	image := host + "/team/shop"
	now := time.Now().UTC().Truncate(time.Second)
	pushBuilt(t, image, "build-b", now.Add(-10*time.Minute))
	dc := pushBuilt(t, image, "build-c", now.Add(-time.Minute))
	pushBuilt(t, image, "build-z-old", now.Add(-time.Hour))
	shop := config.Application{Name: "shop", Image: image, Track: config.TrackNewest}
	f := newFixture(t, shop)
	if err := f.repo.UpdateApp(t.Context(), "shop", func(st *rollout.AppState) error {
		st.DeployedTag, st.DeployedCreated, st.LatestTag = "build-b", now.Add(-10*time.Minute), "build-b"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	p := f.poller(t, registry.NewRemote(anonymous), poll.Options{})
	res, err := p.Poll(t.Context(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	if res.Newest != "build-c" || res.Digest != dc || !res.Started {
		t.Errorf("Poll = %+v; want build-c at %s fed in", res, dc)
	}
	if diff := cmp.Diff([]string{image + ":build-c@" + dc + " poll"}, f.pushes(t)); diff != "" {
		t.Errorf("pushes (-want +got):\n%s", diff)
	}
	// Read once: the second poll reads no manifest again.
	read := manifests.Load()
	if _, err := p.Poll(t.Context(), "shop"); err != nil {
		t.Fatal(err)
	}
	if again := manifests.Load() - read; again != 0 {
		t.Errorf("the second poll read %d manifests again", again)
	}
}

// On track Newest too, the deployed tag pushed again with a new digest is
// fed in, once.
func TestPollTrackNewestMoved(t *testing.T) {
	host := startRegistry(t, nil)
	image := host + "/team/shop"
	now := time.Now().UTC().Truncate(time.Second)
	rebuilt := pushBuilt(t, image, "build-b", now.Add(-time.Minute))
	shop := config.Application{Name: "shop", Image: image, Track: config.TrackNewest}
	f := newFixture(t, shop)
	if err := f.repo.UpdateApp(t.Context(), "shop", func(st *rollout.AppState) error {
		st.DeployedTag, st.DeployedDigest, st.DeployedCreated, st.LatestTag = "build-b", "sha256:before", now.Add(-10*time.Minute), "build-b"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	p := f.poller(t, registry.NewRemote(anonymous), poll.Options{})
	var got []poll.Result
	for range 2 {
		res, err := p.Poll(t.Context(), "shop")
		if err != nil {
			t.Fatal(err)
		}
		res.Reason, _, _ = strings.Cut(res.Reason, " (event")
		got = append(got, res)
	}
	want := []poll.Result{
		{Application: "shop", Image: image, Tags: 1, Newest: "build-b", Digest: rebuilt, Started: true},
		{Application: "shop", Image: image, Tags: 1, Newest: "build-b", Digest: rebuilt, Reason: "build-b was fed in before"},
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(poll.Result{}, "At", "EventID")); diff != "" {
		t.Errorf("polls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{image + ":build-b@" + rebuilt + " poll"}, f.pushes(t)); diff != "" {
		t.Errorf("pushes (-want +got):\n%s", diff)
	}
}
