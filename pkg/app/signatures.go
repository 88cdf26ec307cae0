package app

import (
	"context"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/flotilla-cd/flotilla/functions/verify"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/registry"
	"github.com/flotilla-cd/flotilla/pkg/signature"
)

// accessor reads what is attached to an image (pkg/registry.Remote).
type accessor interface {
	Access(ctx context.Context, image, digest string) (name.Digest, []remote.Option, error)
}

// signatures compiles the applications' signature policies (nil when no
// application verifies signatures) and says, per image, which
// applications tracking it verify them and whether the first wave each
// targets requires a signature. The policies are cfg's, compiled once (a
// change of an application's verify needs a restart:
// config.RestartFields); which applications track an image, and their
// first wave, are the config's in force (live).
func signatures(ctx context.Context, cfg *config.Config, live config.Provider, resolver registry.Resolver) (*signature.Verifier, func(string) ([]verify.SignedApp, bool), error) {
	policies := map[string]signature.Policy{}
	for _, a := range cfg.Applications {
		if a.Verify == nil {
			continue
		}
		p := signature.Policy{IgnoreTlog: a.Verify.IgnoreTlog}
		for _, at := range a.Verify.Attestations {
			p.Attestations = append(p.Attestations, at.PredicateType)
		}
		for _, s := range a.Verify.Signatures {
			switch {
			case s.Key != nil:
				p.Keys = append(p.Keys, signature.Key{Name: s.Name, PEM: []byte(s.KeyValue), TrustedRoot: []byte(s.TrustedRootValue)})
			case s.Keyless != nil:
				// One root per application: config validation reads each;
				// identities under different roots need applications of
				// their own.
				p.TrustedRoot = []byte(s.Keyless.TrustedRootValue)
				p.Identities = append(p.Identities, signature.Identity{
					Name: s.Name, Issuer: s.Keyless.Issuer, Subject: "^(?:" + s.Keyless.Subject + ")$",
				})
			}
		}
		policies[a.Name] = p
	}
	if len(policies) == 0 {
		return nil, nil, nil
	}
	acc, ok := resolver.(accessor)
	if !ok {
		remote, err := newRemote(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		acc = remote
	}
	v, err := signature.New(acc.Access, policies)
	if err != nil {
		return nil, nil, err
	}
	signed := func(image string) ([]verify.SignedApp, bool) { return verify.SignedApps(live.Current(), image) }
	return v, signed, nil
}
