package cosigntest

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/flotilla-cd/flotilla/pkg/testkit/fulciotest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
	"github.com/flotilla-cd/flotilla/pkg/testkit/rekortest"
)

// Version is the cosign build.sh builds; keep them in step.
const Version = "3.1.3"

// Binary is where build.sh puts cosign.
func Binary() string { return filepath.Join(localfleet.BinDir(), "cosign-"+Version) }

// password protects the key pairs cosign writes (COSIGN_PASSWORD).
const password = "flotilla-test"

// Signer runs cosign in a directory of its own: key pairs, the signing
// config and the trusted root it signs under.
type Signer struct {
	dir    string
	log    *rekortest.Log
	fulcio *fulciotest.Server
}

// Format is how a signature is attached to an image.
type Format int

const (
	// Bundle is a Sigstore bundle attached as an OCI referrer (cosign
	// v3's default), in a registry without the referrers API under
	// go-containerregistry's fallback tag.
	Bundle Format = iota
	// Attached is the .sig tag of a simple-signing payload
	// (--new-bundle-format=false), with the Rekor bundle annotation
	// when logged.
	Attached
)

// New returns a signer working in dir that logs its signatures in log
// (nil: it cannot log; sign with NoTlog). It fails when cosign was not built
// (make fleet-build).
func New(dir string, log *rekortest.Log) (*Signer, error) {
	if _, err := os.Stat(Binary()); err != nil {
		return nil, fmt.Errorf("cosign %s not built (make fleet-build): %w", Version, err)
	}
	s := &Signer{dir: dir, log: log}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	nolog, err := rekortest.NoLogSigningConfigJSON()
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{"signing-config-nolog.json": nolog}
	if log != nil {
		sc, err := log.SigningConfigJSON()
		if err != nil {
			return nil, err
		}
		tr, err := log.TrustedRootJSON()
		if err != nil {
			return nil, err
		}
		pub, err := log.PublicKeyPEM()
		if err != nil {
			return nil, err
		}
		files["signing-config.json"], files["trusted_root.json"], files["rekor.pub"] = sc, tr, pub
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// UseFulcio lets the signer sign keylessly with certificates of fulcio
// (SignKeyless): its trusted_root.json names fulcio's certificate
// authority besides the log. The signer must have a log.
func (s *Signer) UseFulcio(fulcio *fulciotest.Server) error {
	if s.log == nil {
		return errors.New("keyless signing needs a log: cosign takes a short-lived certificate's time from its entry")
	}
	tr, err := s.log.TrustedRootJSON(fulcio.CA())
	if err != nil {
		return err
	}
	if err := os.WriteFile(s.TrustedRootFile(), tr, 0o600); err != nil {
		return err
	}
	s.fulcio = fulcio
	return nil
}

// TrustedRootFile is the trusted_root.json naming the signer's log (and
// its Fulcio's certificate authority, after UseFulcio).
func (s *Signer) TrustedRootFile() string { return filepath.Join(s.dir, "trusted_root.json") }

// run runs cosign in the signer's directory and returns its output.
func (s *Signer) run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, Binary(), args...)
	cmd.Dir = s.dir
	// No TUF, no cache outside dir, no prompt.
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+password, "HOME="+s.dir, "TUF_ROOT="+filepath.Join(s.dir, "tuf"), "COSIGN_YES=true")
	if s.log != nil {
		cmd.Env = append(cmd.Env, "SIGSTORE_REKOR_PUBLIC_KEY="+filepath.Join(s.dir, "rekor.pub"))
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("cosign %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.Bytes(), nil
}

// GenerateKeyPair runs `cosign generate-key-pair`, writing name.key and
// name.pub, and returns the public key's PEM.
func (s *Signer) GenerateKeyPair(ctx context.Context, name string) ([]byte, error) {
	if _, err := s.run(ctx, "generate-key-pair", "--output-key-prefix", name); err != nil {
		return nil, err
	}
	return os.ReadFile(s.PublicKeyFile(name))
}

// PublicKeyFile is the cosign.pub of the key pair name.
func (s *Signer) PublicKeyFile(name string) string { return filepath.Join(s.dir, name+".pub") }

// Options say how Sign signs.
type Options struct {
	Format Format
	// NoTlog signs without a transparency-log entry (a signing config
	// naming no log; --tlog-upload=false for Attached).
	NoTlog bool
}

// Sign runs `cosign sign --key name.key` on ref (image@digest).
func (s *Signer) Sign(ctx context.Context, key, ref string, o Options) error {
	args, err := s.signArgs("sign", key, o)
	if err != nil {
		return err
	}
	_, err = s.run(ctx, append(args, ref)...)
	return err
}

// SignKeyless runs `cosign sign` on ref (image@digest) without a key, as
// a CI job signs: an ephemeral key certified by the signer's Fulcio for
// the identity of idToken (an OIDC ID token for fulciotest.Audience), the
// signature logged in the signer's Rekor: `--fulcio-url --rekor-url
// --identity-token --trusted-root`, with no signing config. Format says
// how it is attached (NoTlog is refused: a certificate's signature needs
// its entry's time).
func (s *Signer) SignKeyless(ctx context.Context, ref, idToken string, o Options) error {
	if s.fulcio == nil {
		return errors.New("keyless signing without a Fulcio (UseFulcio)")
	}
	if o.NoTlog {
		return errors.New("keyless signing without a log entry: cosign has no time to check the short-lived certificate at")
	}
	// The token in a file (cosign reads a path as well): not in the
	// process list, nor in an error quoting the command.
	tok := filepath.Join(s.dir, "id-token")
	if err := os.WriteFile(tok, []byte(idToken), 0o600); err != nil {
		return err
	}
	args := []string{"sign", "--yes", "--allow-http-registry", "--use-signing-config=false",
		"--fulcio-url", s.fulcio.URL, "--rekor-url", s.log.URL, "--identity-token", tok,
		"--trusted-root", s.TrustedRootFile()}
	if o.Format == Attached {
		args = append(args, "--new-bundle-format=false")
	}
	_, err := s.run(ctx, append(args, ref)...)
	return err
}

// SignToFile runs `cosign sign --key name.key --upload=false --bundle
// file` on ref: the bundle cosign would attach, written to file only.
func (s *Signer) SignToFile(ctx context.Context, key, ref, file string, noTlog bool) error {
	args, err := s.signArgs("sign", key, Options{NoTlog: noTlog})
	if err != nil {
		return err
	}
	_, err = s.run(ctx, append(args, "--upload=false", "--bundle", file, ref)...)
	return err
}

// Attest runs `cosign attest --key name.key --type predicateType
// --predicate file` on ref: an attestation, attached as a bundle, logged.
func (s *Signer) Attest(ctx context.Context, key, ref, predicateType string, predicate []byte) error {
	return s.AttestWith(ctx, key, ref, predicateType, predicate, Options{})
}

// AttestWith is Attest as o says: Attached is cosign's old format
// (--new-bundle-format=false), a DSSE envelope in the
// "sha256-<hex>.att" tag with the Rekor bundle annotation when logged;
// NoTlog attests without a log entry.
func (s *Signer) AttestWith(ctx context.Context, key, ref, predicateType string, predicate []byte, o Options) error {
	p := filepath.Join(s.dir, "predicate.json")
	if err := os.WriteFile(p, predicate, 0o600); err != nil {
		return err
	}
	args, err := s.signArgs("attest", key, o)
	if err != nil {
		return err
	}
	_, err = s.run(ctx, append(args, "--type", predicateType, "--predicate", p, ref)...)
	return err
}

func (s *Signer) signArgs(cmd, key string, o Options) ([]string, error) {
	args := []string{cmd, "--yes", "--key", filepath.Join(s.dir, key+".key"), "--allow-http-registry"}
	if !o.NoTlog && s.log == nil {
		return nil, fmt.Errorf("signing with a log entry, and the signer has no log")
	}
	switch {
	case o.Format == Attached && o.NoTlog:
		args = append(args, "--new-bundle-format=false", "--use-signing-config=false", "--tlog-upload=false")
	case o.Format == Attached:
		args = append(args, "--new-bundle-format=false", "--use-signing-config=false", "--rekor-url", s.log.URL)
	case o.NoTlog:
		args = append(args, "--signing-config", filepath.Join(s.dir, "signing-config-nolog.json"))
		if s.log != nil {
			args = append(args, "--trusted-root", s.TrustedRootFile())
		}
	default:
		args = append(args, "--signing-config", filepath.Join(s.dir, "signing-config.json"), "--trusted-root", s.TrustedRootFile())
	}
	return args, nil
}

// PublicKeyPEM decodes the PEM of a public key file (for checks).
func PublicKeyPEM(b []byte) (any, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("no PEM")
	}
	return x509.ParsePKIXPublicKey(blk.Bytes)
}
