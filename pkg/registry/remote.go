package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// Remote resolves tags against the registry over the network with
// go-containerregistry. Build it with NewRemote; it is safe for concurrent use.
type Remote struct {
	insecure  map[string]bool
	keychain  authn.Keychain
	transport http.RoundTripper
	timeout   time.Duration

	// puller keeps, per repository, the transport a registry's ping and
	// token exchange set up, so that a poll or a push's verification asks
	// the registry once instead of pinging it first every time. It is made
	// again after ReuseFor (credentials are read again) and at once after a
	// registry refused its credentials.
	mu       sync.Mutex
	puller   *remote.Puller
	pullerAt time.Time
}

// ReuseFor is how long a Remote reuses the transports it set up with a
// registry (and the credentials they were set up with), unless the
// registry refuses them first. A registry's short-lived tokens are
// refreshed within it as they expire.
const ReuseFor = time.Hour

var _ Resolver = (*Remote)(nil)

// NewRemote returns a Remote configured by opts; see each Option for its default.
func NewRemote(opts ...Option) *Remote {
	r := &Remote{
		insecure:  map[string]bool{},
		keychain:  authn.DefaultKeychain,
		transport: remote.DefaultTransport,
		timeout:   DefaultTimeout,
	}
	for _, opt := range opts {
		opt(r)
	}
	return r
}

// noRetry makes go-containerregistry try each request once: flotilla retries
// retryable errors itself, per event, and in-library retries would only
// spend the per-call timeout sleeping.
var noRetry = remote.Backoff{Steps: 1}

// userAgent names flotilla in the registry's logs (go-containerregistry
// appends its own).
const userAgent = "flotilla"

// base are the options every request and the puller share: the keychain,
// the transport, one try and flotilla's user agent.
func (r *Remote) base() []remote.Option {
	return []remote.Option{
		remote.WithAuthFromKeychain(r.keychain),
		remote.WithTransport(r.transport),
		remote.WithRetryBackoff(noRetry),
		remote.WithUserAgent(userAgent),
	}
}

// options are every request's: ctx, the base options and the puller that
// reuses what earlier requests set up.
func (r *Remote) options(ctx context.Context) []remote.Option {
	opts := append(r.base(), remote.WithContext(ctx))
	if p := r.reuse(); p != nil {
		opts = append(opts, remote.Reuse(p))
	}
	return opts
}

// reuse returns the puller, made again once it is ReuseFor old.
func (r *Remote) reuse() *remote.Puller {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.puller == nil || time.Since(r.pullerAt) > ReuseFor {
		p, err := remote.NewPuller(r.base()...)
		if err != nil {
			return nil // each request sets itself up
		}
		r.puller, r.pullerAt = p, time.Now()
	}
	return r.puller
}

// refused drops the puller when a registry refused its credentials: the
// next request reads them again (rotated, or fixed in the keychain).
func (r *Remote) refused(err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) && (terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden) {
		r.mu.Lock()
		r.puller = nil
		r.mu.Unlock()
	}
	return err
}

// Resolve asks the registry for the digest image:tag points at now, with a
// HEAD request, falling back to GET when HEAD fails or carries no digest
// (HEAD responses have no body, so GET also says why it failed).
func (r *Remote) Resolve(ctx context.Context, image, tag string) (string, error) {
	ref, err := r.reference(image, tag)
	if err != nil {
		return "", fault.Permanent(fmt.Errorf("resolving %s:%s: %w", image, tag, err))
	}
	if r.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	opts := r.options(ctx)

	desc, err := remote.Head(ref, opts...)
	if err == nil && desc.Digest != (v1.Hash{}) {
		return desc.Digest.String(), nil
	}
	if ctx.Err() != nil { // no time left for a second request
		return "", fmt.Errorf("resolving %s:%s: %w", image, tag, classify(err))
	}
	got, err := remote.Get(ref, opts...)
	if err != nil {
		return "", fmt.Errorf("resolving %s:%s: %w", image, tag, classify(r.refused(err)))
	}
	return got.Digest.String(), nil
}

// reference parses image and tag, marking the registry insecure if listed.
func (r *Remote) reference(image, tag string) (name.Tag, error) {
	if tag == "" {
		return name.Tag{}, errors.New("empty tag")
	}
	ref, err := name.NewTag(image + ":" + tag)
	if err != nil {
		return name.Tag{}, err
	}
	if r.insecure[ref.RegistryStr()] {
		return name.NewTag(image+":"+tag, name.Insecure)
	}
	return ref, nil
}

// classify marks err permanent when retrying cannot help: the registry
// answered with a 4xx other than 408 (timeout) and 429 (rate limited).
// Network errors, context expiry and 5xx stay retryable.
func classify(err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode >= 400 && terr.StatusCode < 500 &&
		terr.StatusCode != http.StatusRequestTimeout && terr.StatusCode != http.StatusTooManyRequests {
		return fault.Permanent(err)
	}
	return err
}

// Created returns when the image image@digest was built (its config's
// created time; for an index, its first image's), zero if the config does
// not say.
func (r *Remote) Created(ctx context.Context, image, digest string) (time.Time, error) {
	ref, err := name.NewDigest(image + "@" + digest)
	if err != nil {
		return time.Time{}, fault.Permanent(fmt.Errorf("reading %s@%s: %w", image, digest, err))
	}
	if r.insecure[ref.RegistryStr()] {
		if ref, err = name.NewDigest(image+"@"+digest, name.Insecure); err != nil {
			return time.Time{}, fault.Permanent(err)
		}
	}
	if r.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	opts := r.options(ctx)
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return time.Time{}, fmt.Errorf("reading %s@%s: %w", image, digest, classify(r.refused(err)))
	}
	var img v1.Image
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return time.Time{}, fmt.Errorf("reading index %s@%s: %w", image, digest, classify(err))
		}
		m, err := idx.IndexManifest()
		if err != nil || len(m.Manifests) == 0 {
			return time.Time{}, classify(err)
		}
		if img, err = idx.Image(m.Manifests[0].Digest); err != nil {
			return time.Time{}, fmt.Errorf("reading %s@%s: %w", image, m.Manifests[0].Digest, classify(err))
		}
	} else if img, err = desc.Image(); err != nil {
		return time.Time{}, fmt.Errorf("reading %s@%s: %w", image, digest, classify(err))
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the config of %s@%s: %w", image, digest, classify(err))
	}
	return cfg.Created.UTC(), nil
}

// Access returns the pinned reference image@digest (plain HTTP for the
// insecure hosts) and the options to read it and what is attached to it
// (signatures) with go-containerregistry under ctx: the same credentials
// and transport as Resolve.
func (r *Remote) Access(ctx context.Context, image, digest string) (name.Digest, []remote.Option, error) {
	var opts []name.Option
	ref, err := name.NewDigest(image + "@" + digest)
	if err == nil && r.insecure[ref.RegistryStr()] {
		opts = append(opts, name.Insecure)
		ref, err = name.NewDigest(image+"@"+digest, opts...)
	}
	if err != nil {
		return name.Digest{}, nil, fault.Permanent(fmt.Errorf("%s@%s: %w", image, digest, err))
	}
	return ref, r.options(ctx), nil
}

// Tags lists image's tags (every page the registry returns).
func (r *Remote) Tags(ctx context.Context, image string) ([]string, error) {
	var opts []name.Option
	if ref, err := name.NewRepository(image); err == nil && r.insecure[ref.RegistryStr()] {
		opts = append(opts, name.Insecure)
	}
	repo, err := name.NewRepository(image, opts...)
	if err != nil {
		return nil, fault.Permanent(fmt.Errorf("listing the tags of %s: %w", image, err))
	}
	if r.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	tags, err := remote.List(repo, r.options(ctx)...)
	if err != nil {
		return nil, fmt.Errorf("listing the tags of %s: %w", image, classify(r.refused(err)))
	}
	return tags, nil
}
