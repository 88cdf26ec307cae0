package registry

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// startRegistry runs a real in-process registry, optionally behind wrap, and
// returns its "127.0.0.1:port".
func startRegistry(t *testing.T, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	h := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	return startServer(t, h)
}

// startServer serves h over plain HTTP and returns its "127.0.0.1:port".
func startServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// pushImage writes a random image to host/repo:tag and returns its digest.
func pushImage(t *testing.T, host, repo, tag string, opts ...remote.Option) string {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatalf("making random image: %v", err)
	}
	ref := mustTag(t, host+"/"+repo+":"+tag)
	if err := remote.Write(ref, img, opts...); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	return mustDigest(t, img.Digest)
}

// pushIndex writes a random multi-platform index to host/repo:tag and returns its digest.
func pushIndex(t *testing.T, host, repo, tag string) string {
	t.Helper()
	idx, err := random.Index(256, 1, 2)
	if err != nil {
		t.Fatalf("making random index: %v", err)
	}
	ref := mustTag(t, host+"/"+repo+":"+tag)
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	return mustDigest(t, idx.Digest)
}

func mustTag(t *testing.T, s string) name.Tag {
	t.Helper()
	ref, err := name.NewTag(s)
	if err != nil {
		t.Fatalf("parsing %q: %v", s, err)
	}
	return ref
}

func mustDigest(t *testing.T, digest func() (v1.Hash, error)) string {
	t.Helper()
	h, err := digest()
	if err != nil {
		t.Fatalf("computing digest: %v", err)
	}
	return h.String()
}

// anonymous keeps tests off the developer's Docker config.
var anonymous = WithKeychain(authn.NewMultiKeychain())

func TestRemoteResolve(t *testing.T) {
	host := startRegistry(t, nil)
	image := pushImage(t, host, "team/app", "1.2.4")
	other := pushImage(t, host, "team/app", "1.2.5")
	index := pushIndex(t, host, "team/multi", "v2")
	nested := pushImage(t, host, "org/team/deep/app", "latest")

	tests := []struct {
		name  string
		image string
		tag   string
		want  string
	}{
		{"image", host + "/team/app", "1.2.4", image},
		{"other tag in the same repository", host + "/team/app", "1.2.5", other},
		{"index", host + "/team/multi", "v2", index},
		{"nested repository", host + "/org/team/deep/app", "latest", nested},
	}
	r := NewRemote(anonymous)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.Resolve(t.Context(), tt.image, tt.tag)
			if err != nil {
				t.Fatalf("Resolve(%q, %q): %v", tt.image, tt.tag, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Resolve(%q, %q) mismatch (-want +got):\n%s", tt.image, tt.tag, diff)
			}
			if !strings.HasPrefix(got, "sha256:") {
				t.Errorf("Resolve(%q, %q) = %q, want a sha256: digest", tt.image, tt.tag, got)
			}
		})
	}
}

func TestRemoteResolveRetag(t *testing.T) {
	host := startRegistry(t, nil)
	r := NewRemote(anonymous)
	for i := range 3 {
		want := pushImage(t, host, "team/app", "stable")
		got, err := r.Resolve(t.Context(), host+"/team/app", "stable")
		if err != nil {
			t.Fatalf("push %d: Resolve: %v", i, err)
		}
		if got != want {
			t.Errorf("push %d: Resolve = %s, want the newly pushed %s", i, got, want)
		}
	}
}

// TestRemoteResolveHeadWithoutDigest checks the GET fallback against a
// registry whose HEAD responses carry no Docker-Content-Digest.
func TestRemoteResolveHeadWithoutDigest(t *testing.T) {
	var gets int
	host := startRegistry(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if strings.Contains(req.URL.Path, "/manifests/") {
				switch req.Method {
				case http.MethodHead:
					w = stripDigest{w}
				case http.MethodGet:
					gets++
				}
			}
			next.ServeHTTP(w, req)
		})
	})
	want := pushImage(t, host, "team/app", "1.0")

	got, err := NewRemote(anonymous).Resolve(t.Context(), host+"/team/app", "1.0")
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if got != want {
		t.Errorf("Resolve = %s, want %s", got, want)
	}
	if gets != 1 {
		t.Errorf("manifest GETs = %d, want 1 (the fallback)", gets)
	}
}

// stripDigest drops Docker-Content-Digest from a response.
type stripDigest struct{ http.ResponseWriter }

func (s stripDigest) WriteHeader(code int) {
	s.Header().Del("Docker-Content-Digest")
	s.ResponseWriter.WriteHeader(code)
}

func TestRemoteResolveErrors(t *testing.T) {
	host := startRegistry(t, nil)
	pushImage(t, host, "team/app", "1.0")

	failing := func(code int) string {
		return startServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, http.StatusText(code), code)
		}))
	}
	manifestsFail := func(code int, body string) string {
		return startRegistry(t, func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				if strings.Contains(req.URL.Path, "/manifests/") {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(code)
					_, _ = io.WriteString(w, body)
					return
				}
				next.ServeHTTP(w, req)
			})
		})
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closedHost := strings.TrimPrefix(closed.URL, "http://")
	closed.Close()

	tests := []struct {
		name      string
		image     string
		tag       string
		permanent bool
	}{
		{"unknown tag", host + "/team/app", "9.9.9", true},
		{"unknown repository", host + "/team/nope", "1.0", true},
		{"empty tag", host + "/team/app", "", true},
		{"tag the registry rejects", host + "/team/app", "-bad", true},
		{"invalid repository", host + "/Team/App", "1.0", true},
		{"image with a tag already", host + "/team/app:1.0", "1.0", true},
		{"unauthorized", manifestsFail(http.StatusUnauthorized, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`) + "/team/app", "1.0", true},
		{"denied", manifestsFail(http.StatusForbidden, `{"errors":[{"code":"DENIED","message":"requested access to the resource is denied"}]}`) + "/team/app", "1.0", true},
		{"server error", failing(http.StatusInternalServerError) + "/team/app", "1.0", false},
		{"bad gateway", failing(http.StatusBadGateway) + "/team/app", "1.0", false},
		{"unavailable on manifests", manifestsFail(http.StatusServiceUnavailable, `{"errors":[{"code":"UNAVAILABLE","message":"try later"}]}`) + "/team/app", "1.0", false},
		{"rate limited", manifestsFail(http.StatusTooManyRequests, `{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]}`) + "/team/app", "1.0", false},
		{"connection refused", closedHost + "/team/app", "1.0", false},
	}
	r := NewRemote(anonymous)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.Resolve(t.Context(), tt.image, tt.tag)
			if err == nil {
				t.Fatalf("Resolve(%q, %q) = %q, want an error", tt.image, tt.tag, got)
			}
			if p := fault.IsPermanent(err); p != tt.permanent {
				t.Errorf("Resolve(%q, %q) error %q: permanent = %v, want %v", tt.image, tt.tag, err, p, tt.permanent)
			}
			if want := "resolving " + tt.image + ":" + tt.tag + ": "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("Resolve error %q does not start with %q", err, want)
			}
		})
	}
}

func TestRemoteResolveTimeout(t *testing.T) {
	release := make(chan struct{})
	host := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-release:
		case <-req.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release) }) // runs before the server closes

	start := time.Now()
	_, err := NewRemote(anonymous, WithTimeout(100*time.Millisecond)).Resolve(t.Context(), host+"/team/app", "1.0")
	if err == nil {
		t.Fatal("Resolve against a hanging registry succeeded")
	}
	if fault.IsPermanent(err) {
		t.Errorf("timeout error %q is permanent, want retryable", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("timeout error %q does not wrap context.DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Resolve took %s, want about the 100ms timeout", elapsed)
	}
}

// staticKeychain hands out one authenticator for one registry.
type staticKeychain struct {
	registry string
	auth     authn.Authenticator
}

func (k staticKeychain) Resolve(res authn.Resource) (authn.Authenticator, error) {
	if res.RegistryStr() == k.registry {
		return k.auth, nil
	}
	return authn.Anonymous, nil
}

func TestRemoteResolveKeychain(t *testing.T) {
	const user, pass = "flotilla", "s3cret"
	host := startRegistry(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if u, p, ok := req.BasicAuth(); !ok || u != user || p != pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
				return
			}
			next.ServeHTTP(w, req)
		})
	})
	basic := &authn.Basic{Username: user, Password: pass}
	want := pushImage(t, host, "team/app", "1.0", remote.WithAuth(basic))

	tests := []struct {
		name      string
		keychain  authn.Keychain
		permanent bool
	}{
		{"right credentials", staticKeychain{host, basic}, false},
		{"no credentials", staticKeychain{"elsewhere.example", basic}, true},
		{"wrong credentials", staticKeychain{host, &authn.Basic{Username: user, Password: "wrong"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewRemote(WithKeychain(tt.keychain)).Resolve(t.Context(), host+"/team/app", "1.0")
			if tt.permanent {
				if err == nil || !fault.IsPermanent(err) {
					t.Fatalf("Resolve = %q, %v; want a permanent error", got, err)
				}
				if strings.Contains(err.Error(), "wrong") || strings.Contains(err.Error(), pass) {
					t.Errorf("error %q leaks the password", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if got != want {
				t.Errorf("Resolve = %s, want %s", got, want)
			}
		})
	}
}

// TestRemoteResolveInsecureHosts reaches the registry under a name that is
// not loopback (a transport dials it at the test server), so that plain HTTP
// is used only when the host is listed.
func TestRemoteResolveInsecureHosts(t *testing.T) {
	addr := startRegistry(t, nil)
	const host = "registry.flotilla.test:5000"
	want := pushImage(t, addr, "team/app", "1.0")

	dialer := &net.Dialer{}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, a string) (net.Conn, error) {
		if a == host {
			a = addr
		}
		return dialer.DialContext(ctx, network, a)
	}
	t.Cleanup(tr.CloseIdleConnections)

	tests := []struct {
		name     string
		insecure []string
		wantErr  bool
	}{
		{"listed", []string{"elsewhere.example", host}, false},
		{"listed in upper case", []string{strings.ToUpper(host)}, false},
		{"not listed", nil, true},
		{"other port listed", []string{"registry.flotilla.test:5001"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRemote(anonymous, WithTransport(tr), WithInsecureHosts(tt.insecure...))
			got, err := r.Resolve(t.Context(), host+"/team/app", "1.0")
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Resolve over HTTPS to a plain HTTP registry = %q, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if got != want {
				t.Errorf("Resolve = %s, want %s", got, want)
			}
		})
	}
}

func TestNewRemoteDefaults(t *testing.T) {
	r := NewRemote()
	if r.keychain != authn.DefaultKeychain {
		t.Errorf("default keychain = %v, want authn.DefaultKeychain", r.keychain)
	}
	if r.transport != remote.DefaultTransport {
		t.Errorf("default transport = %v, want remote.DefaultTransport", r.transport)
	}
	if r.timeout != DefaultTimeout {
		t.Errorf("default timeout = %s, want %s", r.timeout, DefaultTimeout)
	}
	if len(r.insecure) != 0 {
		t.Errorf("default insecure hosts = %v, want none", r.insecure)
	}
	// nil keeps the defaults.
	r = NewRemote(WithKeychain(nil), WithTransport(nil))
	if r.keychain != authn.DefaultKeychain || r.transport != remote.DefaultTransport {
		t.Errorf("nil options replaced the defaults: keychain %v, transport %v", r.keychain, r.transport)
	}
}

// Created reads when an image was built from its config, and for an index
// from its first image's.
func TestRemoteCreated(t *testing.T) {
	host := startRegistry(t, nil)
	built := time.Date(2026, 11, 20, 8, 30, 0, 0, time.UTC)
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.CreatedAt(img, v1.Time{Time: built})
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(mustTag(t, host+"/shop/api:1"), img); err != nil {
		t.Fatal(err)
	}
	r := NewRemote(anonymous)
	got, err := r.Created(t.Context(), host+"/shop/api", mustDigest(t, img.Digest))
	if err != nil || !got.Equal(built) {
		t.Errorf("Created = %v, %v; want %v", got, err, built)
	}
	idx := pushIndex(t, host, "shop/multi", "1")
	if _, err := r.Created(t.Context(), host+"/shop/multi", idx); err != nil {
		t.Errorf("Created of an index: %v", err)
	}
	if _, err := r.Created(t.Context(), host+"/shop/api", "sha256:"+strings.Repeat("0", 64)); !fault.IsPermanent(err) {
		t.Errorf("Created of a missing digest = %v, want a permanent error", err)
	}
}

// A Remote sets a repository's transport up once (the registry's ping,
// its token exchange) and reuses it: a poll's tag list and a push's
// verification each make one request, not a ping first every time.
func TestRemoteReusesWhatItSetUp(t *testing.T) {
	var pings, others atomic.Int32
	host := startRegistry(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.URL.Path == "/v2/" {
				pings.Add(1)
			} else {
				others.Add(1)
			}
			next.ServeHTTP(w, req)
		})
	})
	want := pushImage(t, host, "team/app", "1.0")
	pings.Store(0)
	others.Store(0)
	r := NewRemote(anonymous)
	for range 3 {
		if got, err := r.Resolve(t.Context(), host+"/team/app", "1.0"); err != nil || got != want {
			t.Fatalf("Resolve = %s, %v; want %s", got, err, want)
		}
		if tags, err := r.Tags(t.Context(), host+"/team/app"); err != nil || len(tags) != 1 {
			t.Fatalf("Tags = %v, %v", tags, err)
		}
	}
	if p, o := pings.Load(), others.Load(); p != 1 || o != 6 {
		t.Errorf("3 resolves and 3 tag lists made %d pings and %d other requests; want 1 and 6", p, o)
	}
}

// rotatingKeychain answers with the credentials of the moment.
type rotatingKeychain struct {
	mu   sync.Mutex
	auth authn.Authenticator
}

func (k *rotatingKeychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.auth, nil
}

func (k *rotatingKeychain) set(a authn.Authenticator) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.auth = a
}

// Credentials rotated at the registry and then in the keychain: the
// request the registry refuses drops what was set up, and the next one
// reads the keychain again instead of reusing the old credentials.
func TestRemoteReadsRotatedCredentials(t *testing.T) {
	var mu sync.Mutex
	pass := "first"
	host := startRegistry(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			mu.Lock()
			want := pass
			mu.Unlock()
			if _, p, ok := req.BasicAuth(); !ok || p != want {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, req)
		})
	})
	pushImage(t, host, "team/app", "1.0", remote.WithAuth(&authn.Basic{Username: "u", Password: "first"}))
	kc := &rotatingKeychain{auth: &authn.Basic{Username: "u", Password: "first"}}
	r := NewRemote(WithKeychain(kc))
	if _, err := r.Tags(t.Context(), host+"/team/app"); err != nil {
		t.Fatalf("Tags with the first password: %v", err)
	}
	mu.Lock()
	pass = "second"
	mu.Unlock()
	if _, err := r.Tags(t.Context(), host+"/team/app"); err == nil {
		t.Fatal("Tags with the old password succeeded")
	}
	kc.set(&authn.Basic{Username: "u", Password: "second"})
	if _, err := r.Tags(t.Context(), host+"/team/app"); err != nil {
		t.Errorf("Tags once the keychain has the new password: %v", err)
	}
}
