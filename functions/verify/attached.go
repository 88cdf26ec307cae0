package verify

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/fault"
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
	for _, t := range newestFirst(tags, MaxTagLookups) {
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

// newestFirst orders the version tags (no attachment tags) newest first:
// semantic versions by precedence, then the others in reverse
// lexicographic order (dates and timestamps newest first); at most n.
func newestFirst(tags []string, n int) []string {
	type tv struct {
		tag string
		v   *semver.Version
	}
	var vs []tv
	for _, t := range tags {
		if attachmentTag.MatchString(t) {
			continue
		}
		v, err := semver.NewVersion(t)
		if err != nil {
			v = nil
		}
		vs = append(vs, tv{t, v})
	}
	slices.SortFunc(vs, func(a, b tv) int {
		switch {
		case a.v != nil && b.v != nil:
			if c := b.v.Compare(a.v); c != 0 {
				return c
			}
		case a.v != nil:
			return -1
		case b.v != nil:
			return 1
		}
		return strings.Compare(b.tag, a.tag)
	})
	out := make([]string, 0, min(n, len(vs)))
	for _, x := range vs[:min(n, len(vs))] {
		out = append(out, x.tag)
	}
	return out
}
