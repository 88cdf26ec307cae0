package intake

import (
	"context"
	"errors"
	"strings"
)

// HeadAuthenticator is implemented by senders that can authenticate a
// delivery from its head (headers, query, path token) before its body is
// read: the intake then never reads, nor buffers, the body of a delivery it
// refuses. Senders whose credentials sign the body (HMAC) cannot.
type HeadAuthenticator interface {
	// AuthenticateHead authenticates d, whose Body is nil, as Authenticate
	// would. It returns an error wrapping ErrNeedBody when the head cannot
	// tell (a token inside the body, or one that may be the body's HMAC):
	// the intake then reads the body and calls Authenticate.
	AuthenticateHead(ctx context.Context, d *Delivery) error
}

// ErrNeedBody is wrapped by AuthenticateHead when only the body can tell.
var ErrNeedBody = errors.New("authenticating the delivery needs its body")

// Senders with a static header token, a path token or a bearer token: their
// Authenticate reads no body, so the head is the whole check.

func (s ACRSender) AuthenticateHead(ctx context.Context, d *Delivery) error {
	return s.Authenticate(ctx, d)
}

func (s CloudEventsSender) AuthenticateHead(ctx context.Context, d *Delivery) error {
	return s.Authenticate(ctx, d)
}

func (s DistributionSender) AuthenticateHead(ctx context.Context, d *Delivery) error {
	return s.Authenticate(ctx, d)
}

func (s DockerHubSender) AuthenticateHead(ctx context.Context, d *Delivery) error {
	return s.Authenticate(ctx, d)
}

func (s ECRSender) AuthenticateHead(ctx context.Context, d *Delivery) error {
	return s.Authenticate(ctx, d)
}

func (s GARSender) AuthenticateHead(ctx context.Context, d *Delivery) error {
	return s.Authenticate(ctx, d)
}

func (s GitLabSender) AuthenticateHead(ctx context.Context, d *Delivery) error {
	return s.Authenticate(ctx, d)
}

func (s HarborSender) AuthenticateHead(ctx context.Context, d *Delivery) error {
	return s.Authenticate(ctx, d)
}

func (s QuaySender) AuthenticateHead(ctx context.Context, d *Delivery) error {
	return s.Authenticate(ctx, d)
}

func (s TektonSender) AuthenticateHead(ctx context.Context, d *Delivery) error {
	return s.Authenticate(ctx, d)
}

// AuthenticateHead checks the path token; without one, the token may be in
// the payload's metadata.
func (s FlaggerSender) AuthenticateHead(ctx context.Context, d *Delivery) error {
	if d.PathToken == "" {
		return ErrNeedBody
	}
	return s.Authenticate(ctx, d)
}

// AuthenticateHead accepts the secret itself in the header; anything else
// may be the body's HMAC.
func (s ArtifactorySender) AuthenticateHead(_ context.Context, d *Delivery) error {
	if s.Secret == "" {
		return unauthenticated("no secret configured")
	}
	v := d.Header.Get(artifactoryAuthHeader)
	if v == "" {
		return unauthenticated("missing " + artifactoryAuthHeader + " header")
	}
	if secureEqual(v, s.Secret) {
		return nil
	}
	return ErrNeedBody
}

// Senders that sign the body (HMAC): the head can only tell that a
// signature is there and has the right form; one that is not refuses the
// delivery before a byte of its body is read.

// checkSignatureHead refuses a missing or malformed signature in header;
// a well-formed one needs the body.
func checkSignatureHead(d *Delivery, secret, header, prefix string) error {
	if secret == "" {
		return unauthenticated("no secret configured")
	}
	v := d.Header.Get(header)
	if v == "" {
		return unauthenticated("missing " + header + " header")
	}
	sig, ok := strings.CutPrefix(v, prefix)
	if !ok || !isHex(strings.TrimSpace(sig)) {
		return unauthenticated(header + " is not " + prefix + "<hex>")
	}
	return ErrNeedBody
}

// isHex tells whether s is a non-empty even-length hex string, without
// allocating.
func isHex(s string) bool {
	if s == "" || len(s)%2 != 0 {
		return false
	}
	for i := range len(s) {
		if !strings.ContainsRune("0123456789abcdefABCDEF", rune(s[i])) {
			return false
		}
	}
	return true
}

func (s GitHubSender) AuthenticateHead(_ context.Context, d *Delivery) error {
	return checkSignatureHead(d, s.Secret, "X-Hub-Signature-256", githubSignaturePrefix)
}

func (s BitbucketSender) AuthenticateHead(_ context.Context, d *Delivery) error {
	return checkSignatureHead(d, s.Secret, "X-Hub-Signature", bitbucketSignaturePrefix)
}

func (s BitbucketServerSender) AuthenticateHead(_ context.Context, d *Delivery) error {
	return checkSignatureHead(d, s.Secret, "X-Hub-Signature", bitbucketSignaturePrefix)
}

func (s NexusSender) AuthenticateHead(_ context.Context, d *Delivery) error {
	return checkSignatureHead(d, s.Secret, nexusSignatureHeader, "")
}

// AuthenticateHead needs one of Gitea's or Forgejo's signatures, each of
// its form.
func (s GiteaSender) AuthenticateHead(_ context.Context, d *Delivery) error {
	present := 0
	for _, sig := range giteaSignatures {
		if d.Header.Get(sig.header) == "" {
			continue
		}
		present++
		if err := checkSignatureHead(d, s.Secret, sig.header, sig.prefix); !errors.Is(err, ErrNeedBody) {
			return err
		}
	}
	if present == 0 {
		return unauthenticated("missing X-Gitea-Signature, X-Forgejo-Signature or X-Hub-Signature-256 header")
	}
	return ErrNeedBody
}
