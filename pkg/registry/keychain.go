package registry

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/google/go-containerregistry/pkg/authn"
)

// Credentials says where a Remote's credentials come from, in the order
// they are tried for an image: the Docker config files (the first file
// with an entry matching the image wins), then each provider's keychain,
// then the Docker config of flotilla's own user ($DOCKER_CONFIG/config.json
// and its credential helpers). A keychain with nothing for an image lets the
// next one try; none having anything is an anonymous request.
type Credentials struct {
	// DockerConfigFiles are Docker config files: the .dockerconfigjson
	// key of a kubernetes.io/dockerconfigjson Secret (as `kubectl create
	// secret docker-registry` makes it), mounted, or a config.json with
	// "auths". Each is read again when it changes (a rotated Secret needs
	// no restart).
	DockerConfigFiles []string
	// Providers name cloud keychains (see Providers): their workload
	// identity answers for their own registries only.
	Providers []string
}

// providers are the cloud keychains by name, each in a file of its own.
var providers = map[string]func() authn.Keychain{
	"aws":   awsKeychain,
	"azure": azureKeychain,
	"gcp":   gcpKeychain,
}

// Providers lists the names Credentials.Providers accepts, sorted.
func Providers() []string {
	names := make([]string, 0, len(providers))
	for n := range providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NewKeychain returns the keychain of c. Every Docker config file must be
// readable and hold "auths" now; a provider must be one of Providers().
func NewKeychain(ctx context.Context, c Credentials) (authn.Keychain, error) {
	chain := make([]authn.Keychain, 0, len(c.DockerConfigFiles)+len(c.Providers)+1)
	for _, f := range c.DockerConfigFiles {
		kc, err := newFileKeychain(ctx, f)
		if err != nil {
			return nil, err
		}
		chain = append(chain, kc)
	}
	for _, p := range c.Providers {
		make, ok := providers[p]
		if !ok {
			return nil, fmt.Errorf("registry credentials: unknown provider %q: want one of %v", p, Providers())
		}
		chain = append(chain, make())
	}
	chain = append(chain, authn.DefaultKeychain)
	return authn.NewMultiKeychain(slices.Clip(chain)...), nil
}
