package signature_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore-go/pkg/sign"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/signature"
	"github.com/flotilla-cd/flotilla/pkg/testkit/rekortest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/sigtest"
)

// reg is an in-process registry counting its requests.
type reg struct {
	host  string
	count atomic.Int64
}

func newRegistry(tb testing.TB) *reg { return newRegistryOf(tb, true) }

// newRegistryOf is newRegistry, with the OCI referrers API or without.
func newRegistryOf(tb testing.TB, referrers bool) *reg {
	tb.Helper()
	r := &reg{}
	h := registry.New(registry.WithReferrersSupport(referrers), registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.count.Add(1)
		h.ServeHTTP(w, req)
	}))
	tb.Cleanup(srv.Close)
	r.host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

func (r *reg) access(ctx context.Context, image, digest string) (name.Digest, []remote.Option, error) {
	d, err := name.NewDigest(image + "@" + digest)
	return d, []remote.Option{remote.WithContext(ctx)}, err
}

// push pushes a random image to repo and returns its pinned reference.
func (r *reg) push(tb testing.TB, repo string) name.Digest {
	tb.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		tb.Fatal(err)
	}
	tag, err := name.NewTag(r.host + "/" + repo + ":1.0.0")
	if err != nil {
		tb.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		tb.Fatal(err)
	}
	h, err := img.Digest()
	if err != nil {
		tb.Fatal(err)
	}
	return tag.Context().Digest(h.String())
}

// newLog starts a Rekor stand-in for one test.
func newLog(tb testing.TB) (*rekortest.Log, []byte) {
	tb.Helper()
	l, err := rekortest.Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = l.Close() })
	tr, err := l.TrustedRootJSON()
	if err != nil {
		tb.Fatal(err)
	}
	return l, tr
}

// TestVerify signs with sigstore-go's signer in process (the project's
// own for the failures cosign cannot be made to produce); TestVerifyCosign
// signs with cosign itself.
func TestVerify(t *testing.T) {
	r := newRegistry(t)
	log, logRoot := newLog(t)
	logged := sign.BundleOptions{TransparencyLogs: []sign.Transparency{sign.NewRekor(&sign.RekorOptions{BaseURL: log.URL, Retries: 0})}}
	trusted, other := sigtest.NewKeypair(), sigtest.NewKeypair()
	ca := sigtest.NewCA()
	rootJSON, err := ca.TrustedRootJSON()
	if err != nil {
		t.Fatal(err)
	}
	const issuer, subject = "https://token.actions.githubusercontent.com", "https://github.com/acme/shop/.github/workflows/release.yaml@refs/heads/main"
	keyless := func(san string) sign.BundleOptions {
		return sign.BundleOptions{CertificateProvider: sigtest.Provider{CA: ca, Issuer: issuer, SAN: san}}
	}
	tests := []struct {
		name    string
		sign    func(d name.Digest) error
		wantBy  string
		wantErr string
	}{
		{name: "a key's logged signature (a bundle among the referrers)", sign: func(d name.Digest) error {
			_, err := sigtest.SignBundle(d, trusted, logged)
			return err
		}, wantBy: "key release"},
		// Catches a key verifier that takes a signature without its log
		// entry (cosign's --insecure-ignore-tlog, silently).
		{name: "a key's signature in no log (.sig tag)", sign: func(d name.Digest) error { return sigtest.SignLegacy(context.Background(), d, trusted, nil) }, wantErr: "no transparency-log entry"},
		{name: "a key's signature in no log (bundle)", sign: func(d name.Digest) error {
			_, err := sigtest.SignBundle(d, trusted, sign.BundleOptions{})
			return err
		}, wantErr: "no transparency-log entry"},
		{name: "a keyless signature of the trusted identity", sign: func(d name.Digest) error {
			_, err := sigtest.SignBundle(d, sigtest.NewKeypair(), keyless(subject))
			return err
		}, wantBy: subject},
		{name: "unsigned", sign: func(name.Digest) error { return nil }, wantErr: "is not signed"},
		{name: "signed with another key", sign: func(d name.Digest) error {
			_, err := sigtest.SignBundle(d, other, logged)
			return err
		}, wantErr: "no signature of"},
		{name: "a keyless signature of another subject", sign: func(d name.Digest) error {
			_, err := sigtest.SignBundle(d, sigtest.NewKeypair(), keyless("https://github.com/mallory/shop/.github/workflows/release.yaml@refs/heads/main"))
			return err
		}, wantErr: "signed by https://github.com/mallory/shop/.github/workflows/release.yaml@refs/heads/main (OIDC issuer " + issuer + "), which no trusted identity matches (ci: issuer " + issuer},
		{name: "a keyless signature from a CA the root does not hold", sign: func(d name.Digest) error {
			_, err := sigtest.SignBundle(d, sigtest.NewKeypair(), sign.BundleOptions{CertificateProvider: sigtest.Provider{CA: sigtest.NewCA(), Issuer: issuer, SAN: subject}})
			return err
		}, wantErr: "no signature of"},
		{name: "a signature copied from another image", sign: func(d name.Digest) error {
			src := r.push(t, "acme/elsewhere")
			if _, err := sigtest.SignBundle(src, trusted, logged); err != nil {
				return err
			}
			raw, err := bundleOf(src)
			if err != nil {
				return err
			}
			return sigtest.AttachBundle(d, raw, signature.CosignSignPredicate)
		}, wantErr: "no signature of"},
	}
	v, err := signature.New(r.access, map[string]signature.Policy{"shop": {
		Keys:        []signature.Key{{Name: "release", PEM: trusted.PublicKeyPEM(), TrustedRoot: logRoot}},
		Identities:  []signature.Identity{{Name: "ci", Issuer: issuer, Subject: "^https://github\\.com/acme/.*$"}},
		TrustedRoot: rootJSON,
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := r.push(t, "acme/shop-"+string(rune('a'+i)))
			if err := tt.sign(d); err != nil {
				t.Fatalf("signing: %v", err)
			}
			by, err := v.Verify(t.Context(), "shop", d.Context().Name(), d.DigestStr())
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Verify: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Verify = %q, %v; want an error saying %q", by, err, tt.wantErr)
			case tt.wantErr != "" && !fault.IsPermanent(err):
				t.Errorf("error %v is not permanent", err)
			case by != tt.wantBy:
				t.Errorf("signed by %q, want %q", by, tt.wantBy)
			}
		})
	}
}

// A signed digest is verified once per application: the result comes from
// the cache afterwards. A refusal is asked again: the digest may be signed
// since.
func TestVerifyCaches(t *testing.T) {
	r := newRegistry(t)
	k := sigtest.NewKeypair()
	v, err := signature.New(r.access, map[string]signature.Policy{"shop": {Keys: []signature.Key{{Name: "k", PEM: k.PublicKeyPEM()}}, IgnoreTlog: true}})
	if err != nil {
		t.Fatal(err)
	}
	signed, unsigned := r.push(t, "acme/signed"), r.push(t, "acme/unsigned")
	if err := sigtest.SignLegacy(context.Background(), signed, k, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(t.Context(), "shop", signed.Context().Name(), signed.DigestStr()); err != nil {
		t.Fatal(err)
	}
	before := r.count.Load()
	if by, err := v.Verify(t.Context(), "shop", signed.Context().Name(), signed.DigestStr()); err != nil || by != "key k"+signature.TlogNotChecked {
		t.Errorf("again: %q, %v", by, err)
	}
	if r.count.Load() != before {
		t.Errorf("the second Verify of a signed digest asked the registry again")
	}
	if _, err := v.Verify(t.Context(), "shop", unsigned.Context().Name(), unsigned.DigestStr()); !fault.IsPermanent(err) {
		t.Fatalf("unsigned: %v, want a permanent error", err)
	}
	if err := sigtest.SignLegacy(t.Context(), unsigned, k, nil); err != nil {
		t.Fatal(err)
	}
	if by, err := v.Verify(t.Context(), "shop", unsigned.Context().Name(), unsigned.DigestStr()); err != nil || by != "key k"+signature.TlogNotChecked {
		t.Errorf("signed after it was refused: %q, %v; want key k%s", by, err, signature.TlogNotChecked)
	}
	if _, err := v.Verify(t.Context(), "other", signed.Context().Name(), signed.DigestStr()); err == nil || !fault.IsPermanent(err) {
		t.Errorf("an application without a policy: %v, want a permanent error", err)
	}
}

func TestNewRefusesABadPolicy(t *testing.T) {
	for name, p := range map[string]signature.Policy{
		"empty":                          {},
		"not a key":                      {Keys: []signature.Key{{Name: "k", PEM: []byte("nope")}}, IgnoreTlog: true},
		"a key without a log":            {Keys: []signature.Key{{Name: "k", PEM: sigtest.NewKeypair().PublicKeyPEM()}}},
		"a key whose root has no log":    {Keys: []signature.Key{{Name: "k", PEM: sigtest.NewKeypair().PublicKeyPEM(), TrustedRoot: mustRoot(t)}}},
		"ignoring the log without a key": {Identities: []signature.Identity{{Name: "i", Issuer: "x", Subject: "y"}}, TrustedRoot: mustRoot(t), IgnoreTlog: true},
		"not a root":                     {Identities: []signature.Identity{{Name: "i", Issuer: "x", Subject: "y"}}, TrustedRoot: []byte("{}x")},
		"a bad subject ":                 {Identities: []signature.Identity{{Name: "i", Issuer: "x", Subject: "("}}, TrustedRoot: mustRoot(t)},
	} {
		if _, err := signature.New(nil, map[string]signature.Policy{"shop": p}); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

func mustRoot(t *testing.T) []byte {
	t.Helper()
	b, err := sigtest.NewCA().TrustedRootJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BenchmarkVerify is what verifying a new digest costs (the registry on
// loopback), and a cached one.
func BenchmarkVerify(b *testing.B) {
	r := newRegistry(b)
	k := sigtest.NewKeypair()
	pol := map[string]signature.Policy{"shop": {Keys: []signature.Key{{Name: "k", PEM: k.PublicKeyPEM()}}, IgnoreTlog: true}}
	d := r.push(b, "acme/bench")
	if err := sigtest.SignLegacy(context.Background(), d, k, nil); err != nil {
		b.Fatal(err)
	}
	b.Run("uncached", func(b *testing.B) {
		for b.Loop() {
			v, err := signature.New(r.access, pol)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := v.Verify(b.Context(), "shop", d.Context().Name(), d.DigestStr()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		v, err := signature.New(r.access, pol)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := v.Verify(b.Context(), "shop", d.Context().Name(), d.DigestStr()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// bundleOf reads the first bundle attached to d as a referrer.
func bundleOf(d name.Digest) ([]byte, error) {
	idx, err := remote.Referrers(d)
	if err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(im.Manifests) == 0 {
		return nil, fmt.Errorf("no referrer of %s", d)
	}
	img, err := remote.Image(d.Context().Digest(im.Manifests[0].Digest.String()))
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		return nil, fmt.Errorf("referrer of %s: %d layers, %v", d, len(layers), err)
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	return io.ReadAll(rc)
}
