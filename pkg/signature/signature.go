package signature

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	sigsig "github.com/sigstore/sigstore/pkg/signature"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// What cosign attaches to an image, and how.
const (
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	SignatureAnnotation    = "dev.cosignproject.cosign/signature"
	CertificateAnnotation  = "dev.sigstore.cosign/certificate"
	RekorBundleAnnotation  = "dev.sigstore.cosign/bundle"
	BundleMediaTypeV01     = "application/vnd.dev.sigstore.bundle+json;version=0.1"
	BundleMediaTypeV03     = "application/vnd.dev.sigstore.bundle.v0.3+json"
	BundleMediaTypePrefix  = "application/vnd.dev.sigstore.bundle"
	CosignSignPredicate    = "https://sigstore.dev/cosign/sign/v1"
	SimpleSigningType      = "cosign container image signature"
	// DSSEMediaType is the media type of an .att tag's layer: a DSSE
	// envelope of an in-toto statement (InTotoPayloadType).
	DSSEMediaType     = "application/vnd.dsse.envelope.v1+json"
	InTotoPayloadType = "application/vnd.in-toto+json"
)

// Key is a cosign public key (PEM), named for messages, and the
// trusted_root.json whose Rekor logs its signatures must have an entry in
// (unused when the policy ignores the log).
type Key struct {
	Name        string
	PEM         []byte
	TrustedRoot []byte
}

// Identity is a keyless signer: the certificate's OIDC issuer (exact) and
// subject (a regular expression over its URI or e-mail SAN).
type Identity struct {
	Name    string
	Issuer  string
	Subject string
}

// Policy is what one application accepts: a signature by one of Keys, or
// by one of Identities under TrustedRoot (a trusted_root.json). A key's
// signature must carry an entry of its key's Rekor log, as `cosign verify
// --key` demands, unless IgnoreTlog (cosign's --insecure-ignore-tlog): then
// a signature made without the log, or with its entry stripped, counts.
//
// Attestations are in-toto predicate types the digest must also carry an
// attestation of: a bundle among its referrers (cosign attest, v3) or a
// DSSE envelope in its "sha256-<hex>.att" tag (cosign attest
// --new-bundle-format=false, and cosign before v3), whose statement has the
// type and names the digest, signed by a key or identity of the policy
// under the same rules. Who signed then lists them ("key release;
// https://slsa.dev/provenance/v1 attested by key release").
type Policy struct {
	Keys         []Key
	Identities   []Identity
	TrustedRoot  []byte
	IgnoreTlog   bool
	Attestations []string
}

// TlogNotChecked follows the signer's name ("key release") when the
// policy ignores the transparency log: what the rollout records says the
// check was skipped.
const TlogNotChecked = " (transparency log not checked: verify.ignoreTlog)"

// ErrNoTlogEntry is why a key's signature without a transparency-log entry
// is refused.
var ErrNoTlogEntry = errors.New("no transparency-log entry: the policy requires the signature in a Rekor log (ignoreTlog: true accepts it without, which is weaker)")

// Access says how to read image@digest and what is attached to it
// (pkg/registry.Remote.Access).
type Access func(ctx context.Context, image, digest string) (name.Digest, []remote.Option, error)

// MaxCached bounds the cached results.
const MaxCached = 10000

// Verifier checks digests against the applications' policies.
type Verifier struct {
	access   Access
	policies map[string]*compiled

	mu    sync.Mutex
	cache map[string]string // app \x00 image@digest -> who signed it
}

type compiled struct {
	ignoreTlog   bool
	attestations []string
	keys         []*verify.Verifier
	keyNames     []string
	keyless      *verify.Verifier
	identities   []verify.PolicyOption
	// trusted describes the identities, for a refusal.
	trusted []string
}

// New compiles the policies, by application name.
func New(access Access, policies map[string]Policy) (*Verifier, error) {
	v := &Verifier{access: access, policies: map[string]*compiled{}, cache: map[string]string{}}
	for app, p := range policies {
		c, err := compile(p)
		if err != nil {
			return nil, fmt.Errorf("application %s: %w", app, err)
		}
		v.policies[app] = c
	}
	return v, nil
}

// Has tells whether app has a signature policy.
func (v *Verifier) Has(app string) bool { return v != nil && v.policies[app] != nil }

func compile(p Policy) (*compiled, error) {
	c := &compiled{ignoreTlog: p.IgnoreTlog, attestations: p.Attestations}
	for _, t := range p.Attestations {
		if t == "" || t == CosignSignPredicate {
			return nil, fmt.Errorf("attestation type %q: want the predicate type of an attestation", t)
		}
	}
	if p.IgnoreTlog && len(p.Keys) == 0 {
		return nil, errors.New("ignoring the transparency log concerns keys, and the policy has none")
	}
	for _, k := range p.Keys {
		pub, err := cryptoutils.UnmarshalPEMToPublicKey(k.PEM)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", k.Name, err)
		}
		// cosign signs simple-signing payloads with SHA-256 whatever the
		// curve.
		sv, err := sigsig.LoadVerifier(pub, crypto.SHA256)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", k.Name, err)
		}
		ek := root.NewExpiringKey(sv, time.Time{}, time.Time{})
		material := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) { return ek, nil })
		kv, err := keyVerifier(material, k, p.IgnoreTlog)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", k.Name, err)
		}
		c.keys, c.keyNames = append(c.keys, kv), append(c.keyNames, k.Name)
	}
	if len(p.Identities) > 0 {
		tr, err := root.NewTrustedRootFromJSON(p.TrustedRoot)
		if err != nil {
			return nil, fmt.Errorf("trusted root: %w", err)
		}
		var opts []verify.VerifierOption
		if len(tr.RekorLogs()) > 0 {
			opts = append(opts, verify.WithTransparencyLog(1), verify.WithObserverTimestamps(1))
			if len(tr.CTLogs()) > 0 {
				opts = append(opts, verify.WithSignedCertificateTimestamps(1))
			}
		} else {
			opts = append(opts, verify.WithCurrentTime())
		}
		if c.keyless, err = verify.NewVerifier(tr, opts...); err != nil {
			return nil, fmt.Errorf("trusted root: %w", err)
		}
		for _, id := range p.Identities {
			ci, err := verify.NewShortCertificateIdentity(id.Issuer, "", "", id.Subject)
			if err != nil {
				return nil, fmt.Errorf("identity %s: %w", id.Name, err)
			}
			c.identities = append(c.identities, verify.WithCertificateIdentity(ci))
			c.trusted = append(c.trusted, fmt.Sprintf("%s: issuer %s, subject %s", id.Name, id.Issuer, id.Subject))
		}
	}
	if len(c.keys) == 0 && c.keyless == nil {
		return nil, errors.New("no key and no keyless identity")
	}
	return c, nil
}

// keyVerifier verifies a key's signatures, with their entry in one of the
// key's trusted Rekor logs (its signed entry timestamp, or its inclusion
// proof in a signed checkpoint), unless ignoreTlog.
func keyVerifier(material root.TrustedMaterial, k Key, ignoreTlog bool) (*verify.Verifier, error) {
	if ignoreTlog {
		return verify.NewVerifier(material, verify.WithNoObserverTimestamps())
	}
	if len(k.TrustedRoot) == 0 {
		return nil, errors.New("no trusted root naming the Rekor log its signatures must be in (or ignore the log)")
	}
	tr, err := root.NewTrustedRootFromJSON(k.TrustedRoot)
	if err != nil {
		return nil, fmt.Errorf("trusted root: %w", err)
	}
	if len(tr.RekorLogs()) == 0 {
		return nil, errors.New("its trusted root names no Rekor log")
	}
	// The key first: the root answers no key lookup.
	return verify.NewVerifier(root.TrustedMaterialCollection{material, tr},
		verify.WithTransparencyLog(1), verify.WithObserverTimestamps(1))
}

// Verify checks that a signature attached to image@digest satisfies app's
// policy, and says whose it is ("key NAME", or the certificate's subject).
// An application without a policy is an error. A signature that does not
// verify, or none, is permanent; a registry that cannot be read is not.
// Only a trusted signature is cached: a refused digest may be signed
// later, and its signature's push asks again.
func (v *Verifier) Verify(ctx context.Context, app, image, digest string) (string, error) {
	c := v.policies[app]
	if c == nil {
		return "", fault.Permanent(fmt.Errorf("application %s verifies no signatures", app))
	}
	key := app + "\x00" + image + "@" + digest
	v.mu.Lock()
	by, ok := v.cache[key]
	v.mu.Unlock()
	if ok {
		return by, nil
	}
	by, err := v.verify(ctx, c, image, digest)
	if err == nil {
		v.mu.Lock()
		if len(v.cache) >= MaxCached {
			for k := range v.cache {
				delete(v.cache, k)
				if len(v.cache) < MaxCached/2 {
					break
				}
			}
		}
		v.cache[key] = by
		v.mu.Unlock()
	}
	return by, err
}

// candidate is one signature found in the registry.
type candidate struct {
	source  string
	entity  *bundle.Bundle
	payload []byte // a simple-signing payload (nil for a bundle)
	// attestation is set for what the .att tag holds: an attestation,
	// never a signature, whatever its statement says.
	attestation bool
}

func (v *Verifier) verify(ctx context.Context, c *compiled, image, digest string) (string, error) {
	d, opts, err := v.access(ctx, image, digest)
	if err != nil {
		return "", err
	}
	h, err := v1.NewHash(d.DigestStr())
	if err != nil {
		return "", fault.Permanent(err)
	}
	cands, err := legacyCandidates(d, h, opts)
	if err != nil {
		return "", err
	}
	bc, err := bundleCandidates(d, opts)
	if err != nil {
		return "", err
	}
	cands = append(cands, bc...)
	if len(c.attestations) > 0 {
		// Read only when the policy asks for attestations: a signature
		// alone never costs this request.
		ac, err := attestationCandidates(d, h, opts)
		if err != nil {
			return "", err
		}
		cands = append(cands, ac...)
	}
	if len(cands) == 0 {
		return "", fault.Permanent(fmt.Errorf("%s is not signed (no tag %s, no signature bundle among its referrers; its signature's push rolls it out)", d, legacyTag(d, h).TagStr()))
	}
	digestBytes, _ := hex.DecodeString(h.Hex)
	var reasons []string
	signer := ""
	attested := map[string]string{} // predicate type -> its signer
	for _, cand := range cands {
		artifact := verify.WithArtifactDigest(h.Algorithm, digestBytes)
		if cand.payload != nil {
			artifact = verify.WithArtifact(bytes.NewReader(cand.payload))
		}
		res, who, err := c.check(cand, artifact)
		if err == nil && cand.payload == nil && slices.Contains(c.attestations, predicate(res)) {
			// A required attestation, by a trusted signer; the verifier
			// matched its statement's subject to the digest.
			if attested[predicate(res)] == "" {
				attested[predicate(res)] = who
			}
			continue
		}
		if err == nil {
			err = claims(cand, res, h)
		}
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("%s: %v", cand.source, err))
			continue
		}
		if signer == "" {
			signer = who
		}
		if len(c.attestations) == 0 {
			return signer, nil
		}
	}
	if signer == "" {
		return "", fault.Permanent(fmt.Errorf("no signature of %s is trusted: %s", d, strings.Join(reasons, "; ")))
	}
	var missing []string
	for _, t := range c.attestations {
		if attested[t] == "" {
			missing = append(missing, t)
			continue
		}
		signer += fmt.Sprintf("; %s attested by %s", t, attested[t])
	}
	if len(missing) > 0 {
		why := ""
		if len(reasons) > 0 {
			why = " (" + strings.Join(reasons, "; ") + ")"
		}
		return "", fault.Permanent(fmt.Errorf("%s is signed, but carries no attestation of type %s by a trusted signer%s",
			d, strings.Join(missing, ", "), why))
	}
	return signer, nil
}

// check verifies one signature with the keys, or the keyless identities.
func (c *compiled) check(cand candidate, artifact verify.ArtifactPolicyOption) (*verify.VerificationResult, string, error) {
	vc, err := cand.entity.VerificationContent()
	if err != nil {
		return nil, "", err
	}
	if vc.Certificate() == nil {
		if len(c.keys) == 0 {
			return nil, "", errors.New("signed with a key, and the policy trusts no key")
		}
		if !c.ignoreTlog {
			if entries, err := cand.entity.TlogEntries(); err != nil || len(entries) == 0 {
				return nil, "", ErrNoTlogEntry
			}
		}
		var errs []string
		for i, kv := range c.keys {
			res, err := kv.Verify(cand.entity, verify.NewPolicy(artifact, verify.WithKey()))
			if err == nil && c.ignoreTlog {
				return res, "key " + c.keyNames[i] + TlogNotChecked, nil
			}
			if err == nil {
				return res, "key " + c.keyNames[i], nil
			}
			errs = append(errs, fmt.Sprintf("key %s: %v", c.keyNames[i], err))
		}
		return nil, "", errors.New(strings.Join(errs, "; "))
	}
	if c.keyless == nil {
		return nil, "", errors.New("signed with a certificate, and the policy trusts no keyless identity")
	}
	res, err := c.keyless.Verify(cand.entity, verify.NewPolicy(artifact, c.identities...))
	var other *verify.ErrNoMatchingCertificateIdentity
	if errors.As(err, &other) {
		// The certificate verified (its chain, its log entry): only its
		// identity is not trusted, and it is named.
		if s, serr := certificate.SummarizeCertificate(vc.Certificate()); serr == nil {
			return nil, "", fmt.Errorf("signed by %s (OIDC issuer %s), which no trusted identity matches (%s)",
				s.SubjectAlternativeName, s.Extensions.Issuer, strings.Join(c.trusted, "; "))
		}
	}
	if err != nil {
		return nil, "", err
	}
	return res, res.Signature.Certificate.SubjectAlternativeName, nil
}

// claims binds a verified signature to the digest: a simple-signing
// payload must name it; a bundle must be cosign's signature (its subject
// was matched by the verifier).
func claims(cand candidate, res *verify.VerificationResult, h v1.Hash) error {
	if cand.attestation {
		return fmt.Errorf("an attestation (predicate %q), not a signature", predicate(res))
	}
	if cand.payload != nil {
		var ss struct {
			Critical struct {
				Image struct {
					DockerManifestDigest string `json:"docker-manifest-digest"`
				} `json:"image"`
				Type string `json:"type"`
			} `json:"critical"`
		}
		if err := json.Unmarshal(cand.payload, &ss); err != nil {
			return fmt.Errorf("simple-signing payload: %w", err)
		}
		if ss.Critical.Type != SimpleSigningType {
			return fmt.Errorf("simple-signing payload of type %q", ss.Critical.Type)
		}
		if ss.Critical.Image.DockerManifestDigest != h.String() {
			return fmt.Errorf("the signature is for %s, not %s", ss.Critical.Image.DockerManifestDigest, h)
		}
		return nil
	}
	if res.Statement == nil || res.Statement.PredicateType != CosignSignPredicate {
		return fmt.Errorf("the bundle is not a cosign signature (predicate %q)", predicate(res))
	}
	return nil
}

func predicate(res *verify.VerificationResult) string {
	if res.Statement == nil {
		return ""
	}
	return res.Statement.PredicateType
}

func legacyTag(d name.Digest, h v1.Hash) name.Tag {
	return d.Context().Tag(fmt.Sprintf("%s-%s.sig", h.Algorithm, h.Hex))
}

// attestationTag is cosign's tag of a digest's attestations before v3
// (ociremote.AttestationTag).
func attestationTag(d name.Digest, h v1.Hash) name.Tag {
	return d.Context().Tag(fmt.Sprintf("%s-%s.att", h.Algorithm, h.Hex))
}

func notFound(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound
}

// readErr classes an error reading the registry: the image or signature
// vanished or is refused for good (4xx) is permanent.
func readErr(what string, err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode >= 400 && terr.StatusCode < 500 &&
		terr.StatusCode != http.StatusRequestTimeout && terr.StatusCode != http.StatusTooManyRequests {
		return fault.Permanent(fmt.Errorf("reading %s: %w", what, err))
	}
	return fmt.Errorf("reading %s: %w", what, err)
}

// legacyCandidates reads cosign's "<alg>-<hex>.sig" tag.
func legacyCandidates(d name.Digest, h v1.Hash, opts []remote.Option) ([]candidate, error) {
	tag := legacyTag(d, h)
	img, m, err := tagged(tag, opts)
	if img == nil || err != nil {
		return nil, err
	}
	var out []candidate
	for i, l := range m.Layers {
		if l.MediaType != SimpleSigningMediaType {
			continue
		}
		src := fmt.Sprintf("%s layer %d", tag.TagStr(), i)
		payload, err := readBlob(img, l)
		if err != nil {
			return nil, readErr(src, err)
		}
		sig, err := base64.StdEncoding.DecodeString(l.Annotations[SignatureAnnotation])
		if err != nil || len(sig) == 0 {
			continue // not a signature: nothing to verify
		}
		sum := sha256.Sum256(payload)
		pb, ok := legacyBundle(l.Annotations)
		if !ok {
			continue
		}
		pb.Content = &protobundle.Bundle_MessageSignature{MessageSignature: &protocommon.MessageSignature{
			MessageDigest: &protocommon.HashOutput{Algorithm: protocommon.HashAlgorithm_SHA2_256, Digest: sum[:]},
			Signature:     sig,
		}}
		b, err := bundle.NewBundle(pb)
		if err != nil {
			continue
		}
		out = append(out, candidate{source: src, entity: b, payload: payload})
	}
	return out, nil
}

// attestationCandidates reads cosign's "<alg>-<hex>.att" tag as cosign's
// verify-attestation does without the new bundle format
// (ociremote.Signatures of ociremote.AttestationTag): each layer a DSSE
// envelope of an in-toto statement, its signatures inside, the
// certificate and Rekor bundle in the layer's annotations as on a .sig
// layer (the signature annotation is empty).
func attestationCandidates(d name.Digest, h v1.Hash, opts []remote.Option) ([]candidate, error) {
	tag := attestationTag(d, h)
	img, m, err := tagged(tag, opts)
	if img == nil || err != nil {
		return nil, err
	}
	var out []candidate
	for i, l := range m.Layers {
		if l.MediaType != DSSEMediaType {
			continue
		}
		src := fmt.Sprintf("%s layer %d", tag.TagStr(), i)
		raw, err := readBlob(img, l)
		if err != nil {
			return nil, readErr(src, err)
		}
		var env protodsse.Envelope
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, &env); err != nil ||
			env.GetPayloadType() != InTotoPayloadType || len(env.GetSignatures()) == 0 {
			continue // not an in-toto attestation: cosign refuses it too
		}
		pb, ok := legacyBundle(l.Annotations)
		if !ok {
			continue
		}
		pb.Content = &protobundle.Bundle_DsseEnvelope{DsseEnvelope: &env}
		b, err := bundle.NewBundle(pb)
		if err != nil {
			continue
		}
		out = append(out, candidate{source: src, entity: b, attestation: true})
	}
	return out, nil
}

// tagged reads the manifest of a tag cosign attaches to a digest: nil and
// no error when there is none.
func tagged(tag name.Tag, opts []remote.Option) (v1.Image, *v1.Manifest, error) {
	img, err := remote.Image(tag, opts...)
	if notFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, readErr(tag.String(), err)
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, nil, readErr(tag.String(), err)
	}
	return img, m, nil
}

// legacyBundle builds, from the annotations of a .sig or .att layer, an
// in-memory bundle without its content: the certificate or else a key
// hint, and the Rekor bundle's entry when there is one. false: the
// annotations cannot be read, and the layer is no signature to check.
func legacyBundle(annotations map[string]string) (*protobundle.Bundle, bool) {
	pb := &protobundle.Bundle{
		MediaType:            BundleMediaTypeV03,
		VerificationMaterial: &protobundle.VerificationMaterial{},
	}
	if certPEM := annotations[CertificateAnnotation]; certPEM != "" {
		blk, _ := pem.Decode([]byte(certPEM))
		if blk == nil {
			return nil, false
		}
		pb.VerificationMaterial.Content = &protobundle.VerificationMaterial_Certificate{
			Certificate: &protocommon.X509Certificate{RawBytes: blk.Bytes}}
	} else {
		pb.VerificationMaterial.Content = &protobundle.VerificationMaterial_PublicKey{PublicKey: &protocommon.PublicKeyIdentifier{}}
	}
	if rb := annotations[RekorBundleAnnotation]; rb != "" {
		// cosign's Rekor bundle: the entry's signed timestamp, no
		// inclusion proof, which bundles of version 0.1 allow.
		e, err := legacyTlogEntry([]byte(rb))
		if err != nil {
			return nil, false
		}
		pb.MediaType = BundleMediaTypeV01
		pb.VerificationMaterial.TlogEntries = []*protorekor.TransparencyLogEntry{e}
	}
	return pb, true
}

// legacyTlogEntry reads the Rekor bundle cosign annotates a .sig layer
// with (its signed entry timestamp and the entry it signs).
func legacyTlogEntry(raw []byte) (*protorekor.TransparencyLogEntry, error) {
	var rb struct {
		SignedEntryTimestamp []byte
		Payload              struct {
			Body           string `json:"body"`
			IntegratedTime int64  `json:"integratedTime"`
			LogIndex       int64  `json:"logIndex"`
			LogID          string `json:"logID"`
		}
	}
	if err := json.Unmarshal(raw, &rb); err != nil {
		return nil, err
	}
	body, err := base64.StdEncoding.DecodeString(rb.Payload.Body)
	if err != nil {
		return nil, err
	}
	logID, err := hex.DecodeString(rb.Payload.LogID)
	if err != nil {
		return nil, err
	}
	var kv struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(body, &kv); err != nil {
		return nil, err
	}
	return &protorekor.TransparencyLogEntry{
		LogIndex:          rb.Payload.LogIndex,
		LogId:             &protocommon.LogId{KeyId: logID},
		KindVersion:       &protorekor.KindVersion{Kind: kv.Kind, Version: kv.APIVersion},
		IntegratedTime:    rb.Payload.IntegratedTime,
		InclusionPromise:  &protorekor.InclusionPromise{SignedEntryTimestamp: rb.SignedEntryTimestamp},
		CanonicalizedBody: body,
	}, nil
}

// bundleCandidates reads the Sigstore bundles attached as OCI referrers
// (or go-containerregistry's fallback, the "<alg>-<hex>" referrers tag).
func bundleCandidates(d name.Digest, opts []remote.Option) ([]candidate, error) {
	idx, err := remote.Referrers(d, opts...)
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, readErr("the referrers of "+d.String(), err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, readErr("the referrers of "+d.String(), err)
	}
	var out []candidate
	for _, desc := range im.Manifests {
		// The artifact type is the manifest's, else its config's media
		// type (some registries report only the latter).
		if !strings.HasPrefix(desc.ArtifactType, BundleMediaTypePrefix) &&
			desc.ArtifactType != string(types.OCIEmptyJSON) && desc.ArtifactType != "" {
			continue
		}
		src := "referrer " + desc.Digest.String()
		img, err := remote.Image(d.Context().Digest(desc.Digest.String()), opts...)
		if err != nil {
			return nil, readErr(src, err)
		}
		m, err := img.Manifest()
		if err != nil {
			return nil, readErr(src, err)
		}
		if len(m.Layers) != 1 || !strings.HasPrefix(string(m.Layers[0].MediaType), BundleMediaTypePrefix) {
			continue // another artifact (an SBOM, ...)
		}
		raw, err := readBlob(img, m.Layers[0])
		if err != nil {
			return nil, readErr(src, err)
		}
		var b bundle.Bundle
		if err := b.UnmarshalJSON(raw); err != nil || b.GetDsseEnvelope() == nil {
			continue // not a signature bundle flotilla can check
		}
		out = append(out, candidate{source: src, entity: &b})
	}
	return out, nil
}

// maxBlob bounds what is read of a signature's blob.
const maxBlob = 4 << 20

func readBlob(img v1.Image, l v1.Descriptor) ([]byte, error) {
	if l.Size > maxBlob {
		return nil, fmt.Errorf("blob %s is too large (%d bytes)", l.Digest, l.Size)
	}
	layer, err := img.LayerByDigest(l.Digest)
	if err != nil {
		return nil, err
	}
	rc, err := layer.Compressed()
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	b, err := io.ReadAll(io.LimitReader(rc, maxBlob+1))
	if err != nil {
		return nil, err
	}
	if got, _, _ := v1.SHA256(bytes.NewReader(b)); got != l.Digest {
		return nil, fmt.Errorf("blob %s: content has digest %s", l.Digest, got)
	}
	return b, nil
}
