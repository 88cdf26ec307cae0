package verify

import (
	"context"
	"fmt"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// Function is the verify function.
type Function struct {
	resolver Resolver
	tracked  func(image string) bool
	newest   func(image string) bool
	sigs     Signatures
	signed   func(image string) (apps []SignedApp, others bool)
	git      GitRepos
	cfg      config.Provider
	apps     Applications
}

// Resolver resolves an image's tag to the digest it points at now
// (pkg/registry.Remote): "sha256:...", image being "host[:port]/repository".
type Resolver interface {
	Resolve(ctx context.Context, image, tag string) (digest string, err error)
}

// Signatures checks an image's signatures against an application's policy
// (pkg/signature): who signed it, or a permanent error saying why it is
// not trusted.
type Signatures interface {
	Verify(ctx context.Context, app, image, digest string) (string, error)
}

// SignedApp is an application with a signature policy: its name, and
// whether the first wave it targets requires a signature.
type SignedApp struct {
	Name              string
	FirstWaveRequires bool
}

// WithSignatures has verify check the signatures of the images the
// applications signed says have a policy (others: some application
// tracking the image has none). A push no application would roll out
// anywhere unsigned is rejected; otherwise the applications it failed are
// named in image.verified (plan stops their rollouts before the first wave
// that requires a signature).
func (f *Function) WithSignatures(s Signatures, signed func(image string) (apps []SignedApp, others bool)) *Function {
	f.sigs, f.signed = s, signed
	return f
}

// New returns verify; tracked says whether an application tracks an image
// ("registry/repository").
func New(resolver Resolver, tracked func(image string) bool) *Function {
	return &Function{resolver: resolver, tracked: tracked}
}

// CreatedReader tells when an image was built (pkg/registry.Remote).
type CreatedReader interface {
	Created(ctx context.Context, image, digest string) (time.Time, error)
}

// WithCreationTime has verify read when the images newest says are built
// (those an application on track Newest tracks).
func (f *Function) WithCreationTime(newest func(image string) bool) *Function {
	f.newest = newest
	return f
}

func (*Function) Name() string       { return "verify" }
func (*Function) Consumes() []string { return []string{events.TypeImagePushed, events.TypeGitPushed} }

// Handle verifies one push (and, WithApplications, records it).
func (f *Function) Handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	out, err := f.handle(ctx, e)
	if f.apps == nil {
		return out, err
	}
	return f.record(ctx, e, out, err)
}

func (f *Function) handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	if e.Type() == events.TypeGitPushed {
		return f.gitPushed(ctx, e)
	}
	p, err := events.Decode[events.ImagePushed](e)
	if err != nil {
		return nil, err
	}
	image := p.Image()
	reject := func(reason string) ([]cloudevents.Event, error) {
		out, err := events.Derive(e, events.TypeImageRejected, "", events.ImageRejected{Image: image, Tag: p.Tag, Reason: reason})
		return []cloudevents.Event{out}, err
	}
	if !f.tracked(image) {
		return reject(fmt.Sprintf("repository %s is not tracked by any application", image))
	}
	if m := attachmentTag.FindStringSubmatch(p.Tag); m != nil {
		return f.attached(ctx, e, image, m[1]+":"+m[2], m[3], reject)
	}
	digest, err := f.resolve(ctx, image, p.Tag, p.Digest != "")
	if fault.IsPermanent(err) {
		return reject(err.Error())
	}
	if err != nil {
		return nil, err
	}
	if p.Digest != "" && p.Digest != digest {
		return reject(fmt.Sprintf("tag %s now resolves to %s, not the pushed %s: the newer push will be acted on", p.Tag, digest, p.Digest))
	}
	return f.verified(ctx, e, events.ImageVerified{Image: image, Tag: p.Tag, Digest: digest, Source: p.Source, PushedBy: p.Pusher}, reject)
}

// TagLinkWait is how long a pushed tag the registry refuses (MANIFEST_UNKNOWN,
// say) is asked again when its notification named the pushed digest:
// Docker's registry (distribution) notifies a manifest's push before it
// links the tag to it, so a notification can come before its tag resolves.
const TagLinkWait = 3 * time.Second

// resolve is the resolver's digest for image:tag, asked again with growing
// pauses for up to TagLinkWait while it is refused for good and pushed
// says the push named a digest.
func (f *Function) resolve(ctx context.Context, image, tag string, pushed bool) (string, error) {
	deadline := time.Now().Add(TagLinkWait)
	pause := 100 * time.Millisecond
	for {
		digest, err := f.resolver.Resolve(ctx, image, tag)
		if err == nil || !pushed || !fault.IsPermanent(err) || time.Now().Add(pause).After(deadline) {
			return digest, err
		}
		select {
		case <-ctx.Done():
			return "", err
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// verified checks v's signatures and reads its build time where needed:
// image.verified, or image.rejected saying why.
func (f *Function) verified(ctx context.Context, e cloudevents.Event, v events.ImageVerified, reject func(string) ([]cloudevents.Event, error)) ([]cloudevents.Event, error) {
	if why, err := f.signatures(ctx, &v); err != nil {
		return nil, err
	} else if why != "" {
		return reject(why)
	}
	if c, ok := f.resolver.(CreatedReader); ok && f.newest != nil && f.newest(v.Image) {
		// Track Newest orders versions by when they were built, not by
		// when their pushes arrived.
		var err error
		if v.Created, err = c.Created(ctx, v.Image, v.Digest); err != nil {
			return nil, err
		}
	}
	out, err := events.Derive(e, events.TypeImageVerified, "", v)
	return []cloudevents.Event{out}, err
}

// signatures checks v's signatures for every application with a policy
// that tracks it, recording who signed it or why not. It returns a reason
// to reject the push: no application would roll it out anywhere.
func (f *Function) signatures(ctx context.Context, v *events.ImageVerified) (string, error) {
	if f.sigs == nil {
		return "", nil
	}
	apps, others := f.signed(v.Image)
	refused := 0
	var reasons []string
	for _, a := range apps {
		by, err := f.sigs.Verify(ctx, a.Name, v.Image, v.Digest)
		if err != nil && !fault.IsPermanent(err) {
			return "", err
		}
		if err == nil {
			if v.SignedBy == nil {
				v.SignedBy = map[string]string{}
			}
			v.SignedBy[a.Name] = by
			continue
		}
		if v.Unsigned == nil {
			v.Unsigned = map[string]string{}
		}
		v.Unsigned[a.Name] = err.Error()
		if a.FirstWaveRequires {
			refused++
			reasons = append(reasons, fmt.Sprintf("%s: %v", a.Name, err))
		}
	}
	if len(apps) > 0 && !others && refused == len(apps) {
		return "signature not trusted (" + strings.Join(reasons, "; ") + ")", nil
	}
	return "", nil
}
