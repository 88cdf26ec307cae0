package verify_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/functions/verify"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/registry"
)

// startRegistry runs a real in-process registry, optionally behind wrap, and
// returns its "127.0.0.1:port".
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

// push writes a random image to host/repo:tag and returns its digest.
func push(t *testing.T, host, repo, tag string) string {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatalf("making random image: %v", err)
	}
	ref, err := name.NewTag(host + "/" + repo + ":" + tag)
	if err != nil {
		t.Fatalf("parsing tag: %v", err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	h, err := img.Digest()
	if err != nil {
		t.Fatalf("digest: %v", err)
	}
	return h.String()
}

func pushed(t *testing.T, p events.ImagePushed) cloudevents.Event {
	t.Helper()
	e, err := events.New("push-1", "/hooks/registry", events.TypeImagePushed, p)
	if err != nil {
		t.Fatalf("building event: %v", err)
	}
	return e
}

// resolver is the real Remote, kept off the developer's Docker config.
func resolver() *registry.Remote {
	return registry.NewRemote(registry.WithKeychain(authn.NewMultiKeychain()), registry.WithTimeout(5*time.Second))
}

// out is what a test compares of an emitted event.
type out struct {
	ID, Type, Source string
	Data             any
}

func summarize[T any](t *testing.T, evs []cloudevents.Event) []out {
	t.Helper()
	var got []out
	for _, e := range evs {
		if err := e.Validate(); err != nil {
			t.Errorf("emitted event %s is invalid: %v", e.ID(), err)
		}
		var v T
		if err := e.DataAs(&v); err != nil {
			t.Fatalf("decoding %s: %v", e.Type(), err)
		}
		got = append(got, out{e.ID(), e.Type(), e.Source(), v})
	}
	return got
}

func TestVerify(t *testing.T) {
	host := startRegistry(t, nil)
	digest := push(t, host, "team/app", "1.2.3")
	image := host + "/team/app"
	tracked := func(img string) bool { return config.SameImage(img, image) }
	fn := verify.New(resolver(), tracked)

	verified := func(digest string) []out {
		return []out{{"push-1/" + events.TypeImageVerified, events.TypeImageVerified, events.Source,
			events.ImageVerified{Image: image, Tag: "1.2.3", Digest: digest}}}
	}
	tests := []struct {
		name string
		push events.ImagePushed
		want []out
		// reason, for a rejection, is compared by prefix: a registry error
		// message is not ours to pin.
		reason string
	}{
		{
			name: "ok",
			push: events.ImagePushed{Registry: host, Repository: "team/app", Tag: "1.2.3"},
			want: verified(digest),
		},
		{
			name: "ok with the digest the sender reported",
			push: events.ImagePushed{Registry: host, Repository: "team/app", Tag: "1.2.3", Digest: digest},
			want: verified(digest),
		},
		{
			name:   "untracked repository",
			push:   events.ImagePushed{Registry: host, Repository: "team/other", Tag: "1.2.3"},
			reason: "repository " + host + "/team/other is not tracked by any application",
		},
		{
			name:   "unknown tag",
			push:   events.ImagePushed{Registry: host, Repository: "team/app", Tag: "9.9.9"},
			reason: "resolving " + image + ":9.9.9: ",
		},
		{
			name: "digest mismatch",
			push: events.ImagePushed{Registry: host, Repository: "team/app", Tag: "1.2.3", Digest: "sha256:" + strings.Repeat("0", 64)},
			reason: "tag 1.2.3 now resolves to " + digest + ", not the pushed sha256:" + strings.Repeat("0", 64) +
				": the newer push will be acted on",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := fn.Handle(t.Context(), pushed(t, tt.push))
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			if tt.reason == "" {
				if diff := cmp.Diff(tt.want, summarize[events.ImageVerified](t, evs)); diff != "" {
					t.Errorf("emitted (-want +got):\n%s", diff)
				}
				return
			}
			got := summarize[events.ImageRejected](t, evs)
			if len(got) != 1 {
				t.Fatalf("emitted %d events, want one rejection: %+v", len(got), got)
			}
			rej := got[0].Data.(events.ImageRejected)
			if !strings.HasPrefix(rej.Reason, tt.reason) {
				t.Errorf("reason = %q, want it to start with %q", rej.Reason, tt.reason)
			}
			rej.Reason = ""
			want := out{"push-1/" + events.TypeImageRejected, events.TypeImageRejected, events.Source,
				events.ImageRejected{Image: tt.push.Image(), Tag: tt.push.Tag}}
			got[0].Data = rej
			if diff := cmp.Diff(want, got[0]); diff != "" {
				t.Errorf("rejection (-want +got):\n%s", diff)
			}
		})
	}
}

// TestVerifyRetag checks that the digest is the registry's, now: a tag moved
// since the push is verified at its new digest.
func TestVerifyRetag(t *testing.T) {
	host := startRegistry(t, nil)
	push(t, host, "team/app", "latest")
	now := push(t, host, "team/app", "latest")
	fn := verify.New(resolver(), func(string) bool { return true })

	evs, err := fn.Handle(t.Context(), pushed(t, events.ImagePushed{Registry: host, Repository: "team/app", Tag: "latest"}))
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	got := summarize[events.ImageVerified](t, evs)
	if len(got) != 1 || got[0].Data.(events.ImageVerified).Digest != now {
		t.Errorf("emitted %+v, want one verification of %s", got, now)
	}
}

func TestVerifyErrors(t *testing.T) {
	var down atomic.Bool // the registry fails manifest reads once the image is pushed
	host := startRegistry(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if down.Load() && strings.Contains(req.URL.Path, "/manifests/") {
				http.Error(w, "down for maintenance", http.StatusInternalServerError)
				return
			}
			next.ServeHTTP(w, req)
		})
	})
	push(t, host, "team/app", "1.2.3")
	down.Store(true)
	fn := verify.New(resolver(), func(string) bool { return true })

	bad := pushed(t, events.ImagePushed{})
	if err := bad.SetData(cloudevents.ApplicationJSON, []byte(`{"tag": 7}`)); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		e         cloudevents.Event
		permanent bool
	}{
		{"registry answers 500", pushed(t, events.ImagePushed{Registry: host, Repository: "team/app", Tag: "1.2.3"}), false},
		{"payload does not decode", bad, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := fn.Handle(t.Context(), tt.e)
			if err == nil {
				t.Fatalf("Handle = %v, want an error", evs)
			}
			if len(evs) != 0 {
				t.Errorf("Handle emitted %d events with its error", len(evs))
			}
			if got := fault.IsPermanent(err); got != tt.permanent {
				t.Errorf("error %q: permanent = %v, want %v", err, got, tt.permanent)
			}
		})
	}
}

// Docker's registry notifies a manifest's push before it links the tag:
// a tag not found yet for a push that named its digest is asked again, and
// verified once linked; one never linked is rejected after TagLinkWait.
func TestVerifyWaitsForTheTagLink(t *testing.T) {
	var unlinked atomic.Int32 // manifest reads of the tag answered 404 before passing
	unlinked.Store(3)
	host := startRegistry(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if strings.HasSuffix(req.URL.Path, "/manifests/1.2.3") && req.Method != http.MethodPut && unlinked.Add(-1) >= 0 {
				http.Error(w, `{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}`, http.StatusNotFound)
				return
			}
			next.ServeHTTP(w, req)
		})
	})
	digest := push(t, host, "team/app", "1.2.3")
	fn := verify.New(resolver(), func(string) bool { return true })

	evs, err := fn.Handle(t.Context(), pushed(t, events.ImagePushed{Registry: host, Repository: "team/app", Tag: "1.2.3", Digest: digest}))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Type() != events.TypeImageVerified {
		t.Fatalf("Handle = %v, want image.verified once the tag resolves", evs)
	}
	if n := unlinked.Load(); n >= 0 {
		t.Errorf("the tag was asked %d times too few", n+1)
	}

	start := time.Now()
	evs, err = fn.Handle(t.Context(), pushed(t, events.ImagePushed{Registry: host, Repository: "team/app", Tag: "9.9.9", Digest: digest}))
	if err != nil || len(evs) != 1 || evs[0].Type() != events.TypeImageRejected {
		t.Fatalf("Handle = %v, %v; want image.rejected for a tag never linked", evs, err)
	}
	if took := time.Since(start); took < verify.TagLinkWait/2 || took > 2*verify.TagLinkWait {
		t.Errorf("rejected after %s, want about %s of asking again", took, verify.TagLinkWait)
	}
}

func TestVerifyContract(t *testing.T) {
	fn := verify.New(resolver(), nil)
	if fn.Name() != "verify" {
		t.Errorf("Name = %q", fn.Name())
	}
	if diff := cmp.Diff([]string{events.TypeImagePushed, events.TypeGitPushed}, fn.Consumes()); diff != "" {
		t.Errorf("Consumes (-want +got):\n%s", diff)
	}
}

// sigs is a signature check answering from a table (app/digest -> signer,
// or the error; pkg/signature is tested on its own).
type sigs map[string]error

func (s sigs) Verify(_ context.Context, app, _, digest string) (string, error) {
	if err, ok := s[app+"/"+digest]; ok {
		return "", err
	}
	return "key release", nil
}

// verify checks the signatures of the applications with a policy: a push
// none of them would roll out anywhere is rejected; otherwise the ones it
// failed are named, for plan.
func TestVerifySignatures(t *testing.T) {
	host := startRegistry(t, nil)
	digest := push(t, host, "team/api", "1.0.0")
	image := host + "/team/api"
	notSigned := fault.Permanent(errors.New(image + "@" + digest + " is not signed"))
	tests := []struct {
		name    string
		apps    []verify.SignedApp
		others  bool
		checks  sigs
		wantTyp string
		want    events.ImageVerified
		reason  string
	}{
		{
			name: "signed", apps: []verify.SignedApp{{Name: "api", FirstWaveRequires: true}},
			wantTyp: events.TypeImageVerified,
			want:    events.ImageVerified{Image: image, Tag: "1.0.0", Digest: digest, SignedBy: map[string]string{"api": "key release"}},
		},
		{
			name: "unsigned, every wave requires a signature", apps: []verify.SignedApp{{Name: "api", FirstWaveRequires: true}},
			checks: sigs{"api/" + digest: notSigned}, wantTyp: events.TypeImageRejected,
			reason: "signature not trusted (api: " + image + "@" + digest + " is not signed)",
		},
		{
			name: "unsigned, the first wave takes it", apps: []verify.SignedApp{{Name: "api"}},
			checks: sigs{"api/" + digest: notSigned}, wantTyp: events.TypeImageVerified,
			want: events.ImageVerified{Image: image, Tag: "1.0.0", Digest: digest, Unsigned: map[string]string{"api": notSigned.Error()}},
		},
		{
			name: "unsigned, another application tracking it checks no signature", apps: []verify.SignedApp{{Name: "api", FirstWaveRequires: true}},
			others: true, checks: sigs{"api/" + digest: notSigned}, wantTyp: events.TypeImageVerified,
			want: events.ImageVerified{Image: image, Tag: "1.0.0", Digest: digest, Unsigned: map[string]string{"api": notSigned.Error()}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := verify.New(resolver(), func(string) bool { return true }).
				WithSignatures(tt.checks, func(string) ([]verify.SignedApp, bool) { return tt.apps, tt.others })
			evs, err := f.Handle(t.Context(), pushed(t, events.ImagePushed{Registry: host, Repository: "team/api", Tag: "1.0.0", Digest: digest}))
			if err != nil || len(evs) != 1 {
				t.Fatalf("Handle = %d events, %v", len(evs), err)
			}
			if evs[0].Type() != tt.wantTyp {
				t.Fatalf("emitted %s: %s", evs[0].Type(), evs[0].Data())
			}
			if tt.wantTyp == events.TypeImageRejected {
				r, _ := events.Decode[events.ImageRejected](evs[0])
				if r.Reason != tt.reason {
					t.Errorf("reason %q, want %q", r.Reason, tt.reason)
				}
				return
			}
			got, _ := events.Decode[events.ImageVerified](evs[0])
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("verified (-want +got):\n%s", diff)
			}
		})
	}
}

// A registry that cannot be read leaves the push to be retried.
func TestVerifySignaturesRetryable(t *testing.T) {
	host := startRegistry(t, nil)
	digest := push(t, host, "team/api", "1.0.0")
	f := verify.New(resolver(), func(string) bool { return true }).
		WithSignatures(sigs{"api/" + digest: errors.New("connection refused")},
			func(string) ([]verify.SignedApp, bool) {
				return []verify.SignedApp{{Name: "api", FirstWaveRequires: true}}, false
			})
	evs, err := f.Handle(t.Context(), pushed(t, events.ImagePushed{Registry: host, Repository: "team/api", Tag: "1.0.0", Digest: digest}))
	if err == nil || fault.IsPermanent(err) || len(evs) != 0 {
		t.Errorf("Handle = %d events, %v; want a retryable error", len(evs), err)
	}
}

// What cosign attaches to a digest is no version: a signature pushed after
// its image verifies the version that points at it; the rest is rejected.
func TestVerifyAttachments(t *testing.T) {
	host := startRegistry(t, nil)
	image := host + "/team/api"
	push(t, host, "team/api", "0.9.0")
	digest := push(t, host, "team/api", "1.0.0")
	push(t, host, "team/api", "1.1.0")
	hex := strings.TrimPrefix(digest, "sha256:")
	orphan := strings.Repeat("ab", 32)
	api := []verify.SignedApp{{Name: "api", FirstWaveRequires: true}}
	tests := []struct {
		name    string
		tag     string
		apps    []verify.SignedApp
		checks  sigs
		wantTyp string
		want    events.ImageVerified
		reason  string
	}{
		{
			name: "a signature pushed after the image", tag: "sha256-" + hex + ".sig", apps: api,
			wantTyp: events.TypeImageVerified,
			want:    events.ImageVerified{Image: image, Tag: "1.0.0", Digest: digest, SignedBy: map[string]string{"api": "key release"}},
		},
		{
			name: "a referrers index pushed after the image", tag: "sha256-" + hex, apps: api,
			wantTyp: events.TypeImageVerified,
			want:    events.ImageVerified{Image: image, Tag: "1.0.0", Digest: digest, SignedBy: map[string]string{"api": "key release"}},
		},
		{
			name: "a signature the application does not trust", tag: "sha256-" + hex + ".sig", apps: api,
			checks:  sigs{"api/" + digest: fault.Permanent(errors.New("no signature of it is trusted"))},
			wantTyp: events.TypeImageRejected, reason: "signature not trusted (api: no signature of it is trusted)",
		},
		{
			name: "an attestation", tag: "sha256-" + hex + ".att", apps: api,
			wantTyp: events.TypeImageRejected, reason: "cosign's attestation of " + digest + ", not a version",
		},
		{
			name: "a signature, and no application verifies signatures", tag: "sha256-" + hex + ".sig",
			wantTyp: events.TypeImageRejected,
			reason:  "cosign's signature of " + digest + ", not a version (no application tracking " + image + " verifies signatures)",
		},
		{
			name: "a signature of a digest no tag points at", tag: "sha256-" + orphan + ".sig", apps: api,
			wantTyp: events.TypeImageRejected,
			reason:  "cosign's signature of sha256:" + orphan + ": none of the newest 20 tags of " + image + " points at it",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			push(t, host, "team/api", tt.tag)
			f := verify.New(resolver(), func(string) bool { return true }).
				WithSignatures(tt.checks, func(string) ([]verify.SignedApp, bool) { return tt.apps, false })
			evs, err := f.Handle(t.Context(), pushed(t, events.ImagePushed{Registry: host, Repository: "team/api", Tag: tt.tag}))
			if err != nil || len(evs) != 1 {
				t.Fatalf("Handle = %d events, %v", len(evs), err)
			}
			if evs[0].Type() != tt.wantTyp {
				t.Fatalf("emitted %s: %s", evs[0].Type(), evs[0].Data())
			}
			if tt.wantTyp == events.TypeImageRejected {
				r, _ := events.Decode[events.ImageRejected](evs[0])
				if r.Reason != tt.reason {
					t.Errorf("reason %q, want %q", r.Reason, tt.reason)
				}
				return
			}
			got, _ := events.Decode[events.ImageVerified](evs[0])
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("verified (-want +got):\n%s", diff)
			}
		})
	}
}

// Without signature policies, an attachment is still no version.
func TestVerifyAttachmentWithoutPolicies(t *testing.T) {
	host := startRegistry(t, nil)
	hex := strings.Repeat("cd", 32)
	push(t, host, "team/api", "sha256-"+hex+".sig")
	f := verify.New(resolver(), func(string) bool { return true })
	evs, err := f.Handle(t.Context(), pushed(t, events.ImagePushed{Registry: host, Repository: "team/api", Tag: "sha256-" + hex + ".sig"}))
	if err != nil || len(evs) != 1 || evs[0].Type() != events.TypeImageRejected {
		t.Fatalf("Handle = %v, %v; want one image.rejected", evs, err)
	}
	r, _ := events.Decode[events.ImageRejected](evs[0])
	if want := "cosign's signature of sha256:" + hex + ", not a version"; r.Reason != want {
		t.Errorf("reason %q, want %q", r.Reason, want)
	}
}
