package registry

import "context"

// Resolver resolves an image tag to the digest it currently points at.
type Resolver interface {
	// Resolve returns the digest ("sha256:...") of the manifest or index
	// that image:tag refers to. image is "host[:port]/repository".
	Resolve(ctx context.Context, image, tag string) (digest string, err error)
}
