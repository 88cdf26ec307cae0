package intake

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/go-cmp/cmp"
)

const (
	garAudience = "https://flotilla.example.com/hooks/gcr"
	garAccount  = "pubsub-push@acme.iam.gserviceaccount.com"
)

// garKeyPair is a signing key of the tests and its kid.
type garKeyPair struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func (k garKeyPair) jwk() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"}
}

// garTestKeys are made once: RSA key generation is slow.
var garTestKeys = sync.OnceValue(func() struct{ rsa, ec, stranger, rotated garKeyPair } {
	newRSA := func() *rsa.PrivateKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		return k
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return struct{ rsa, ec, stranger, rotated garKeyPair }{
		rsa:      garKeyPair{"rsa-1", jose.RS256, newRSA()},
		ec:       garKeyPair{"ec-1", jose.ES256, ec},
		stranger: garKeyPair{"stranger", jose.RS256, newRSA()},
		rotated:  garKeyPair{"rsa-2", jose.RS256, newRSA()},
	}
})

// garJWKS is the JWKS document of keys.
func garJWKS(t *testing.T, keys ...garKeyPair) []byte {
	t.Helper()
	var set jose.JSONWebKeySet
	for _, k := range keys {
		set.Keys = append(set.Keys, k.jwk())
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// garClaims are the claims of a good Pub/Sub push token, with overrides
// (a nil value deletes the claim).
func garClaims(overrides map[string]any) map[string]any {
	now := time.Now()
	c := map[string]any{
		"iss":            "https://accounts.google.com",
		"aud":            garAudience,
		"azp":            "113774264463038321964",
		"sub":            "113774264463038321964",
		"email":          garAccount,
		"email_verified": true,
		"iat":            now.Add(-time.Minute).Unix(),
		"exp":            now.Add(time.Hour).Unix(),
	}
	for k, v := range overrides {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// garMint signs claims with k, naming kid in the header.
func garMint(t *testing.T, k garKeyPair, kid string, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.priv, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func garB64(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// garUnsigned is a token with alg "none".
func garUnsigned(claims map[string]any) string {
	return garB64(map[string]string{"alg": "none", "typ": "JWT"}) + "." + garB64(claims) + "."
}

// garHMACForgery signs claims with HS256 keyed with the DER of k's public key,
// the classic algorithm-confusion forgery.
func garHMACForgery(t *testing.T, k garKeyPair, claims map[string]any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k.priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.HS256, Key: jose.JSONWebKey{Key: der, KeyID: k.kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// garSwapPayload replaces the claims of a signed token, keeping header and
// signature.
func garSwapPayload(tok string, claims map[string]any) string {
	parts := strings.Split(tok, ".")
	parts[1] = garB64(claims)
	return strings.Join(parts, ".")
}

// garJWKSServer serves the JWKS of keys on 127.0.0.1 and counts fetches.
type garJWKSServer struct {
	*httptest.Server
	mu      sync.Mutex
	doc     []byte
	fetches atomic.Int32
	// gate, when set, holds every fetch until it is closed.
	gate chan struct{}
}

func newGARJWKSServer(t *testing.T, keys ...garKeyPair) *garJWKSServer {
	t.Helper()
	s := &garJWKSServer{doc: garJWKS(t, keys...)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		doc, gate := s.doc, s.gate
		s.mu.Unlock()
		if gate != nil {
			<-gate
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *garJWKSServer) serve(t *testing.T, keys ...garKeyPair) {
	t.Helper()
	doc := garJWKS(t, keys...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.doc = doc
}

// garJWKSFile writes the JWKS of keys to a file.
func garJWKSFile(t *testing.T, doc []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func newTestGARSender(t *testing.T, oc OIDCConfig) GARSender {
	t.Helper()
	s, err := newGARSender(ReceiverConfig{Name: "gcr", Type: SenderGAR, OIDC: oc})
	if err != nil {
		t.Fatalf("newGARSender: %v", err)
	}
	return s.(GARSender)
}

func garDelivery(body []byte, kv ...string) *Delivery {
	return &Delivery{
		Receiver:   "gcr",
		Header:     header(append([]string{"Content-Type", "application/json"}, kv...)...),
		Body:       body,
		ReceivedAt: received,
	}
}

func TestGARAuthenticate(t *testing.T) {
	keys := garTestKeys()
	good := garClaims(nil)
	goodRSA := garMint(t, keys.rsa, keys.rsa.kid, good)
	tests := []struct {
		name string
		// auth is the Authorization header; "" sends none.
		auth       string
		account    string // ServiceAccount; garAccount unless "-"
		wantReason string // "" means accepted
	}{
		{name: "good RS256 token", auth: "Bearer " + goodRSA},
		{name: "good ES256 token", auth: "Bearer " + garMint(t, keys.ec, keys.ec.kid, good)},
		{name: "scheme is case-insensitive", auth: "bearer " + goodRSA},
		{name: "audience among several", auth: "Bearer " + garMint(t, keys.rsa, keys.rsa.kid,
			garClaims(map[string]any{"aud": []string{"https://other.example.com", garAudience}}))},
		{name: "Google issuer without scheme", auth: "Bearer " + garMint(t, keys.rsa, keys.rsa.kid,
			garClaims(map[string]any{"iss": "accounts.google.com"}))},
		{name: "expired within the clock skew", auth: "Bearer " + garMint(t, keys.rsa, keys.rsa.kid,
			garClaims(map[string]any{"exp": time.Now().Add(-20 * time.Second).Unix()}))},
		{name: "email_verified as a string", auth: "Bearer " + garMint(t, keys.rsa, keys.rsa.kid,
			garClaims(map[string]any{"email_verified": "true"}))},
		{name: "no service account configured, no email", account: "-", auth: "Bearer " + garMint(t, keys.rsa, keys.rsa.kid,
			garClaims(map[string]any{"email": nil, "email_verified": nil}))},

		{name: "missing bearer", wantReason: "missing Authorization header"},
		{name: "empty bearer", auth: "Bearer ", wantReason: "not a Bearer token"},
		{name: "basic scheme", auth: "Basic " + goodRSA, wantReason: "not a Bearer token"},
		{name: "token without scheme", auth: goodRSA, wantReason: "not a Bearer token"},
		{name: "garbage token", auth: "Bearer not.a.jwt", wantReason: "not a JWT signed with an accepted algorithm"},
		{name: "wrong audience", auth: "Bearer " + garMint(t, keys.rsa, keys.rsa.kid,
			garClaims(map[string]any{"aud": "https://evil.example.com/hooks/gcr"})), wantReason: "audience"},
		{name: "no audience", auth: "Bearer " + garMint(t, keys.rsa, keys.rsa.kid,
			garClaims(map[string]any{"aud": nil})), wantReason: "audience"},
		{name: "wrong issuer", auth: "Bearer " + garMint(t, keys.rsa, keys.rsa.kid,
			garClaims(map[string]any{"iss": "https://evil.example.com"})), wantReason: "issuer is not https://accounts.google.com"},
		{name: "expired", auth: "Bearer " + garMint(t, keys.rsa, keys.rsa.kid,
			garClaims(map[string]any{"exp": time.Now().Add(-10 * time.Minute).Unix()})), wantReason: "token expired"},
		{name: "no expiry", auth: "Bearer " + garMint(t, keys.rsa, keys.rsa.kid,
			garClaims(map[string]any{"exp": nil})), wantReason: "token expired"},
		{name: "not valid yet", auth: "Bearer " + garMint(t, keys.rsa, keys.rsa.kid,
			garClaims(map[string]any{"nbf": time.Now().Add(time.Hour).Unix()})), wantReason: "not valid yet"},
		{name: "signed by an unknown key", auth: "Bearer " + garMint(t, keys.stranger, keys.stranger.kid, good),
			wantReason: "signature not verified"},
		{name: "signed by an unknown key naming a known kid", auth: "Bearer " + garMint(t, keys.stranger, keys.rsa.kid, good),
			wantReason: "signature not verified"},
		{name: "claims changed after signing", auth: "Bearer " + garSwapPayload(
			garMint(t, keys.rsa, keys.rsa.kid, garClaims(map[string]any{"aud": "https://other.example.com"})), good),
			wantReason: "signature not verified"},
		{name: "alg none", auth: "Bearer " + garUnsigned(good), wantReason: "not a JWT signed with an accepted algorithm"},
		{name: "HS256 keyed with the public key", auth: "Bearer " + garHMACForgery(t, keys.rsa, good),
			wantReason: "not a JWT signed with an accepted algorithm"},
		{name: "wrong service account", auth: "Bearer " + garMint(t, keys.rsa, keys.rsa.kid,
			garClaims(map[string]any{"email": "someone@acme.iam.gserviceaccount.com"})), wantReason: "not the configured service account"},
		{name: "no email", auth: "Bearer " + garMint(t, keys.rsa, keys.rsa.kid,
			garClaims(map[string]any{"email": nil})), wantReason: "not the configured service account"},
		{name: "email not verified", auth: "Bearer " + garMint(t, keys.rsa, keys.rsa.kid,
			garClaims(map[string]any{"email_verified": false})), wantReason: "email is not verified"},
		{name: "email_verified missing", auth: "Bearer " + garMint(t, keys.rsa, keys.rsa.kid,
			garClaims(map[string]any{"email_verified": nil})), wantReason: "email is not verified"},
	}

	jwks := newGARJWKSServer(t, keys.rsa, keys.ec)
	sources := map[string]OIDCConfig{
		"file": {JWKSFile: garJWKSFile(t, garJWKS(t, keys.rsa, keys.ec))},
		"url":  {JWKSURL: jwks.URL},
	}
	for source, oc := range sources {
		for _, tt := range tests {
			t.Run(source+"/"+tt.name, func(t *testing.T) {
				oc := oc
				oc.Audience = garAudience
				if tt.account != "-" {
					oc.ServiceAccount = garAccount
				}
				s := newTestGARSender(t, oc)
				d := garDelivery(fixture(t, "gar", "insert_tag.json"))
				if tt.auth != "" {
					d.Header.Set("Authorization", tt.auth)
				}
				checkAuth(t, s, d, tt.wantReason == "")
				if tt.wantReason == "" {
					return
				}
				err := s.Authenticate(t.Context(), d)
				if !strings.Contains(err.Error(), tt.wantReason) {
					t.Errorf("error %q does not say %q", err, tt.wantReason)
				}
				checkNoTokenInError(t, err, tt.auth)
			})
		}
	}
}

// checkNoTokenInError fails when err quotes any part of the token of auth.
func checkNoTokenInError(t *testing.T, err error, auth string) {
	t.Helper()
	_, tok, _ := strings.Cut(auth, " ")
	for part := range strings.SplitSeq(tok, ".") {
		if len(part) >= 8 && strings.Contains(err.Error(), part) {
			t.Errorf("error %q quotes the token", err)
		}
	}
	for _, claim := range []string{"evil.example.com", "someone@", "113774264463038321964"} {
		if strings.Contains(err.Error(), claim) {
			t.Errorf("error %q quotes the claim %q", err, claim)
		}
	}
}

func TestGARAuthenticateCustomIssuer(t *testing.T) {
	keys := garTestKeys()
	const issuer = "https://issuer.example.com"
	s := newTestGARSender(t, OIDCConfig{
		Issuer:   issuer,
		Audience: garAudience,
		JWKSFile: garJWKSFile(t, garJWKS(t, keys.rsa)),
	})
	d := garDelivery(fixture(t, "gar", "insert_tag.json"))
	d.Header.Set("Authorization", "Bearer "+garMint(t, keys.rsa, keys.rsa.kid, garClaims(map[string]any{"iss": issuer})))
	checkAuth(t, s, d, true)
	// The scheme-less Google issuer is accepted only for Google.
	d.Header.Set("Authorization", "Bearer "+garMint(t, keys.rsa, keys.rsa.kid, garClaims(nil)))
	checkAuth(t, s, d, false)
}

func TestGARRemoteKeySetCachesAndRotates(t *testing.T) {
	keys := garTestKeys()
	jwks := newGARJWKSServer(t, keys.rsa)
	s := newTestGARSender(t, OIDCConfig{Audience: garAudience, JWKSURL: jwks.URL})
	auth := func(k garKeyPair, wantOK bool) {
		t.Helper()
		d := garDelivery(fixture(t, "gar", "insert_tag.json"), "Authorization", "Bearer "+garMint(t, k, k.kid, garClaims(nil)))
		checkAuth(t, s, d, wantOK)
	}
	auth(keys.rsa, true)
	auth(keys.rsa, true)
	if n := jwks.fetches.Load(); n != 1 {
		t.Fatalf("%d JWKS fetches for two tokens of one key, want 1", n)
	}
	// go-oidc releases a fetch's result (its "inflight") in a goroutine
	// after handing the keys to the waiters: a token checked before that
	// goroutine ran gets the old result again, not a new fetch. Let it run
	// (a loaded machine delayed it past the next line once).
	time.Sleep(200 * time.Millisecond)
	// Google rotates: a token names a key the cache lacks, so the key set
	// is fetched again.
	jwks.serve(t, keys.rsa, keys.rotated)
	auth(keys.rotated, true)
	if n := jwks.fetches.Load(); n != 2 {
		t.Fatalf("%d JWKS fetches after a rotation, want 2", n)
	}
	auth(keys.rsa, true)
	auth(keys.rotated, true)
	if n := jwks.fetches.Load(); n != 2 {
		t.Fatalf("%d JWKS fetches, want 2", n)
	}
}

// A token naming a key id the cache lacks makes the key set fetch again;
// forged ones must not make flotilla hammer the key server.
func TestGARForgedKeyIDsDoNotFloodTheKeyServer(t *testing.T) {
	keys := garTestKeys()
	jwks := newGARJWKSServer(t, keys.rsa)
	s := newTestGARSender(t, OIDCConfig{Audience: garAudience, JWKSURL: jwks.URL})
	body := fixture(t, "gar", "insert_tag.json")
	legit := garDelivery(body, "Authorization", "Bearer "+garMint(t, keys.rsa, keys.rsa.kid, garClaims(nil)))
	checkAuth(t, s, legit, true)
	for i := range 50 {
		forged := garDelivery(body, "Authorization", "Bearer "+garMint(t, keys.rotated, fmt.Sprintf("forged-%d", i), garClaims(nil)))
		checkAuth(t, s, forged, false)
	}
	if n := jwks.fetches.Load(); n > garJWKSFetchBurst {
		t.Errorf("%d JWKS fetches for one real and 50 forged key ids, want at most %d", n, garJWKSFetchBurst)
	}
	checkAuth(t, s, legit, true) // the cached keys still verify
}

func TestThrottledTransport(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	c := &http.Client{Transport: newThrottledTransport(http.DefaultTransport, time.Hour, 2)}
	var refused int
	for range 5 {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if errors.Is(err, errKeysFetchedRecently) {
			refused++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	if hits.Load() != 2 || refused != 3 {
		t.Errorf("%d requests sent and %d refused, want 2 and 3", hits.Load(), refused)
	}
}

func TestGARKeyFetchOutlivesFirstRequest(t *testing.T) {
	keys := garTestKeys()
	jwks := newGARJWKSServer(t, keys.rsa)
	gate := make(chan struct{})
	jwks.mu.Lock()
	jwks.gate = gate
	jwks.mu.Unlock()
	t.Cleanup(func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	})
	s := newTestGARSender(t, OIDCConfig{Audience: garAudience, JWKSURL: jwks.URL})
	d := garDelivery(fixture(t, "gar", "insert_tag.json"), "Authorization", "Bearer "+garMint(t, keys.rsa, keys.rsa.kid, garClaims(nil)))

	// The first request gives up while the keys are being fetched.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := s.Authenticate(ctx, d)
	if !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), "request ended while fetching signing keys") {
		t.Fatalf("Authenticate under a cancelled context = %v, want unauthenticated while fetching keys", err)
	}
	close(gate)
	// The fetch it started carries on, and the next request uses it.
	checkAuth(t, s, d, true)
	if n := jwks.fetches.Load(); n != 1 {
		t.Errorf("%d JWKS fetches, want 1", n)
	}
}

func TestCheckGARCredentials(t *testing.T) {
	tests := []struct {
		name   string
		oc     OIDCConfig
		wantOK bool
	}{
		{"audience, default keys", OIDCConfig{Audience: garAudience}, true},
		{"audience and JWKS URL", OIDCConfig{Audience: garAudience, JWKSURL: "https://keys.example.com/certs"}, true},
		{"audience and JWKS file", OIDCConfig{Audience: garAudience, JWKSFile: "/etc/flotilla/jwks.json"}, true},
		{"no audience", OIDCConfig{ServiceAccount: garAccount}, false},
		{"both key sources", OIDCConfig{Audience: garAudience, JWKSURL: "https://keys.example.com/certs", JWKSFile: "/etc/jwks.json"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkGARCredentials(ReceiverConfig{Name: "gcr", Type: SenderGAR, Secret: "ignored", OIDC: tt.oc})
			if (err == nil) != tt.wantOK {
				t.Errorf("checkGARCredentials = %v, want ok %v", err, tt.wantOK)
			}
		})
	}
}

func TestNewGARSender(t *testing.T) {
	keys := garTestKeys()
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	encKey := keys.rsa.jwk()
	encKey.Use = "enc"
	docOf := func(ks ...jose.JSONWebKey) []byte {
		b, err := json.Marshal(jose.JSONWebKeySet{Keys: ks})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	privateJWK := jose.JSONWebKey{Key: keys.rsa.priv, KeyID: keys.rsa.kid}
	tests := []struct {
		name   string
		oc     OIDCConfig
		file   []byte // written to JWKSFile when set
		wantOK bool
	}{
		{name: "default JWKS URL", oc: OIDCConfig{Audience: garAudience}, wantOK: true},
		{name: "loopback http JWKS URL", oc: OIDCConfig{Audience: garAudience, JWKSURL: "http://127.0.0.1:8080/certs"}, wantOK: true},
		{name: "insecure receiver without OIDC config", wantOK: true},
		{name: "JWKS file of RSA and EC keys", oc: OIDCConfig{Audience: garAudience}, file: garJWKS(t, keys.rsa, keys.ec), wantOK: true},
		{name: "JWKS file with a private key", oc: OIDCConfig{Audience: garAudience}, file: docOf(privateJWK), wantOK: true},
		{name: "plain http JWKS URL", oc: OIDCConfig{Audience: garAudience, JWKSURL: "http://keys.example.com/certs"}},
		{name: "JWKS URL without host", oc: OIDCConfig{Audience: garAudience, JWKSURL: "https:///certs"}},
		{name: "JWKS URL that does not parse", oc: OIDCConfig{Audience: garAudience, JWKSURL: "https://[::1"}},
		{name: "both key sources", oc: OIDCConfig{Audience: garAudience, JWKSURL: "https://keys.example.com/certs"}, file: garJWKS(t, keys.rsa)},
		{name: "missing JWKS file", oc: OIDCConfig{Audience: garAudience, JWKSFile: "/nonexistent/jwks.json"}},
		{name: "JWKS file not JSON", oc: OIDCConfig{Audience: garAudience}, file: []byte("-----BEGIN PUBLIC KEY-----")},
		{name: "JWKS file without keys", oc: OIDCConfig{Audience: garAudience}, file: []byte(`{"keys":[]}`)},
		{name: "JWKS file with only encryption keys", oc: OIDCConfig{Audience: garAudience}, file: docOf(encKey)},
		{name: "JWKS file with a symmetric key", oc: OIDCConfig{Audience: garAudience}, file: docOf(jose.JSONWebKey{Key: []byte("0123456789abcdef0123456789abcdef"), KeyID: "hs"})},
		{name: "JWKS file with a P-384 key", oc: OIDCConfig{Audience: garAudience}, file: docOf(jose.JSONWebKey{Key: p384.Public(), KeyID: "p384"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			oc := tt.oc
			if tt.file != nil {
				oc.JWKSFile = garJWKSFile(t, tt.file)
			}
			s, err := newGARSender(ReceiverConfig{Name: "gcr", Type: SenderGAR, OIDC: oc, Insecure: oc.Audience == ""})
			if (err == nil) != tt.wantOK {
				t.Fatalf("newGARSender = %v, want ok %v", err, tt.wantOK)
			}
			if err != nil && oc.JWKSFile != "" && strings.Contains(err.Error(), "0123456789abcdef") {
				t.Errorf("error %q quotes key material", err)
			}
			if err == nil && s == nil {
				t.Fatal("newGARSender returned no sender")
			}
		})
	}
	t.Run("private key in the file verifies tokens", func(t *testing.T) {
		s := newTestGARSender(t, OIDCConfig{Audience: garAudience, JWKSFile: garJWKSFile(t, docOf(privateJWK))})
		d := garDelivery(fixture(t, "gar", "insert_tag.json"), "Authorization", "Bearer "+garMint(t, keys.rsa, keys.rsa.kid, garClaims(nil)))
		checkAuth(t, s, d, true)
	})
	t.Run("no audience refuses every delivery", func(t *testing.T) {
		s := newTestGARSender(t, OIDCConfig{JWKSFile: garJWKSFile(t, garJWKS(t, keys.rsa))})
		d := garDelivery(fixture(t, "gar", "insert_tag.json"), "Authorization", "Bearer "+garMint(t, keys.rsa, keys.rsa.kid, garClaims(nil)))
		checkAuth(t, s, d, false)
		checkAuth(t, GARSender{}, d, false)
	})
}

func TestGARParse(t *testing.T) {
	const (
		d1 = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
		d2 = "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
	)
	// push wraps a notification in a push envelope, its data encoded by enc.
	push := func(notification string, enc *base64.Encoding, message string) []byte {
		data := enc.EncodeToString([]byte(notification))
		return []byte(`{"message":{"data":"` + data + `"` + message + `},"subscription":"projects/acme/subscriptions/flotilla-gcr"}`)
	}
	const msg = `,"messageId":"42","publishTime":"2026-03-01T10:00:00Z"`
	// Notification data whose base64 uses '+' and '/' (base64url: '-', '_').
	const awkward = `{"action":"INSERT","tag":"gcr.io/acme/api:1.0","note":"???>>>"}`
	if s := base64.RawURLEncoding.EncodeToString([]byte(awkward)); !strings.ContainsAny(s, "-_") {
		t.Fatalf("test data %q does not exercise base64url", s)
	}
	api10 := events.ImagePushed{Registry: "gcr.io", Repository: "acme/api", Tag: "1.0", Sender: "gar", Receiver: "gcr", DeliveryID: "42"}
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

	tests := []imageParseCase{
		{
			name: "Artifact Registry tagged push",
			file: "insert_tag.json",
			want: []events.ImagePushed{{
				Registry: "us-docker.pkg.dev", Repository: "acme/shop/api", Tag: "1.4.2", Digest: d1,
				Sender: "gar", Receiver: "gcr", DeliveryID: "981636256311680",
			}},
			wantIDs:   []string{"gcr/gar/981636256311680"},
			wantTimes: []time.Time{time.Date(2026, 1, 30, 4, 18, 4, 805e6, time.UTC)},
			wantDeliv: "981636256311680",
		},
		{
			name: "GCR push, snake_case fields, unpadded base64url data",
			file: "insert_gcr_snake_urlsafe.json",
			want: []events.ImagePushed{{
				Registry: "eu.gcr.io", Repository: "acme-prod/team/app", Tag: "v2.0.0-rc.1", Digest: d2,
				Sender: "gar", Receiver: "gcr", DeliveryID: "4410297319517052",
			}},
			wantIDs:   []string{"gcr/gar/4410297319517052"},
			wantTimes: []time.Time{time.Date(2026, 2, 3, 11, 2, 59, 1e8, time.UTC)},
			wantDeliv: "4410297319517052",
		},
		{
			name: "digest of another image is dropped",
			file: "insert_digest_other_image.json",
			want: []events.ImagePushed{{
				Registry: "gcr.io", Repository: "acme/api", Tag: "latest",
				Sender: "gar", Receiver: "gcr", DeliveryID: "7700112233",
			}},
			wantIDs:   []string{"gcr/gar/7700112233"},
			wantTimes: []time.Time{time.Date(2026, 2, 4, 8, 0, 0, 0, time.UTC)},
			wantDeliv: "7700112233",
		},
		{name: "untagged push", file: "untagged_push.json", wantIgnored: "untagged push", wantDeliv: "981636256311681"},
		{name: "tag deleted", file: "delete_tag.json", wantIgnored: "delete", wantDeliv: "981636256311690"},
		{name: "digest deleted", file: "delete_digest.json", wantIgnored: "delete", wantDeliv: "981636256311691"},
		{
			name:      "registry with a port, padded base64url, lower-case action",
			body:      push(`{"action":"insert","digest":"registry.example.com:8443/team/app@`+d2+`","tag":"registry.example.com:8443/team/app:1.0"}`, base64.URLEncoding, msg),
			want:      []events.ImagePushed{{Registry: "registry.example.com:8443", Repository: "team/app", Tag: "1.0", Digest: d2, Sender: "gar", Receiver: "gcr", DeliveryID: "42"}},
			wantIDs:   []string{"gcr/gar/42"},
			wantTimes: []time.Time{at},
			wantDeliv: "42",
		},
		{
			name:      "base64url data",
			body:      push(awkward, base64.RawURLEncoding, msg),
			want:      []events.ImagePushed{api10},
			wantIDs:   []string{"gcr/gar/42"},
			wantTimes: []time.Time{at},
			wantDeliv: "42",
		},
		{
			name:      "standard base64 data with '+' and '/'",
			body:      push(awkward, base64.StdEncoding, msg),
			want:      []events.ImagePushed{api10},
			wantIDs:   []string{"gcr/gar/42"},
			wantTimes: []time.Time{at},
			wantDeliv: "42",
		},
		{
			name:        "numeric message id, no publish time, no content type",
			body:        push(`{"action":"INSERT","tag":"gcr.io/acme/api:1.0"}`, base64.StdEncoding, `,"messageId":42`),
			contentType: "-",
			want:        []events.ImagePushed{api10},
			wantIDs:     []string{"gcr/gar/42"},
			wantTimes:   []time.Time{received},
			wantDeliv:   "42",
		},
		{
			name:      "no message id: the body is the key",
			body:      []byte(`{"message":{"data":"eyJhY3Rpb24iOiJJTlNFUlQiLCJ0YWciOiJnY3IuaW8vYWNtZS9hcGk6MS4wIn0="}}`),
			want:      []events.ImagePushed{{Registry: "gcr.io", Repository: "acme/api", Tag: "1.0", Sender: "gar", Receiver: "gcr"}},
			wantIDs:   []string{"gcr/gar/sha256-7a264381c39721214d05131628930039e4aa24c0524e0d6a71726ee210ee3dea"},
			wantTimes: []time.Time{received},
		},
		{
			name:      "bad publish time falls back to the receive time",
			body:      push(`{"action":"INSERT","tag":"gcr.io/acme/api:1.0"}`, base64.StdEncoding, `,"messageId":"42","publishTime":"yesterday"`),
			want:      []events.ImagePushed{api10},
			wantIDs:   []string{"gcr/gar/42"},
			wantTimes: []time.Time{received},
			wantDeliv: "42",
		},
		{name: "no action", body: push(`{"tag":"gcr.io/acme/api:1.0"}`, base64.StdEncoding, msg), wantIgnored: "no action", wantDeliv: "42"},
		{name: "unknown action", body: push(`{"action":"UPDATE","tag":"gcr.io/acme/api:1.0"}`, base64.StdEncoding, msg), wantIgnored: `action "UPDATE"`, wantDeliv: "42"},
		{name: "insert of nothing", body: push(`{"action":"INSERT"}`, base64.StdEncoding, msg), wantIgnored: "untagged push", wantDeliv: "42"},

		{name: "wrong content type", file: "insert_tag.json", contentType: "application/x-www-form-urlencoded", wantErr: ErrUnsupportedMediaType},
		{name: "not JSON", body: []byte(`message`), wantErr: errAny},
		{name: "truncated", body: fixture(t, "gar", "insert_tag.json")[:120], wantErr: errAny},
		{name: "no message (payload unwrapping)", body: []byte(`{"action":"INSERT","tag":"gcr.io/acme/api:1.0"}`), wantErr: errAny},
		{name: "null message", body: []byte(`{"message":null}`), wantErr: errAny},
		{name: "no data", body: []byte(`{"message":{"messageId":"42"}}`), wantErr: errAny},
		{name: "data not base64", body: []byte(`{"message":{"data":"!!!not base64!!!","messageId":"42"}}`), wantErr: errAny},
		{name: "data not JSON", body: push(`INSERT gcr.io/acme/api:1.0`, base64.StdEncoding, msg), wantErr: errAny},
		{name: "message id of the wrong type", body: []byte(`{"message":{"data":"e30","messageId":{}}}`), wantErr: errAny},
		{name: "tag not fully qualified", body: push(`{"action":"INSERT","tag":"acme/api:1.0"}`, base64.StdEncoding, msg), wantErr: errAny},
		{name: "tag without a tag", body: push(`{"action":"INSERT","tag":"gcr.io/acme/api"}`, base64.StdEncoding, msg), wantErr: errAny},
		{name: "tag that is a digest", body: push(`{"action":"INSERT","tag":"gcr.io/acme/api@`+d1+`"}`, base64.StdEncoding, msg), wantErr: errAny},
		{name: "invalid repository", body: push(`{"action":"INSERT","tag":"gcr.io/Acme/API:1.0"}`, base64.StdEncoding, msg), wantErr: errAny},
	}
	runImageParseCases(t, "gar", GARSender{}.Parse, func(body []byte) *Delivery { return garDelivery(body) }, tests)
}

func TestGARRedeliveryDedupes(t *testing.T) {
	parse := func(body []byte) []string {
		t.Helper()
		res, err := GARSender{}.Parse(garDelivery(body))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range res.Events {
			ids = append(ids, e.ID())
		}
		return ids
	}
	first := parse(fixture(t, "gar", "insert_tag.json"))
	// Pub/Sub redelivers the same message id; the body may differ (a new
	// delivery attempt), the event id must not.
	again := parse(fixture(t, "gar", "insert_tag.json"))
	if diff := cmp.Diff(first, again); diff != "" || len(first) != 1 {
		t.Errorf("redelivery ids differ (-first +again):\n%s", diff)
	}
	other := parse(fixture(t, "gar", "insert_gcr_snake_urlsafe.json"))
	if cmp.Equal(first, other) {
		t.Errorf("two messages share the ids %v", first)
	}
}

func FuzzGARParse(f *testing.F) {
	seedFixtures(f, "gar")
	f.Add([]byte(`{"message":{"data":"eyJhY3Rpb24iOiJJTlNFUlQiLCJ0YWciOiJnY3IuaW8vYWNtZS9hcGk6MS4wIn0=","messageId":1e400}}`))
	f.Add([]byte(`{"message":{"data":"eyJhY3Rpb24iOiJJTlNFUlQiLCJ0YWciOiI6In0"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := GARSender{}.Parse(garDelivery(body))
		checkFuzzResult(t, res, err)
	})
}

func TestGARThroughIntake(t *testing.T) {
	keys := garTestKeys()
	rc := ReceiverConfig{Name: "gcr", Type: SenderGAR, OIDC: OIDCConfig{
		Audience:       garAudience,
		JWKSFile:       garJWKSFile(t, garJWKS(t, keys.rsa)),
		ServiceAccount: garAccount,
	}}
	for _, bad := range []ReceiverConfig{
		{Name: "gcr", Type: SenderGAR, Secret: "a secret is not an audience"},
		{Name: "gcr", Type: SenderGAR, OIDC: OIDCConfig{Audience: garAudience, JWKSURL: "https://keys.example.com", JWKSFile: rc.OIDC.JWKSFile}},
	} {
		if _, err := New([]ReceiverConfig{bad}, &memJournal{}); err == nil {
			t.Errorf("New(%+v) succeeded", bad.OIDC)
		}
	}
	if _, err := New([]ReceiverConfig{{Name: "gcr", Type: SenderGAR, Insecure: true}}, &memJournal{}); err != nil {
		t.Errorf("New(insecure gar receiver): %v", err)
	}

	ti := startIntakeWith(t, []ReceiverConfig{rc}, &memJournal{})
	bearer := func(claims map[string]any) http.Header {
		return header("Content-Type", "application/json", "Authorization", "Bearer "+garMint(t, keys.rsa, keys.rsa.kid, claims))
	}
	tests := []struct {
		name       string
		h          http.Header
		file       string
		wantStatus int
		wantBody   map[string]any
	}{
		{"tagged push", bearer(garClaims(nil)), "insert_tag.json", http.StatusAccepted,
			map[string]any{"accepted": 1.0, "duplicates": 0.0, "ids": []any{"gcr/gar/981636256311680"}}},
		{"redelivery", bearer(garClaims(nil)), "insert_tag.json", http.StatusAccepted,
			map[string]any{"accepted": 0.0, "duplicates": 1.0, "ids": []any{"gcr/gar/981636256311680"}}},
		{"untagged push", bearer(garClaims(nil)), "untagged_push.json", http.StatusAccepted,
			map[string]any{"ignored": "untagged push"}},
		{"wrong audience", bearer(garClaims(map[string]any{"aud": "https://elsewhere.example.com"})), "insert_tag.json", http.StatusUnauthorized,
			map[string]any{"error": "unauthenticated: token audience does not include the configured audience"}},
		{"no token", header("Content-Type", "application/json"), "insert_tag.json", http.StatusUnauthorized,
			map[string]any{"error": "unauthenticated: missing Authorization header"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ti.do(t, http.MethodPost, "/hooks/gcr", tt.h, fixture(t, "gar", tt.file))
			if r.status != tt.wantStatus {
				t.Errorf("status %d, want %d (%v)", r.status, tt.wantStatus, r.body)
			}
			if diff := cmp.Diff(tt.wantBody, r.body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}
