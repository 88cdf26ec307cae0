package verify

import (
	"context"
	"fmt"
	"regexp"
	"slices"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/versionpolicy"
)

// attachmentTag matches the tags cosign gives what it attaches to a digest
// (sha256-<hex>.sig, .att, .sbom) and go-containerregistry's referrers
// fallback tag (sha256-<hex>, an index of the digest's referrers): none of
// them is a version.
var attachmentTag = regexp.MustCompile(`^(sha256)-([0-9a-f]{64})(?:\.(sig|att|sbom))?$`)

// MaxTagLookups bounds the tags resolved to find the version a signature
// pushed after its image signs: the newest ones, the signed version
// nearly always among the first.
const MaxTagLookups = 20

// TagLister lists an image's tags (pkg/registry.Remote).
type TagLister interface {
	Tags(ctx context.Context, image string) ([]string, error)
}

// attached handles the push of something cosign attached to digest (kind
// "sig", "att", "sbom", or "" for a referrers index). A signature (or a
// referrers index, which may hold a bundle) pushed after its image is what
// lets a version that was rejected as unsigned roll out: verify finds the
// tag that points at the digest and verifies that version anew. Anything
// else is not a version and is rejected saying so.
func (f *Function) attached(ctx context.Context, e cloudevents.Event, image, digest, kind string, reject func(string) ([]cloudevents.Event, error)) ([]cloudevents.Event, error) {
	what := fmt.Sprintf("cosign's %s of %s", attachmentKinds[kind], digest)
	lister, ok := f.resolver.(TagLister)
	if f.sigs == nil || (kind != "sig" && kind != "") || !ok {
		return reject(what + ", not a version")
	}
	if apps, _ := f.signed(image); len(apps) == 0 {
		return reject(what + ", not a version (no application tracking " + image + " verifies signatures)")
	}
	tag, err := f.tagOf(ctx, lister, image, digest)
	if fault.IsPermanent(err) {
		return reject(fmt.Sprintf("%s: %v", what, err))
	}
	if err != nil {
		return nil, err
	}
	if tag == "" {
		return reject(fmt.Sprintf("%s: none of the newest %d tags of %s points at it", what, MaxTagLookups, image))
	}
	return f.verified(ctx, e, events.ImageVerified{Image: image, Tag: tag, Digest: digest}, reject)
}

var attachmentKinds = map[string]string{"sig": "signature", "att": "attestation", "sbom": "SBOM", "": "referrers index"}

// tagOf finds the tag of image that points at digest among its newest
// MaxTagLookups version tags, "" if none does.
func (f *Function) tagOf(ctx context.Context, lister TagLister, image, digest string) (string, error) {
	tags, err := lister.Tags(ctx, image)
	if err != nil {
		return "", err
	}
	for _, t := range versionpolicy.NewestFirst(slices.DeleteFunc(tags, attachmentTag.MatchString), MaxTagLookups) {
		d, err := f.resolver.Resolve(ctx, image, t)
		if fault.IsPermanent(err) {
			continue // deleted since the listing
		}
		if err != nil {
			return "", err
		}
		if d == digest {
			return t, nil
		}
	}
	return "", nil
}
