package registry

import "github.com/google/go-containerregistry/pkg/name"

// Normalize returns the canonical form of a repository name ("docker.io/x"
// becomes "index.docker.io/library/x"), or the input itself when it does not
// parse.
func Normalize(repo string) string {
	r, err := name.NewRepository(repo)
	if err != nil {
		return repo
	}
	return r.Name()
}

// SameRepository tells whether a and b name the same repository.
func SameRepository(a, b string) bool { return Normalize(a) == Normalize(b) }
