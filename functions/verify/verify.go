package verify

import (
	"context"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/registry"
)

// Function is the verify function.
type Function struct {
	resolver registry.Resolver
	tracked  func(image string) bool
	newest   func(image string) bool
}

// New returns verify; tracked says whether an application tracks an image
// ("registry/repository").
func New(resolver registry.Resolver, tracked func(image string) bool) *Function {
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
func (*Function) Consumes() []string { return []string{events.TypeImagePushed} }

// Handle verifies one push.
func (f *Function) Handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
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
	digest, err := f.resolver.Resolve(ctx, image, p.Tag)
	if events.IsPermanent(err) {
		return reject(err.Error())
	}
	if err != nil {
		return nil, err
	}
	if p.Digest != "" && p.Digest != digest {
		return reject(fmt.Sprintf("tag %s now resolves to %s, not the pushed %s: the newer push will be acted on", p.Tag, digest, p.Digest))
	}
	verified := events.ImageVerified{Image: image, Tag: p.Tag, Digest: digest}
	if c, ok := f.resolver.(CreatedReader); ok && f.newest != nil && f.newest(image) {
		// Track Newest orders versions by when they were built, not by
		// when their pushes arrived.
		if verified.Created, err = c.Created(ctx, image, digest); err != nil {
			return nil, err
		}
	}
	out, err := events.Derive(e, events.TypeImageVerified, "", verified)
	return []cloudevents.Event{out}, err
}
