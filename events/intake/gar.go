package intake

import (
	"cmp"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/go-containerregistry/pkg/name"
	"golang.org/x/time/rate"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// SenderGAR is the sender type of Google Artifact Registry and Container
// Registry notifications, delivered by a Pub/Sub push subscription.
const SenderGAR = "gar"

// Defaults of [OIDCConfig] for Google-signed tokens.
const (
	garDefaultIssuer  = "https://accounts.google.com"
	garDefaultJWKSURL = "https://www.googleapis.com/oauth2/v3/certs"
)

const (
	// garClockSkew is how long after its expiry a token is still accepted,
	// for clocks that disagree a little.
	garClockSkew = time.Minute
	// garJWKSTimeout bounds one fetch of the signing keys: a fetch that
	// hangs would hold up every delivery that needs it.
	garJWKSTimeout = 10 * time.Second
	// The key set is fetched again whenever a token names a key id it lacks
	// (Google rotates keys), so anyone could make flotilla fetch it on every
	// forged token. These bound the fetches: a burst (the first fetch, a
	// rotation right after), then one per interval. Any fetch brings in
	// every published key, so a rotation is seen within one interval even
	// under a flood of forged key ids.
	garJWKSFetchBurst    = 2
	garJWKSFetchInterval = 30 * time.Second
)

// GARSender reads the notifications Google Artifact Registry (and Container
// Registry) publishes on the "gcr" Pub/Sub topic, as a push subscription
// delivers them. A tagged push (INSERT with a tag) becomes a
// [TypeImagePushed]; untagged pushes and deletes are ignored.
//
// Authentication: the subscription signs an OIDC token per request and sends
// it as "Authorization: Bearer <JWT>". The token must be signed by one of the
// issuer's keys (RS256, or ES256 with EC keys), be issued by the configured
// issuer for the configured audience, be unexpired, and, when a service
// account is configured, name it in a verified email claim. Build one with
// [NewSender] and ReceiverConfig.OIDC.
type GARSender struct {
	// verifier checks tokens; nil when no audience is configured, and then
	// every delivery is refused.
	verifier       *oidc.IDTokenVerifier
	issuer         string
	audience       string
	serviceAccount string
	// keySource names where the signing keys come from, for errors.
	keySource string
}

// checkGARCredentials checks that rc can authenticate deliveries: an audience,
// and at most one source of signing keys.
func checkGARCredentials(rc ReceiverConfig) error {
	if rc.OIDC.Audience == "" {
		return errors.New("no OIDC audience (set insecure to accept unauthenticated deliveries)")
	}
	return checkGARKeySource(rc.OIDC)
}

func checkGARKeySource(oc OIDCConfig) error {
	if oc.JWKSURL != "" && oc.JWKSFile != "" {
		return errors.New("OIDC JWKS URL and JWKS file are both set: set one")
	}
	return nil
}

// newGARSender builds the token verifier of rc once: a JWKS file is read and
// parsed here, a JWKS URL is fetched on first use and whenever a token names
// a key the cache lacks. A receiver without an audience (an insecure one)
// gets no verifier.
func newGARSender(rc ReceiverConfig) (Sender, error) {
	oc := rc.OIDC
	if err := checkGARKeySource(oc); err != nil {
		return nil, err
	}
	s := GARSender{
		issuer:         cmp.Or(oc.Issuer, garDefaultIssuer),
		audience:       oc.Audience,
		serviceAccount: oc.ServiceAccount,
		keySource:      cmp.Or(oc.JWKSFile, oc.JWKSURL, garDefaultJWKSURL),
	}
	keys, algs, err := garKeySet(oc)
	if err != nil {
		return nil, err
	}
	if s.audience == "" {
		return s, nil
	}
	s.verifier = oidc.NewVerifier(s.issuer, garTracingKeySet{keys}, &oidc.Config{
		ClientID:             s.audience,
		SupportedSigningAlgs: algs,
		Now:                  func() time.Time { return time.Now().Add(-garClockSkew) },
	})
	return s, nil
}

// garKeySet returns the signing keys of oc and the algorithms they sign with.
func garKeySet(oc OIDCConfig) (oidc.KeySet, []string, error) {
	if oc.JWKSFile != "" {
		return garStaticKeySet(oc.JWKSFile)
	}
	jwksURL := cmp.Or(oc.JWKSURL, garDefaultJWKSURL)
	if err := checkGARJWKSURL(jwksURL); err != nil {
		return nil, nil, err
	}
	// The key set fetches under this context, never under a request's:
	// a request that gives up must not cancel a fetch others wait for.
	client := &http.Client{Timeout: garJWKSTimeout, Transport: newThrottledTransport(http.DefaultTransport, garJWKSFetchInterval, garJWKSFetchBurst)}
	ctx := oidc.ClientContext(context.Background(), client)
	return oidc.NewRemoteKeySet(ctx, jwksURL), []string{oidc.RS256, oidc.ES256}, nil
}

// checkGARJWKSURL accepts https URLs, and http ones on loopback (tests, a
// local proxy): keys fetched in the clear could be anyone's.
func checkGARJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("parsing OIDC JWKS URL: %w", err)
	}
	switch {
	case u.Host == "":
		return fmt.Errorf("OIDC JWKS URL %q has no host", raw)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && garIsLoopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("OIDC JWKS URL %q: want https (http only on loopback)", raw)
}

func garIsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// garStaticKeySet reads the JWKS document at path. Every key must be an RSA
// or P-256 EC signing key; private keys contribute their public half.
func garStaticKeySet(path string) (oidc.KeySet, []string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading OIDC JWKS file: %w", err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, nil, fmt.Errorf("parsing OIDC JWKS file %s: %w", path, err)
	}
	var pubs []crypto.PublicKey
	var algs []string
	for i, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		pub, alg, err := garPublicKey(k)
		if err != nil {
			return nil, nil, fmt.Errorf("OIDC JWKS file %s: key %d (kid %q): %w", path, i, k.KeyID, err)
		}
		pubs = append(pubs, pub)
		if !slices.Contains(algs, alg) {
			algs = append(algs, alg)
		}
	}
	if len(pubs) == 0 {
		return nil, nil, fmt.Errorf("OIDC JWKS file %s holds no signing keys", path)
	}
	return &oidc.StaticKeySet{PublicKeys: pubs}, algs, nil
}

// garPublicKey returns the public key of k and the algorithm it verifies.
func garPublicKey(k jose.JSONWebKey) (crypto.PublicKey, string, error) {
	if !k.Valid() {
		return nil, "", errors.New("invalid key")
	}
	switch pub := k.Public().Key.(type) {
	case *rsa.PublicKey:
		return pub, oidc.RS256, nil
	case *ecdsa.PublicKey:
		if pub.Curve != elliptic.P256() {
			return nil, "", fmt.Errorf("EC curve %s: want P-256 (ES256)", pub.Curve.Params().Name)
		}
		return pub, oidc.ES256, nil
	default:
		return nil, "", fmt.Errorf("key type %T: want RSA or EC", k.Key)
	}
}

// Authenticate implements [Sender].
func (s GARSender) Authenticate(ctx context.Context, d *Delivery) error {
	if s.verifier == nil {
		return unauthenticated("no OIDC audience configured")
	}
	raw, err := garBearerToken(d)
	if err != nil {
		return err
	}
	trace := &garTrace{}
	tok, err := s.verifier.Verify(context.WithValue(ctx, garTraceKey{}, trace), raw)
	if err != nil {
		return unauthenticated(s.rejection(ctx, err, trace))
	}
	return s.checkServiceAccount(tok)
}

// garBearerToken returns the token of "Authorization: Bearer <token>".
func garBearerToken(d *Delivery) (string, error) {
	v := d.Header.Get("Authorization")
	if v == "" {
		return "", unauthenticated("missing Authorization header")
	}
	scheme, tok, _ := strings.Cut(v, " ")
	tok = strings.TrimSpace(tok)
	if !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", unauthenticated("Authorization header is not a Bearer token")
	}
	return tok, nil
}

// checkServiceAccount checks the email claims of a verified token.
func (s GARSender) checkServiceAccount(tok *oidc.IDToken) error {
	if s.serviceAccount == "" {
		return nil
	}
	var claims struct {
		Email         string `json:"email"`
		EmailVerified any    `json:"email_verified"`
	}
	if err := tok.Claims(&claims); err != nil {
		return unauthenticated("token claims cannot be read")
	}
	if claims.Email != s.serviceAccount {
		return unauthenticated("token email is not the configured service account")
	}
	// Google writes a boolean; a string "true" is the same claim.
	if claims.EmailVerified != true && claims.EmailVerified != "true" {
		return unauthenticated("token email is not verified")
	}
	return nil
}

// garTraceKey is the context key of the *garTrace of one verification.
type garTraceKey struct{}

// garTrace records how far one verification got, so that a rejection can
// say why without repeating the verifier's messages (which quote the token).
type garTrace struct {
	// reached: the token parsed with an accepted algorithm and its
	// signature was checked.
	reached bool
	// payload is the claim set of a token whose signature verified.
	payload []byte
}

// garTracingKeySet is a key set that fills the *garTrace of the context.
type garTracingKeySet struct{ oidc.KeySet }

// VerifySignature implements [oidc.KeySet].
func (k garTracingKeySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	payload, err := k.KeySet.VerifySignature(ctx, jwt)
	if t, ok := ctx.Value(garTraceKey{}).(*garTrace); ok {
		t.reached = true
		if err == nil {
			t.payload = payload
		}
	}
	return payload, err
}

// rejection says why the verifier refused a token, without its contents.
func (s GARSender) rejection(ctx context.Context, err error, trace *garTrace) string {
	var expired *oidc.TokenExpiredError
	switch {
	case errors.As(err, &expired):
		return "token expired"
	case !trace.reached:
		return "token is not a JWT signed with an accepted algorithm"
	case trace.payload == nil && ctx.Err() != nil:
		return "request ended while fetching signing keys from " + s.keySource
	case trace.payload == nil:
		return "token signature not verified by any key from " + s.keySource + " (or the keys could not be fetched)"
	}
	var claims struct {
		Issuer    string          `json:"iss"`
		Audience  json.RawMessage `json:"aud"`
		NotBefore *float64        `json:"nbf"`
	}
	if json.Unmarshal(trace.payload, &claims) != nil {
		return "token claims cannot be read"
	}
	var auds []string
	if json.Unmarshal(claims.Audience, &auds) != nil {
		var aud string
		_ = json.Unmarshal(claims.Audience, &aud)
		auds = []string{aud}
	}
	switch {
	case !s.issuedBy(claims.Issuer):
		return "token issuer is not " + s.issuer
	case !slices.Contains(auds, s.audience):
		return "token audience does not include the configured audience"
	case claims.NotBefore != nil && time.Unix(int64(*claims.NotBefore), 0).After(time.Now()):
		return "token not valid yet"
	}
	return "token rejected"
}

// issuedBy tells whether iss is the configured issuer. Google also writes
// its issuer without the scheme; the verifier accepts that, and so does this.
func (s GARSender) issuedBy(iss string) bool {
	if iss == s.issuer {
		return true
	}
	return s.issuer == garDefaultIssuer && iss == "accounts.google.com"
}

// garPush is the JSON body of a Pub/Sub push request.
type garPush struct {
	Message *struct {
		Data             string    `json:"data"`
		MessageID        garString `json:"messageId"`
		MessageIDSnake   garString `json:"message_id"`
		PublishTime      string    `json:"publishTime"`
		PublishTimeSnake string    `json:"publish_time"`
	} `json:"message"`
}

// garNotification is a message of the "gcr" topic. Digest and Tag are fully
// qualified ("host/path@sha256:...", "host/path:tag"); either may be absent.
type garNotification struct {
	Action string `json:"action"`
	Digest string `json:"digest"`
	Tag    string `json:"tag"`
}

// garString is a JSON string that a sender may also write as a number.
type garString string

// UnmarshalJSON implements [json.Unmarshaler].
func (s *garString) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err == nil {
		*s = garString(str)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("want a string or a number: %w", err)
	}
	*s = garString(n)
	return nil
}

// Parse implements [Sender].
func (GARSender) Parse(d *Delivery) (Result, error) {
	mt, err := mediaType(d)
	if err != nil {
		return Result{}, err
	}
	if mt != "" && mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return Result{}, fault.Permanent(fmt.Errorf("%w %q: want application/json", ErrUnsupportedMediaType, mt))
	}
	var push garPush
	if err := json.Unmarshal(d.Body, &push); err != nil {
		return Result{}, malformed("decoding Pub/Sub push: %w", err)
	}
	msg := push.Message
	if msg == nil {
		return Result{}, malformed("Pub/Sub push has no message (a subscription with payload unwrapping is not supported)")
	}
	id := string(cmp.Or(msg.MessageID, msg.MessageIDSnake))
	res := Result{DeliveryID: id}
	if msg.Data == "" {
		return Result{}, malformed("Pub/Sub message has no data")
	}
	data, err := garDecodeData(msg.Data)
	if err != nil {
		return Result{}, malformed("decoding Pub/Sub message data: %w", err)
	}
	var n garNotification
	if err := json.Unmarshal(data, &n); err != nil {
		return Result{}, malformed("decoding registry notification: %w", err)
	}
	switch {
	case strings.EqualFold(n.Action, "DELETE"):
		res.Ignored = "delete"
		return res, nil
	case n.Action == "":
		res.Ignored = "no action"
		return res, nil
	case !strings.EqualFold(n.Action, "INSERT"):
		res.Ignored = fmt.Sprintf("action %q", n.Action)
		return res, nil
	case n.Tag == "":
		res.Ignored = "untagged push"
		return res, nil
	}
	p, err := garImagePushed(n)
	if err != nil {
		return Result{}, err
	}
	p.DeliveryID = id
	// The publish time is informative only: a malformed one is not worth
	// refusing a push for.
	at, _ := time.Parse(time.RFC3339Nano, cmp.Or(msg.PublishTime, msg.PublishTimeSnake))
	e, err := imagePushedEvent(d, cmp.Or(id, bodyKey(d)), p, at)
	if err != nil {
		return Result{}, err
	}
	res.Events = []cloudevents.Event{e}
	return res, nil
}

// garDecodeData decodes message data in any base64 alphabet, padded or not.
func garDecodeData(s string) ([]byte, error) {
	s = strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\r', '\n', '=':
			return -1
		case '-':
			return '+'
		case '_':
			return '/'
		}
		return r
	}, s)
	return base64.RawStdEncoding.DecodeString(s)
}

// garImagePushed reads the pushed image of an INSERT with a tag. The digest
// counts only when it names the same image.
func garImagePushed(n garNotification) (events.ImagePushed, error) {
	tag, err := name.NewTag(n.Tag, name.StrictValidation)
	if err != nil {
		return events.ImagePushed{}, malformed("tag %q is not a fully qualified image:tag: %w", n.Tag, err)
	}
	p := events.ImagePushed{
		Registry:   tag.RegistryStr(),
		Repository: tag.RepositoryStr(),
		Tag:        tag.TagStr(),
		Sender:     SenderGAR,
	}
	if dig, err := name.NewDigest(n.Digest, name.StrictValidation); err == nil && dig.Context() == tag.Context() {
		p.Digest = dig.DigestStr()
	}
	return p, nil
}

// errKeysFetchedRecently is what a throttled key fetch fails with.
var errKeysFetchedRecently = errors.New("signing keys were fetched moments ago; not fetching them again for an unknown key id yet")

// throttledTransport lets through a burst of requests, then one per
// interval, and fails the others without sending them.
type throttledTransport struct {
	next    http.RoundTripper
	limiter *rate.Limiter
}

func newThrottledTransport(next http.RoundTripper, every time.Duration, burst int) *throttledTransport {
	return &throttledTransport{next: next, limiter: rate.NewLimiter(rate.Every(every), burst)}
}

// RoundTrip implements [http.RoundTripper].
func (t *throttledTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !t.limiter.Allow() {
		return nil, errKeysFetchedRecently
	}
	return t.next.RoundTrip(r)
}
