package gitops

import (
	"strings"
)

// Image is the image a bump writes: a repository and a tag, a digest, or
// both.
type Image struct {
	// Repository is "registry/path", without tag or digest,
	// e.g. "registry.example.com/team/api".
	Repository string
	// Tag is the version, e.g. "1.4.2".
	Tag string
	// Digest pins the content, e.g. "sha256:3b5a...".
	Digest string
}

// ParseImage splits "repo[:tag][@digest]".
func ParseImage(ref string) (Image, error) {
	repo, tag, digest := splitReference(ref)
	img := Image{Repository: repo, Tag: tag, Digest: digest}
	return img, img.Validate()
}

// Reference is the image reference an edit writes: repo:tag@digest, repo:tag
// or repo@digest.
func (i Image) Reference() string { return i.Repository + i.suffix() }

// Version names the image in a commit message: the tag, or the digest's
// first 12 hex digits when there is no tag.
func (i Image) Version() string {
	if i.Tag != "" {
		return i.Tag
	}
	_, hex, _ := strings.Cut(i.Digest, ":")
	return i.Digest[:len(i.Digest)-len(hex)] + hex[:min(12, len(hex))]
}

// Validate reports an Image no edit can write.
func (i Image) Validate() error {
	switch {
	case i.Repository == "":
		return permanentf("%w: image has no repository", ErrInvalid)
	case strings.ContainsAny(i.Repository, "@ \t\n") ||
		strings.LastIndexByte(i.Repository, ':') > strings.LastIndexByte(i.Repository, '/'):
		return permanentf("%w: image repository %q must not carry a tag or digest", ErrInvalid, i.Repository)
	case i.Tag == "" && i.Digest == "":
		return permanentf("%w: image %s has neither tag nor digest", ErrInvalid, i.Repository)
	case strings.ContainsAny(i.Tag, ":@/ \t\n"):
		return permanentf("%w: image tag %q", ErrInvalid, i.Tag)
	}
	if i.Digest != "" {
		alg, hex, ok := strings.Cut(i.Digest, ":")
		if !ok || alg == "" || hex == "" || strings.ContainsAny(i.Digest, "@/ \t\n") {
			return permanentf("%w: image digest %q: want algorithm:hex", ErrInvalid, i.Digest)
		}
	}
	return nil
}

// withoutDigest is the image a tag-only edit writes. An image with no tag
// keeps its digest: dropping it would leave nothing to write.
func (i Image) withoutDigest() Image {
	if i.Tag != "" {
		i.Digest = ""
	}
	return i
}

// suffix is ":tag@digest", ":tag" or "@digest".
func (i Image) suffix() string {
	var b strings.Builder
	if i.Tag != "" {
		b.WriteString(":" + i.Tag)
	}
	if i.Digest != "" {
		b.WriteString("@" + i.Digest)
	}
	return b.String()
}

// splitReference splits "repo[:tag][@digest]"; the colon of a registry port
// ("host:5000/app") is not a tag separator.
func splitReference(ref string) (repo, tag, digest string) {
	repo = ref
	if i := strings.IndexByte(repo, '@'); i >= 0 {
		repo, digest = repo[:i], repo[i+1:]
	}
	if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
		repo, tag = repo[:i], repo[i+1:]
	}
	return repo, tag, digest
}
