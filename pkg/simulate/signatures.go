package simulate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/flotilla-cd/flotilla/pkg/testkit/rekortest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/sigtest"
)

// Signatures: an application that verifies them (verify.signatures) is
// simulated with stand-ins for its signers. simulate has the config's
// public keys, not the private ones its release pipeline signs with, so
// each key authority gets a key pair of the simulation's own in its place
// (and, unless verify.ignoreTlog, a Rekor log of its own, in process, in
// place of its trusted root's), and the scenario's versions are signed
// with them, or with a key no policy names, or not at all, in an OCI
// registry in process. The verify function then runs as configured:
// pkg/signature reads the signatures there and decides as for a real push,
// its policy's names, log and attestations included. Keyless authorities
// are refused: a stand-in cannot be issued a certificate for an identity
// pattern of the config's.

// Signing modes a scenario gives a version (scenario.signing).
const (
	signedByDefault = ""          // by the application's first key authority
	signedByOther   = "\x00other" // by a key no policy names
	unsigned        = "\x00none"  // not signed
)

// signers stand in for the signers of the config's signature policies.
type signers struct {
	keys  map[string]*sigtest.Keypair // by "application/authority"
	names map[string][]string         // an application's key authorities, in order
	// logged: the application's policy wants a key's signature in a
	// Rekor log (no verify.ignoreTlog).
	logged       map[string]bool
	attestations map[string][]string // an application's required predicate types
	other        *sigtest.Keypair
	log          *rekortest.Log // nil when no policy wants a log entry
	reg          *httptest.Server
	host         string // reg's host:port
}

// standInSigners replaces the key authorities of doc's applications
// (verify.signatures[].key, their trustedRoot) with the simulation's own,
// written under tmp. It returns nil when no application verifies
// signatures.
func standInSigners(doc map[string]any, tmp string) (*signers, error) {
	var sg *signers
	for i, a := range list(doc, "applications") {
		v, _ := a["verify"].(map[string]any)
		if v == nil {
			continue
		}
		app, _ := a["name"].(string)
		ignoreTlog, _ := v["ignoreTlog"].(bool)
		for j, s := range list(v, "signatures") {
			authority, _ := s["name"].(string)
			if _, ok := s["keyless"]; ok {
				sg.close()
				return nil, fmt.Errorf("applications[%d].verify.signatures[%d].keyless (%s of %s): simulate signs with stand-in keys and cannot be issued a certificate for the identity it trusts; simulate a copy of the config whose authority is a key",
					i, j, authority, app)
			}
			if _, ok := s["key"]; !ok {
				continue
			}
			if sg == nil {
				sg = &signers{keys: map[string]*sigtest.Keypair{}, names: map[string][]string{}, logged: map[string]bool{},
					attestations: map[string][]string{}, other: sigtest.NewKeypair()}
			}
			k := sigtest.NewKeypair()
			sg.keys[app+"/"+authority] = k
			sg.names[app] = append(sg.names[app], authority)
			pub := filepath.Join(tmp, fmt.Sprintf("simulated-key-%d-%d.pub", i, j))
			if err := os.WriteFile(pub, k.PublicKeyPEM(), 0o600); err != nil {
				sg.close()
				return nil, err
			}
			s["key"] = map[string]any{"file": pub}
			delete(s, "trustedRoot")
			if ignoreTlog {
				continue
			}
			sg.logged[app] = true
			root, err := sg.logRoot(tmp)
			if err != nil {
				sg.close()
				return nil, err
			}
			s["trustedRoot"] = map[string]any{"file": root}
		}
		if sg == nil {
			continue
		}
		for _, at := range list(v, "attestations") {
			if t, _ := at["predicateType"].(string); t != "" {
				sg.attestations[app] = append(sg.attestations[app], t)
			}
		}
	}
	return sg, nil
}

// logRoot starts the stand-in Rekor log once and returns the file of its
// trusted root.
func (sg *signers) logRoot(tmp string) (string, error) {
	path := filepath.Join(tmp, "simulated-rekor-root.json")
	if sg.log != nil {
		return path, nil
	}
	l, err := rekortest.Start()
	if err != nil {
		return "", fmt.Errorf("starting the stand-in Rekor log: %w", err)
	}
	sg.log = l
	root, err := l.TrustedRootJSON()
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, root, 0o600)
}

// close stops the stand-in log and registry.
func (sg *signers) close() {
	if sg == nil {
		return
	}
	if sg.log != nil {
		_ = sg.log.Close()
	}
	if sg.reg != nil {
		sg.reg.Close()
	}
}

// serve starts the registry in process the signatures are pushed to and
// read from (Fleet.Access), before the engine starts.
func (sg *signers) serve() {
	sg.reg = httptest.NewServer(registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))))
	sg.host = strings.TrimPrefix(sg.reg.URL, "http://")
}

// emptyConfig is the OCI empty config ({}), the simulated images' config.
const emptyConfig = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"

// manifest is the image the simulated registry gives image's tag: an
// empty OCI image whose annotation names it. Digest is its digest, so a
// signature can be attached to it as cosign attaches one (its subject).
func manifest(image, tag string) []byte {
	return []byte(fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",`+
		`"config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":%q,"size":2},"layers":[],`+
		`"annotations":{"dev.flotilla.simulate.image":%q}}`, emptyConfig, image+":"+tag))
}

// Digest is the digest the simulated registry gives image's tag (the
// digest of manifest).
func Digest(image, tag string) string {
	h := sha256.Sum256(manifest(image, tag))
	return "sha256:" + hex.EncodeToString(h[:])
}

type rawManifest []byte

func (r rawManifest) RawManifest() ([]byte, error)        { return r, nil }
func (r rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// sign pushes image's tag to the registry in process and signs it as the
// scenario said (mode: signedByDefault, signedByOther, unsigned, or an
// authority's name) for application app, with the attestations its policy
// requires when a stand-in key of its policy signs.
func (sg *signers) sign(ctx context.Context, app, image, tag, mode string) error {
	d, opts, err := sg.access(ctx, image, Digest(image, tag))
	if err != nil {
		return err
	}
	cfg := static.NewLayer([]byte("{}"), types.OCIEmptyJSON)
	if err := remote.WriteLayer(d.Context(), cfg, opts...); err != nil {
		return fmt.Errorf("pushing %s to the simulated registry: %w", image, err)
	}
	if err := remote.Put(d.Context().Tag(tag), rawManifest(manifest(image, tag)), opts...); err != nil {
		return fmt.Errorf("pushing %s:%s to the simulated registry: %w", image, tag, err)
	}
	if mode == unsigned {
		return nil
	}
	k, trusted := sg.other, false
	switch mode {
	case signedByOther:
	case signedByDefault:
		if len(sg.names[app]) == 0 {
			return nil // its policy has no key authority
		}
		k, trusted = sg.keys[app+"/"+sg.names[app][0]], true
	default:
		if k = sg.keys[app+"/"+mode]; k == nil {
			return fmt.Errorf("%q is no key authority of application %s's verify.signatures (%s)", mode, app, strings.Join(sg.names[app], ", "))
		}
		trusted = true
	}
	var bopts sign.BundleOptions
	if sg.logged[app] {
		bopts.TransparencyLogs = []sign.Transparency{sign.NewRekor(&sign.RekorOptions{BaseURL: sg.log.URL, Retries: 0})}
	}
	if _, err := sigtest.SignBundle(d, k, bopts, opts...); err != nil {
		return fmt.Errorf("signing %s:%s: %w", image, tag, err)
	}
	if !trusted {
		return nil
	}
	for _, pt := range sg.attestations[app] {
		if err := attest(d, k, bopts, pt, opts); err != nil {
			return fmt.Errorf("attesting %s:%s (%s): %w", image, tag, pt, err)
		}
	}
	return nil
}

// attest attaches an in-toto attestation of predicate type pt of d,
// signed by k, as `cosign attest --type` (v3's bundle format) does.
func attest(d name.Digest, k sign.Keypair, bopts sign.BundleOptions, pt string, opts []remote.Option) error {
	algo, hexDigest, _ := strings.Cut(d.DigestStr(), ":")
	st, err := json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"name": d.Context().Name(), "digest": map[string]string{algo: hexDigest}}},
		"predicateType": pt,
		"predicate":     map[string]any{},
	})
	if err != nil {
		return err
	}
	pb, err := sign.Bundle(&sign.DSSEData{Data: st, PayloadType: "application/vnd.in-toto+json"}, k, bopts)
	if err != nil {
		return err
	}
	bj, err := protojson.Marshal(pb)
	if err != nil {
		return err
	}
	return sigtest.AttachBundle(d, bj, pt, opts...)
}

// access is image@digest in the registry in process.
func (sg *signers) access(ctx context.Context, image, digest string) (name.Digest, []remote.Option, error) {
	repo, err := name.NewRepository(image)
	if err != nil {
		return name.Digest{}, nil, fmt.Errorf("image %q: %w", image, err)
	}
	if sg.host == "" {
		return name.Digest{}, nil, fmt.Errorf("the simulated registry is not serving")
	}
	d, err := name.NewDigest(sg.host + "/" + repo.RepositoryStr() + "@" + digest)
	return d, []remote.Option{remote.WithContext(ctx)}, err
}

// Access is the simulated registry's signatures (pkg/app's accessor, which
// the verify function's signature.Verifier reads): image@digest in the
// registry in process the scenario's versions are signed in.
func (f *Fleet) Access(ctx context.Context, image, digest string) (name.Digest, []remote.Option, error) {
	if f.signers == nil {
		return name.Digest{}, nil, fmt.Errorf("no application of the simulated config verifies signatures")
	}
	return f.signers.access(ctx, image, digest)
}
