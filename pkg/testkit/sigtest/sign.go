package sigtest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/url"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"google.golang.org/protobuf/encoding/protojson"
)

// ---------------------------------------------------------------- keys

// Keypair adapts an ECDSA P-256 private key (e.g. a test key or a decrypted
// cosign.key) to sigstore-go's sign.Keypair.
type Keypair struct{ Priv *ecdsa.PrivateKey }

func NewKeypair() *Keypair {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return &Keypair{Priv: k}
}

func (k *Keypair) GetHashAlgorithm() protocommon.HashAlgorithm {
	return protocommon.HashAlgorithm_SHA2_256
}
func (k *Keypair) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256
}
func (k *Keypair) GetHint() []byte {
	der, _ := x509.MarshalPKIXPublicKey(&k.Priv.PublicKey)
	s := sha256.Sum256(der)
	return []byte(base64.StdEncoding.EncodeToString(s[:]))
}
func (k *Keypair) GetKeyAlgorithm() string        { return "ECDSA" }
func (k *Keypair) GetPublicKey() crypto.PublicKey { return &k.Priv.PublicKey }
func (k *Keypair) GetPublicKeyPem() (string, error) {
	return string(k.PublicKeyPEM()), nil
}
func (k *Keypair) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	d := sha256.Sum256(data)
	sig, err := ecdsa.SignASN1(rand.Reader, k.Priv, d[:])
	return sig, d[:], err
}

// PublicKeyPEM is what `cosign generate-key-pair` writes to cosign.pub.
func (k *Keypair) PublicKeyPEM() []byte {
	b, err := cryptoutils.MarshalPublicKeyToPEM(&k.Priv.PublicKey)
	if err != nil {
		panic(err)
	}
	return b
}

var _ sign.Keypair = (*Keypair)(nil)

// ---------------------------------------------------------------- legacy .sig

// SimpleSigningPayload is cosign's payload for image d.
func SimpleSigningPayload(d name.Digest) []byte {
	p := map[string]any{
		"critical": map[string]any{
			"identity": map[string]any{"docker-reference": d.Context().Name()},
			"image":    map[string]any{"docker-manifest-digest": d.DigestStr()},
			"type":     "cosign container image signature",
		},
		"optional": nil,
	}
	b, _ := json.Marshal(p)
	return b
}

// SignLegacy pushes "<repo>:sha256-<hex>.sig" like `cosign sign --key` did
// before bundles (cosign v2 default, `--new-bundle-format=false` in v3).
// certPEM is optional (keyless legacy signatures carry their cert there).
func SignLegacy(ctx context.Context, d name.Digest, k sign.Keypair, certPEM []byte, opts ...remote.Option) error {
	payload := SimpleSigningPayload(d)
	sig, _, err := k.SignData(ctx, payload)
	if err != nil {
		return err
	}
	ann := map[string]string{"dev.cosignproject.cosign/signature": base64.StdEncoding.EncodeToString(sig)}
	if certPEM != nil {
		ann["dev.sigstore.cosign/certificate"] = string(certPEM)
		ann["dev.sigstore.cosign/chain"] = ""
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:       static.NewLayer(payload, "application/vnd.dev.cosign.simplesigning.v1+json"),
		Annotations: ann,
	})
	if err != nil {
		return err
	}
	// NB: cosign appends to an existing .sig image (several signatures =
	// several layers); a test that signs twice should do the same.
	tag := d.Context().Tag(fmt.Sprintf("sha256-%s.sig", mustHash(d).Hex))
	return remote.Write(tag, img, opts...)
}

func mustHash(d name.Digest) v1.Hash {
	h, err := v1.NewHash(d.DigestStr())
	if err != nil {
		panic(err)
	}
	return h
}

// ---------------------------------------------------------------- bundles

// CosignStatement is the in-toto statement `cosign sign` (v3) signs.
func CosignStatement(d name.Digest) []byte {
	h := mustHash(d)
	st := map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"name": d.Context().Name(), "digest": map[string]string{h.Algorithm: h.Hex}}},
		"predicateType": "https://sigstore.dev/cosign/sign/v1",
		"predicate":     map[string]any{},
	}
	b, _ := json.Marshal(st)
	return b
}

// SignBundle signs d's statement with k (add opts.CertificateProvider for
// keyless) and attaches the bundle as an OCI 1.1 referrer, the way cosign v3
// does (ociremote.WriteAttestationNewBundleFormat). Returns the bundle JSON.
func SignBundle(d name.Digest, k sign.Keypair, bopts sign.BundleOptions, opts ...remote.Option) ([]byte, error) {
	pb, err := sign.Bundle(&sign.DSSEData{Data: CosignStatement(d), PayloadType: "application/vnd.in-toto+json"}, k, bopts)
	if err != nil {
		return nil, err
	}
	bj, err := protojson.Marshal(pb)
	if err != nil {
		return nil, err
	}
	return bj, AttachBundle(d, bj, "https://sigstore.dev/cosign/sign/v1", opts...)
}

type rawManifest struct{ b []byte }

func (r rawManifest) RawManifest() ([]byte, error)        { return r.b, nil }
func (r rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// AttachBundle pushes an OCI artifact manifest (artifactType = bundle media
// type, empty config, one bundle layer, subject = d). On registries without
// the referrers API, ggcr maintains the "sha256-<hex>" fallback index tag.
func AttachBundle(d name.Digest, bundleJSON []byte, predicateType string, opts ...remote.Option) error {
	const bundleMT = "application/vnd.dev.sigstore.bundle.v0.3+json"
	repo := d.Context()
	subj, err := remote.Head(d, opts...)
	if err != nil {
		return err
	}
	cfg := static.NewLayer([]byte("{}"), types.OCIEmptyJSON)
	lyr := static.NewLayer(bundleJSON, bundleMT)
	for _, l := range []v1.Layer{cfg, lyr} {
		if err := remote.WriteLayer(repo, l, opts...); err != nil {
			return err
		}
	}
	desc := func(l v1.Layer, mt types.MediaType) v1.Descriptor {
		dg, _ := l.Digest()
		sz, _ := l.Size()
		return v1.Descriptor{MediaType: mt, Digest: dg, Size: sz}
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  bundleMT,
		Config:        desc(cfg, types.OCIEmptyJSON),
		Layers:        []v1.Descriptor{desc(lyr, bundleMT)},
		Subject:       &v1.Descriptor{MediaType: subj.MediaType, Digest: subj.Digest, Size: subj.Size},
		Annotations: map[string]string{
			"dev.sigstore.bundle.content":       "dsse-envelope",
			"dev.sigstore.bundle.predicateType": predicateType,
			"org.opencontainers.image.created":  time.Now().UTC().Format(time.RFC3339),
		},
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	mh, _, _ := v1.SHA256(bytes.NewReader(raw))
	return remote.Put(repo.Digest(mh.String()), rawManifest{raw}, opts...)
}

// ---------------------------------------------------------------- test CA

// OIDIssuerV2 is Fulcio's OIDC issuer extension (DER UTF8String value).
var OIDIssuerV2 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 8}

// CA is a Fulcio stand-in: a self-signed root that issues short-lived
// code-signing certs carrying the OIDC issuer extension and a SAN.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

func NewCA() *CA {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "flotilla test fulcio", Organization: []string{"flotilla-test"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		panic(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &CA{Cert: c, Key: k}
}

// Issue returns a DER leaf cert for pub with the given issuer and SAN
// (a URI such as a GitHub workflow ref, or an e-mail address).
func (ca *CA) Issue(pub crypto.PublicKey, issuer, san string) ([]byte, error) {
	ext, err := asn1.MarshalWithParams(issuer, "utf8")
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:    big.NewInt(time.Now().UnixNano()),
		NotBefore:       time.Now().Add(-time.Minute),
		NotAfter:        time.Now().Add(10 * time.Minute),
		KeyUsage:        x509.KeyUsageDigitalSignature,
		ExtKeyUsage:     []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}, // required by sigstore-go
		ExtraExtensions: []pkix.Extension{{Id: OIDIssuerV2, Value: ext}},
	}
	if u, err := url.Parse(san); err == nil && u.Scheme != "" {
		tmpl.URIs = []*url.URL{u}
	} else {
		tmpl.EmailAddresses = []string{san}
	}
	return x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
}

// Provider is a sign.CertificateProvider issuing certs from ca.
type Provider struct {
	CA          *CA
	Issuer, SAN string
}

func (p Provider) GetCertificate(_ context.Context, k sign.Keypair, _ *sign.CertificateProviderOptions) ([]byte, error) {
	return p.CA.Issue(k.GetPublicKey(), p.Issuer, p.SAN)
}

// TrustedRootJSON is a trusted_root.json holding only this CA (no Rekor,
// CT log or TSA), loadable with root.NewTrustedRootFromJSON / FromPath.
func (ca *CA) TrustedRootJSON() ([]byte, error) {
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01,
		[]root.CertificateAuthority{&root.FulcioCertificateAuthority{
			Root:                ca.Cert,
			ValidityPeriodStart: ca.Cert.NotBefore,
			URI:                 "https://fulcio.test",
		}}, nil, nil, nil)
	if err != nil {
		return nil, err
	}
	return json.Marshal(tr)
}

// CertPEM encodes a DER certificate.
func CertPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// CopyLegacySignature puts src's signature image under dst's .sig tag: a
// signature replayed onto another image.
func CopyLegacySignature(src, dst name.Digest, opts ...remote.Option) error {
	img, err := remote.Image(src.Context().Tag(fmt.Sprintf("sha256-%s.sig", mustHash(src).Hex)), opts...)
	if err != nil {
		return err
	}
	return remote.Write(dst.Context().Tag(fmt.Sprintf("sha256-%s.sig", mustHash(dst).Hex)), img, opts...)
}
