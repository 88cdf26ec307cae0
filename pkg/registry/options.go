package registry

import (
	"net/http"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// DefaultTimeout bounds each Resolve call unless WithTimeout says otherwise.
const DefaultTimeout = 10 * time.Second

// Option configures a Remote.
type Option func(*Remote)

// WithInsecureHosts lets Remote speak plain HTTP to these registries
// ("host[:port]", e.g. "registry.internal:5000"); it still tries HTTPS first.
//
// The default is none listed, but go-containerregistry already speaks plain
// HTTP, without being told, to loopback and local registries: "localhost"
// and "*.localhost", "127.0.0.1" and "[::1]" with any port, and the private
// RFC 1918 ranges 10/8, 172.16/12 and 192.168/16. flotilla keeps that
// behaviour (it is what makes 127.0.0.1:5000 work in tests and a
// cluster-local registry work in a kind cluster) rather than forbid it.
func WithInsecureHosts(hosts ...string) Option {
	return func(r *Remote) {
		for _, h := range hosts {
			r.insecure[normalizeHost(h)] = true
		}
	}
}

// WithKeychain sets where credentials come from. The default is
// authn.DefaultKeychain (the Docker config file and its credential helpers).
func WithKeychain(kc authn.Keychain) Option {
	return func(r *Remote) {
		if kc != nil {
			r.keychain = kc
		}
	}
}

// WithTransport sets the HTTP transport. The default is
// remote.DefaultTransport; a nil transport keeps the default.
func WithTransport(t http.RoundTripper) Option {
	return func(r *Remote) {
		if t != nil {
			r.transport = t
		}
	}
}

// WithTimeout bounds each Resolve call, on top of any deadline the caller's
// context carries. The default is DefaultTimeout (10s); zero or a negative
// duration leaves only the context's deadline.
func WithTimeout(d time.Duration) Option {
	return func(r *Remote) { r.timeout = d }
}

// normalizeHost spells host the way name.Registry does ("docker.io" is
// "index.docker.io"), so that option and reference compare equal.
func normalizeHost(host string) string {
	host = strings.ToLower(strings.TrimSpace(host))
	if reg, err := name.NewRegistry(host); err == nil {
		return reg.RegistryStr()
	}
	return host
}
