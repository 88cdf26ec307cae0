package gitops

import (
	"errors"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

// HelmValues sets the image in a Helm values file, following KubeCD's
// standardized values:
//
//	image:
//	  prefix: gcr.io/team-prod/   # optional, prepended to repository
//	  repository: api
//	  tag: "1.4.2"
//
// The tag path must exist. The repository path may be missing (the chart's
// own default applies); when present it is set to the image's repository,
// unless the two already name the same repository. When the file has a
// registry prefix (PrefixValue), the repository it holds is relative to it:
// the prefix is never rewritten, the repository gets the rest of the image's
// repository, and an image outside the prefix is an ErrNoMatch error.
type HelmValues struct {
	// Prefix is prepended to every path, for a sub-chart: "api." makes the
	// defaults api.image.repository and api.image.tag. Default none.
	Prefix string
	// RepoValue is the path of the repository, as a KubeCD trigger's
	// repoValue. Default "image.repository".
	RepoValue string
	// TagValue is the path of the tag, as a KubeCD trigger's tagValue.
	// Default "image.tag".
	TagValue string
	// PrefixValue is the path of the registry prefix. The default is
	// RepoValue with its last key "repository" replaced by "prefix"
	// (image.prefix, zookeeper.image.prefix), and none when RepoValue does
	// not end in "repository".
	PrefixValue string
	// DigestValue, when set, is the path the digest is written to, and
	// TagValue gets the bare tag. The default writes "tag@digest" to
	// TagValue, which a chart's "{{ .repository }}:{{ .tag }}" turns into
	// repo:tag@digest.
	DigestValue string
	// TagOnly writes the tag without the digest.
	TagOnly bool
}

// Apply implements Edit.
func (h HelmValues) Apply(src []byte, img Image) ([]byte, bool, error) {
	if err := img.Validate(); err != nil {
		return nil, false, err
	}
	if h.TagOnly {
		img = img.withoutDigest()
	}
	if img.Tag == "" && h.DigestValue == "" {
		return nil, false, permanentf("%w: image %s has no tag, and no DigestValue says where its digest goes", ErrInvalid, img.Reference())
	}
	return run(src, func(s *source) ([]patch, error) { return h.plan(s, img) })
}

func (h HelmValues) plan(s *source, img Image) ([]patch, error) {
	root := s.root()
	if root == nil {
		return nil, permanentf("yaml path %q: %w (empty file)", h.tagPath(), ErrPathNotFound)
	}
	scalarAt := func(path string) (*yaml.Node, error) {
		n, err := lookup(root, path)
		if err != nil {
			return nil, err
		}
		if n.Kind != yaml.ScalarNode {
			return nil, permanentf("yaml path %q: %w (%s)", path, ErrNotScalar, describe(n))
		}
		return n, nil
	}
	var ps []patch
	set := func(path, v string) error {
		n, err := scalarAt(path)
		if err != nil {
			return err
		}
		p, err := s.setScalar(n, v)
		if err != nil {
			return permanentf("yaml path %q: %w", path, err)
		}
		if p != nil {
			ps = append(ps, *p)
		}
		return nil
	}

	tag := img.Tag
	if h.DigestValue != "" {
		if err := set(h.Prefix+h.DigestValue, img.Digest); err != nil {
			return nil, err
		}
	} else if img.Digest != "" {
		tag += "@" + img.Digest
	}
	if tag != "" {
		if err := set(h.tagPath(), tag); err != nil {
			return nil, err
		}
	}

	repoPath := h.repoPath()
	repo, err := scalarAt(repoPath)
	if errors.Is(err, ErrPathNotFound) {
		return ps, nil // the chart's default repository applies
	}
	if err != nil {
		return nil, err
	}
	prefixPath, prefix := h.prefixPath(), ""
	if prefixPath != "" {
		if n, err := lookup(root, prefixPath); err == nil && n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
			prefix = n.Value
		}
	}
	if config.SameImage(prefix+repo.Value, img.Repository) {
		return ps, nil
	}
	if !strings.HasPrefix(img.Repository, prefix) || img.Repository == prefix {
		return nil, permanentf("yaml path %q: %w: repository %s is not under %s %q",
			repoPath, ErrNoMatch, img.Repository, prefixPath, prefix)
	}
	if err := set(repoPath, strings.TrimPrefix(img.Repository, prefix)); err != nil {
		return nil, err
	}
	return ps, nil
}

func (h HelmValues) tagPath() string  { return h.Prefix + or(h.TagValue, "image.tag") }
func (h HelmValues) repoPath() string { return h.Prefix + or(h.RepoValue, "image.repository") }

func (h HelmValues) prefixPath() string {
	if h.PrefixValue != "" {
		return h.Prefix + h.PrefixValue
	}
	repo := or(h.RepoValue, "image.repository")
	if repo == "repository" {
		return h.Prefix + "prefix"
	}
	if base, ok := strings.CutSuffix(repo, ".repository"); ok {
		return h.Prefix + base + ".prefix"
	}
	return ""
}

// or is v, or def when v is empty.
func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
