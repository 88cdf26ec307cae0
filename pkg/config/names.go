package config

import (
	"net/url"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// How an application's sources are named: an image repository or a git
// repository may be written several ways and still be the same.

// NormalizeImage returns the canonical form of an image repository
// ("docker.io/x" becomes "index.docker.io/library/x"), or repo itself when
// it does not parse.
func NormalizeImage(repo string) string {
	r, err := name.NewRepository(repo)
	if err != nil {
		return repo
	}
	return r.Name()
}

// SameImage tells whether image repositories a and b are the same.
func SameImage(a, b string) bool { return NormalizeImage(a) == NormalizeImage(b) }

// SameGitRepository tells whether git URLs a and b name the same
// repository, whatever their scheme, credentials, case of host, trailing
// slash or ".git" ("git@host:path" is "ssh://git@host/path").
func SameGitRepository(a, b string) bool { return normalGitURL(a) == normalGitURL(b) }

func normalGitURL(raw string) string {
	s := strings.TrimSpace(raw)
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	} else if at := strings.Index(s, "@"); at >= 0 && strings.Contains(s[at:], ":") {
		s = strings.Replace(s[at+1:], ":", "/", 1) // git@host:path
	}
	if at := strings.LastIndex(strings.SplitN(s, "/", 2)[0], "@"); at >= 0 {
		s = s[at+1:] // user[:password]@
	}
	host, path, _ := strings.Cut(s, "/")
	path = strings.TrimSuffix(strings.TrimSuffix(path, "/"), ".git")
	return strings.ToLower(host) + "/" + path
}

// DisplayURL is a git URL without its credentials, for messages and for
// the version a rollout of the repository shows.
func DisplayURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	u.User = nil
	return u.String()
}
