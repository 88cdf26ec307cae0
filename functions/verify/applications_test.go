package verify_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/functions/internal/functiontest"
	"github.com/flotilla-cd/flotilla/functions/verify"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/testkit/gittest"
)

// WithApplications, verify keeps in the application's state the pushes
// it does not verify, push after push (a verified one is plan's to
// record): what it saw and from where, why it rejected one, why one is
// not verified yet, and the silence of a webhook that missed a version a
// poll found (application.webhook.missed, once per version), ended by a
// webhook's push.
func TestVerifyRecordsWhatItSaw(t *testing.T) {
	var failing atomic.Bool
	host := startRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if failing.Load() {
				http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	push(t, host, "team/app", "1.0.0")
	image := host + "/team/app"
	cfg := &config.Config{Applications: []config.Application{{Name: "shop", Image: image}, {Name: "other", Image: host + "/team/other"}}}
	repo := functiontest.NewRepo(t)
	fn := verify.New(resolver(), func(img string) bool { return config.SameImage(img, image) }).WithApplications(repo, cfg)
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	pushEvent := func(id, tag, source string, minute int) cloudevents.Event {
		e, err := events.New(id, "/hooks/registry", events.TypeImagePushed,
			events.ImagePushed{Registry: host, Repository: "team/app", Tag: tag, Source: source})
		if err != nil {
			t.Fatal(err)
		}
		e.SetTime(at.Add(time.Duration(minute) * time.Minute))
		return e
	}
	poll2 := rollout.Seen{Tag: "9.9.9", Source: rollout.SourcePoll, At: at.Add(5 * time.Minute), EventID: "poll-2"}
	rejected2 := &rollout.Skipped{Tag: "9.9.9", Source: rollout.SourcePoll, Outcome: rollout.OutcomeRejected,
		Reason: "resolving " + image + ":9.9.9", At: poll2.At, EventID: "poll-2"}
	silence := &rollout.Silence{Tag: "9.9.9", Found: poll2.At, EventID: "poll-2"}
	missed := events.WebhookMissed{Application: "shop", Repository: image, Version: "9.9.9", Found: poll2.At, PushID: "poll-2"}
	hook3 := rollout.Seen{Tag: "1.0.0", Source: rollout.SourceWebhook, At: at.Add(6 * time.Minute), EventID: "hook-3"}
	failed3 := hook3
	failed3.Error = "resolving " + image + ":1.0.0"
	hook4 := rollout.Seen{Tag: "9.9.9", Source: rollout.SourceWebhook, At: at.Add(7 * time.Minute), EventID: "hook-4"}
	for _, step := range []struct {
		name    string
		push    cloudevents.Event
		failing bool
		// emitted are the types emitted and the webhook.missed, if any
		emitted []string
		missed  *events.WebhookMissed
		retried bool // verify failed, to be retried
		want    rollout.AppState
	}{
		{
			name: "a webhook's push verified: plan's to record", push: pushEvent("hook-1", "1.0.0", "", 0),
			emitted: []string{events.TypeImageVerified},
			want:    rollout.AppState{Name: "shop"},
		},
		{
			name: "a poll's push rejected, no webhook seen: rejected and why, the webhook silent", push: pushEvent("poll-2", "9.9.9", events.SourcePoll, 5),
			emitted: []string{events.TypeImageRejected, events.TypeApplicationWebhookMissed}, missed: &missed,
			want: rollout.AppState{Name: "shop", LastSeen: &poll2, LastSkipped: rejected2, WebhookSilent: silence},
		},
		{
			name: "the same push redelivered: the same event again (the journal keeps one)", push: pushEvent("poll-2", "9.9.9", events.SourcePoll, 5),
			emitted: []string{events.TypeImageRejected, events.TypeApplicationWebhookMissed}, missed: &missed,
			want: rollout.AppState{Name: "shop", LastSeen: &poll2, LastSkipped: rejected2, WebhookSilent: silence},
		},
		{
			name: "a webhook's push while the registry fails: why it is not verified yet; the webhook works", push: pushEvent("hook-3", "1.0.0", "", 6),
			failing: true, retried: true,
			want: rollout.AppState{Name: "shop", LastSeen: &failed3, LastWebhook: &hook3, LastSkipped: rejected2},
		},
		{
			name: "a webhook's push of a tag the registry does not have: rejected, and why", push: pushEvent("hook-4", "9.9.9", "", 7),
			emitted: []string{events.TypeImageRejected},
			want: rollout.AppState{Name: "shop", LastSeen: &hook4, LastWebhook: &hook4,
				LastSkipped: &rollout.Skipped{Tag: "9.9.9", Source: rollout.SourceWebhook, Outcome: rollout.OutcomeRejected,
					Reason: "resolving " + image + ":9.9.9", At: hook4.At, EventID: "hook-4"}},
		},
	} {
		t.Run(step.name, func(t *testing.T) {
			failing.Store(step.failing)
			out, err := fn.Handle(context.Background(), step.push)
			if step.retried != (err != nil) || err != nil && fault.IsPermanent(err) {
				t.Fatalf("Handle: %v, want a retried error: %v", err, step.retried)
			}
			var types []string
			var gotMissed *events.WebhookMissed
			for _, e := range out {
				types = append(types, e.Type())
				if e.Type() == events.TypeApplicationWebhookMissed {
					m, err := events.Decode[events.WebhookMissed](e)
					if err != nil {
						t.Fatal(err)
					}
					gotMissed = &m
					if want := step.push.ID() + "/" + events.TypeApplicationWebhookMissed + "/shop"; e.ID() != want {
						t.Errorf("webhook.missed's id = %s, want %s (derived from the push)", e.ID(), want)
					}
				}
			}
			if diff := cmp.Diff(step.emitted, types); diff != "" {
				t.Errorf("emitted (-want +got)\n%s", diff)
			}
			if diff := cmp.Diff(step.missed, gotMissed); diff != "" {
				t.Errorf("webhook.missed (-want +got)\n%s", diff)
			}
			st, err := repo.App(context.Background(), "shop")
			if err != nil {
				t.Fatal(err)
			}
			// A registry's error message is not ours to pin: its start is.
			prefix := cmp.Comparer(func(a, b string) bool {
				return a == b || a != "" && b != "" && (strings.HasPrefix(a, b) || strings.HasPrefix(b, a))
			})
			if diff := cmp.Diff(step.want, st, prefix, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("the application's state (-want +got)\n%s", diff)
			}
		})
	}
	if st, err := repo.App(context.Background(), "other"); err != nil || st.LastSeen != nil {
		t.Errorf("an application of another image: %+v, %v", st, err)
	}
}

// A push of a release set's image member that verify does not verify is
// recorded in the set's state, not the member's: the set's version moves
// with it (docs/design/release-sets.md, "Image members").
func TestVerifyRecordsAnImageMembersPushOnItsSet(t *testing.T) {
	host := startRegistry(t, nil)
	image := host + "/shop/api"
	cfg := &config.Config{Applications: []config.Application{
		{Name: "shop-api", Image: image, MemberOf: "shop"},
		{Name: "shop-frontend", Image: host + "/shop/frontend", MemberOf: "shop"},
		{Name: "shop", Set: &config.SetSpec{Members: []config.SetMember{{Name: "shop-api"}, {Name: "shop-frontend"}}}},
	}}
	repo := functiontest.NewRepo(t)
	fn := verify.New(resolver(), func(img string) bool { return config.SameImage(img, image) }).WithApplications(repo, cfg)
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	e, err := events.New("hook-1", "/hooks/registry", events.TypeImagePushed, events.ImagePushed{Registry: host, Repository: "shop/api", Tag: "9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	e.SetTime(at)
	if _, err := fn.Handle(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	st, err := repo.App(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	if st.LastSeen == nil || st.LastSeen.Tag != "9.9.9" || st.LastSkipped == nil || st.LastSkipped.Outcome != rollout.OutcomeRejected {
		t.Errorf("the set's state: seen %+v, skipped %+v; want 9.9.9 rejected", st.LastSeen, st.LastSkipped)
	}
	for _, member := range []string{"shop-api", "shop-frontend"} {
		if st, err := repo.App(context.Background(), member); err != nil || st.LastSeen != nil {
			t.Errorf("member %s's state: %+v, %v; want nothing seen", member, st, err)
		}
	}
}

// A git push the applications following the repository skip, or one
// rejected, is seen as branch@abbrev (or the tag), its commit the digest,
// and says why; a poll's push of a head no webhook brought reports the
// webhook silent.
func TestVerifyRecordsGitPushes(t *testing.T) {
	url := gittest.NewRepo(t, map[string]string{"README.md": "deployments\n", "clusters/c1/web/app.yaml": "a: 1\n"})
	seed := gittest.Head(t, url).Hash.String()
	web := gittest.Commit(t, url, "main", "web in c1", map[string]string{"clusters/c1/web/app.yaml": "a: 2\n"})
	readme := gittest.Commit(t, url, "main", "readme", map[string]string{"README.md": "more\n"})
	cfg := &config.Config{
		Fleet: config.Fleet{Clusters: []config.Cluster{{Name: "c1"}}},
		Applications: []config.Application{
			{Name: "web", Source: &config.Source{Git: &config.GitSource{URL: url, Branch: "main", Paths: []string{"clusters/{cluster}/web"}}}},
			{Name: "image-app", Image: "registry.example.com/app"},
		},
	}
	repo := functiontest.NewRepo(t)
	f := verify.New(nil, func(string) bool { return false }).WithGit(mirrorRepos{m: gitops.NewMirror(t.TempDir())}, cfg).WithApplications(repo, cfg)
	handle := func(e cloudevents.Event) []string {
		t.Helper()
		evs, err := f.Handle(context.Background(), e)
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, e := range evs {
			types = append(types, e.Type())
		}
		return types
	}
	app := func() rollout.AppState {
		t.Helper()
		st, err := repo.App(context.Background(), "web")
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	hook := gitPush(t, url, "refs/heads/main", seed, web)
	if diff := cmp.Diff([]string{events.TypeGitVerified}, handle(hook)); diff != "" {
		t.Errorf("a webhook's push (-want +got)\n%s", diff)
	}
	if st := app(); st.LastSeen != nil {
		t.Errorf("a push verified for the application: LastSeen %+v, want it plan's to record", st.LastSeen)
	}

	polled := gitPush(t, url, "refs/heads/main", web, readme)
	p, _ := events.Decode[events.GitPushed](polled)
	p.Source = events.SourcePoll
	if err := polled.SetData(cloudevents.ApplicationJSON, p); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{events.TypeRolloutSkipped, events.TypeApplicationWebhookMissed}, handle(polled)); diff != "" {
		t.Errorf("a poll's push of a head no webhook brought (-want +got)\n%s", diff)
	}
	st := app()
	want := &rollout.Seen{Tag: "main@" + readme[:12], Digest: readme, Source: rollout.SourcePoll, At: polled.Time().UTC(), EventID: polled.ID()}
	if diff := cmp.Diff(want, st.LastSeen); diff != "" {
		t.Errorf("a poll's push: LastSeen (-want +got)\n%s", diff)
	}
	if s := st.WebhookSilent; s == nil || s.Tag != "main@"+readme[:12] || s.Digest != readme {
		t.Errorf("WebhookSilent = %+v, want main@%s missed", s, readme[:12])
	}
	if k := st.LastSkipped; k == nil || k.Outcome != rollout.OutcomeSkipped || k.Source != rollout.SourcePoll ||
		k.Reason != "the push changes nothing the application tracks (it changed README.md)" {
		t.Errorf("LastSkipped = %+v, want the poll's push skipped for changing nothing tracked", k)
	}

	// A push to a branch the application does not follow: the receiver
	// works (the silence ends), but it is not the application's push.
	side := gitPush(t, url, "refs/heads/next", readme, gittest.Commit(t, url, "next", "elsewhere", map[string]string{"README.md": "next\n"}))
	if diff := cmp.Diff([]string{events.TypeRolloutSkipped}, handle(side)); diff != "" {
		t.Errorf("a push to another branch (-want +got)\n%s", diff)
	}
	before := st
	st = app()
	if st.WebhookSilent != nil || st.LastWebhook == nil || st.LastWebhook.EventID != side.ID() {
		t.Errorf("after a webhook's push to another branch: silent %+v, last webhook %+v; want it heard", st.WebhookSilent, st.LastWebhook)
	}
	if diff := cmp.Diff(before.LastSeen, st.LastSeen); diff != "" {
		t.Errorf("a push to another branch changed LastSeen (-before +after)\n%s", diff)
	}
	if diff := cmp.Diff(before.LastSkipped, st.LastSkipped); diff != "" {
		t.Errorf("a push to another branch changed LastSkipped (-before +after)\n%s", diff)
	}

	other := gitPush(t, url, "refs/heads/main", readme, strings.Repeat("f", 40))
	if diff := cmp.Diff([]string{events.TypeGitRejected}, handle(other)); diff != "" {
		t.Errorf("a commit main does not have (-want +got)\n%s", diff)
	}
	st = app()
	if k := st.LastSkipped; k == nil || k.Outcome != rollout.OutcomeRejected || !strings.Contains(k.Reason, "has no commit "+strings.Repeat("f", 40)) {
		t.Errorf("LastSkipped = %+v, want rejected: no such commit", k)
	}
	if st.WebhookSilent != nil {
		t.Errorf("a webhook's push left the webhook silent: %+v", st.WebhookSilent)
	}
}

// A release set's image member with a verify of its own is judged by it
// (verify.SignedApps over the config, as pkg/app wires it): its unsigned
// push is refused when the set's first wave requires a signature, and the
// refusal recorded in the set's state with its reason (the API's last
// push skipped), the members' states untouched; its signed push is
// verified, the verdict its own (SignedBy[member]); an unsigned one the
// set's first wave takes goes to plan naming the member (Unsigned); the
// other member, without verify, is not checked. Catches: a member's
// policy not applied (the unsigned api verified), applied to the other
// member (the frontend refused), its first wave read without the set's
// clusterSelector (wave 1, which the set does not target, taking it), and
// the refusal recorded on the member rather than the set.
func TestVerifyImageMembersOwnVerify(t *testing.T) {
	host := startRegistry(t, nil)
	apiDigest := push(t, host, "web/api", "1.1.0")
	feDigest := push(t, host, "web/frontend", "2.1.0")
	apiImage, feImage := host+"/web/api", host+"/web/frontend"
	notSigned := fault.Permanent(errors.New(apiImage + "@" + apiDigest + " is not signed"))
	checks := sigs{"web-api/" + apiDigest: notSigned, "web-frontend/" + feDigest: errors.New("the frontend has no policy to check")}
	takes := false
	cfgOf := func(setSelector map[string]string, firstTakesUnsigned bool) *config.Config {
		set := config.Application{Name: "web", Set: &config.SetSpec{Members: []config.SetMember{{Name: "web-api"}, {Name: "web-frontend"}}}}
		if setSelector != nil {
			set.ClusterSelector = &metav1.LabelSelector{MatchLabels: setSelector}
		}
		w1 := config.Wave{Name: "w1", Clusters: []string{"c1"}}
		if firstTakesUnsigned {
			w1.RequireSignature = &takes
		}
		return &config.Config{
			Fleet: config.Fleet{Clusters: []config.Cluster{{Name: "c1", Labels: map[string]string{"tier": "dev"}}, {Name: "c2", Labels: map[string]string{"tier": "prod"}}},
				Waves: []config.Wave{w1, {Name: "w2", Clusters: []string{"c2"}}}},
			Applications: []config.Application{
				{Name: "web-api", Image: apiImage, MemberOf: "web", Verify: &config.Verify{Signatures: []config.SignatureAuthority{{Name: "release"}}}},
				{Name: "web-frontend", Image: feImage, MemberOf: "web"},
				set,
			},
		}
	}
	apiSigned := sigs{}
	type result struct {
		Type     string
		Reason   string
		SignedBy map[string]string
		Unsigned map[string]string
		Skipped  *rollout.Skipped // the set's last push skipped
	}
	reason := "signature not trusted (web-api: " + notSigned.Error() + ")"
	tests := []struct {
		name   string
		cfg    *config.Config
		checks sigs
		repo   string
		tag    string
		want   result
	}{
		{name: "the api unsigned, the set's first wave requiring a signature", cfg: cfgOf(nil, false), checks: checks, repo: "web/api", tag: "1.1.0",
			want: result{Type: events.TypeImageRejected, Reason: reason,
				Skipped: &rollout.Skipped{Tag: "1.1.0", Source: rollout.SourceWebhook, Outcome: rollout.OutcomeRejected, Reason: reason}}},
		{name: "the api signed", cfg: cfgOf(nil, false), checks: apiSigned, repo: "web/api", tag: "1.1.0",
			want: result{Type: events.TypeImageVerified, SignedBy: map[string]string{"web-api": "key release"}}},
		{name: "the api unsigned, the set's first wave taking it", cfg: cfgOf(nil, true), checks: checks, repo: "web/api", tag: "1.1.0",
			want: result{Type: events.TypeImageVerified, Unsigned: map[string]string{"web-api": notSigned.Error()}}},
		{name: "the api unsigned, the set's clusters starting at the wave requiring a signature", cfg: cfgOf(map[string]string{"tier": "prod"}, true),
			checks: checks, repo: "web/api", tag: "1.1.0",
			want: result{Type: events.TypeImageRejected, Reason: reason,
				Skipped: &rollout.Skipped{Tag: "1.1.0", Source: rollout.SourceWebhook, Outcome: rollout.OutcomeRejected, Reason: reason}}},
		{name: "the frontend, without verify of its own", cfg: cfgOf(nil, false), checks: checks, repo: "web/frontend", tag: "2.1.0",
			want: result{Type: events.TypeImageVerified}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := functiontest.NewRepo(t)
			fn := verify.New(resolver(), func(img string) bool { return config.SameImage(img, apiImage) || config.SameImage(img, feImage) }).
				WithSignatures(tt.checks, func(img string) ([]verify.SignedApp, bool) { return verify.SignedApps(tt.cfg, img) }).
				WithApplications(repo, tt.cfg)
			e, err := events.New("hook-1", "/hooks/registry", events.TypeImagePushed, events.ImagePushed{Registry: host, Repository: tt.repo, Tag: tt.tag})
			if err != nil {
				t.Fatal(err)
			}
			evs, err := fn.Handle(t.Context(), e)
			if err != nil || len(evs) != 1 {
				t.Fatalf("Handle = %d events, %v", len(evs), err)
			}
			got := result{Type: evs[0].Type()}
			switch got.Type {
			case events.TypeImageRejected:
				r, _ := events.Decode[events.ImageRejected](evs[0])
				got.Reason = r.Reason
			case events.TypeImageVerified:
				v, _ := events.Decode[events.ImageVerified](evs[0])
				got.SignedBy, got.Unsigned = v.SignedBy, v.Unsigned
			}
			st, err := repo.App(t.Context(), "web")
			if err != nil {
				t.Fatal(err)
			}
			got.Skipped = st.LastSkipped
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(rollout.Skipped{}, "Digest", "At", "EventID")); diff != "" {
				t.Errorf("verify's verdict and the set's last push skipped (-want +got):\n%s", diff)
			}
			for _, member := range []string{"web-api", "web-frontend"} {
				if st, err := repo.App(t.Context(), member); err != nil || st.LastSeen != nil || st.LastSkipped != nil {
					t.Errorf("member %s's state: %+v, %v; want nothing recorded", member, st, err)
				}
			}
		})
	}
}
