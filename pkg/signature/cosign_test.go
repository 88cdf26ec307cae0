package signature_test

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/signature"
	"github.com/flotilla-cd/flotilla/pkg/testkit/cosigntest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fulciotest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/oidcop"
)

// TestVerifyCosign verifies what the real cosign CLI (v3, built by make
// fleet-build, which make test runs first) attaches to images in a
// registry: key signatures as bundles among the referrers and in the .sig
// tag, logged in a Rekor stand-in or not; keyless signatures, an ephemeral
// key certified by a Fulcio stand-in for the identity of an ID token of a
// real OpenID provider, logged; and SLSA provenance attestations, which
// are no signature, and which a policy may require besides one, as bundles
// among the referrers and in cosign's old format, a DSSE envelope in the
// .att tag (`cosign attest --new-bundle-format=false`, pushed to a
// registry without the referrers API).
//
// Catches a verifier that reads only the project's own signer's output
// (cosign's layout, media types, Rekor bundle annotation, DSSE statement
// differ), one that takes a key's unlogged signature by default or refuses
// it under ignoreTlog without saying the log was not checked, one that
// takes another identity's certificate or refuses it without naming it,
// one that counts an attestation as a signature, and one that takes a
// signed digest without the attestation its policy requires, or with one
// by an untrusted key; one that reads no .att tag (a digest attested in
// cosign's old format refused for want of an attestation), takes an .att
// attestation for a signature, or takes an unlogged one by default.
func TestVerifyCosign(t *testing.T) {
	if _, err := os.Stat(cosigntest.Binary()); err != nil {
		t.Skipf("cosign %s is not built (%v): make fleet-build builds it into the fleet's cache (make test does)", cosigntest.Version, err)
	}
	r := newRegistry(t)
	// cosign's old format uses no referrers: a registry without the API.
	old := newRegistryOf(t, false)
	log, _ := newLog(t)
	users := []oidcop.User{
		{Name: "release-bot", Password: "pw-release", Email: "release-bot@example.com"},
		{Name: "mallory", Password: "pw-mallory", Email: "mallory@example.com"},
	}
	op, err := oidcop.Start(users, []oidcop.Client{{ID: fulciotest.Audience}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = op.Close() })
	fulcio, err := fulciotest.Start(op.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fulcio.Close() })
	cosign, err := cosigntest.New(t.TempDir(), log)
	if err != nil {
		t.Fatal(err)
	}
	if err := cosign.UseFulcio(fulcio); err != nil {
		t.Fatal(err)
	}
	release, err := cosign.GenerateKeyPair(t.Context(), "release")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cosign.GenerateKeyPair(t.Context(), "other"); err != nil {
		t.Fatal(err)
	}
	trustedRoot, err := os.ReadFile(cosign.TrustedRootFile())
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	for _, u := range users {
		if tokens[u.Name], err = op.IDToken(t.Context(), fulciotest.Audience, u.Name, u.Password); err != nil {
			t.Fatal(err)
		}
	}
	const slsaType = "https://slsa.dev/provenance/v1"
	var slsa []byte
	v, err := signature.New(r.access, map[string]signature.Policy{
		"shop": {
			Keys:        []signature.Key{{Name: "release", PEM: release, TrustedRoot: trustedRoot}},
			Identities:  []signature.Identity{{Name: "ci", Issuer: op.Issuer, Subject: `^(?:release-bot@example\.com)$`}},
			TrustedRoot: trustedRoot,
		},
		"lax": {Keys: []signature.Key{{Name: "release", PEM: release}}, IgnoreTlog: true},
		"attested": {
			Keys:         []signature.Key{{Name: "release", PEM: release, TrustedRoot: trustedRoot}},
			Attestations: []string{slsaType},
		},
		"lax-attested": {
			Keys:         []signature.Key{{Name: "release", PEM: release}},
			IgnoreTlog:   true,
			Attestations: []string{slsaType},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	keyed := func(key string, o cosigntest.Options) func(name.Digest) error {
		return func(d name.Digest) error { return cosign.Sign(t.Context(), key, d.String(), o) }
	}
	keyless := func(user string, f cosigntest.Format) func(name.Digest) error {
		return func(d name.Digest) error {
			return cosign.SignKeyless(t.Context(), d.String(), tokens[user], cosigntest.Options{Format: f})
		}
	}
	both := func(steps ...func(name.Digest) error) func(name.Digest) error {
		return func(d name.Digest) error {
			for _, step := range steps {
				if err := step(d); err != nil {
					return err
				}
			}
			return nil
		}
	}
	attest := func(key string) func(name.Digest) error {
		return func(d name.Digest) error { return cosign.Attest(t.Context(), key, d.String(), "slsaprovenance1", slsa) }
	}
	// attestOldAs attests in cosign's old format, the .att tag, with a
	// predicate of type typ (cosign's name or a URI).
	attestOldAs := func(typ, key string, o cosigntest.Options) func(name.Digest) error {
		o.Format = cosigntest.Attached
		return func(d name.Digest) error {
			return cosign.AttestWith(t.Context(), key, d.String(), typ, slsa, o)
		}
	}
	attestOld := func(key string, o cosigntest.Options) func(name.Digest) error {
		return attestOldAs("slsaprovenance1", key, o)
	}
	sigOld := keyed("release", cosigntest.Options{Format: cosigntest.Attached})
	slsa = []byte(`{"buildDefinition": {"buildType": "https://flotilla.test/build/v1", "externalParameters": {}},` +
		` "runDetails": {"builder": {"id": "https://flotilla.test/ci"}}}`)
	tests := []struct {
		name string
		sign func(name.Digest) error
		// want is who signed, or what the refusal says, per application.
		want map[string]string
		// inOld pushes the image to the registry without referrers.
		inOld bool
	}{
		{name: "a key's logged bundle", sign: keyed("release", cosigntest.Options{Format: cosigntest.Bundle}),
			want: map[string]string{"shop": "key release", "lax": "key release" + signature.TlogNotChecked}},
		{name: "a key's logged .sig tag", sign: keyed("release", cosigntest.Options{Format: cosigntest.Attached}),
			want: map[string]string{"shop": "key release", "lax": "key release" + signature.TlogNotChecked}},
		{name: "a key's unlogged bundle", sign: keyed("release", cosigntest.Options{Format: cosigntest.Bundle, NoTlog: true}),
			want: map[string]string{"shop": "error: no transparency-log entry", "lax": "key release" + signature.TlogNotChecked}},
		{name: "a key's unlogged .sig tag", sign: keyed("release", cosigntest.Options{Format: cosigntest.Attached, NoTlog: true}),
			want: map[string]string{"shop": "error: no transparency-log entry", "lax": "key release" + signature.TlogNotChecked}},
		{name: "another key's logged bundle", sign: keyed("other", cosigntest.Options{Format: cosigntest.Bundle}),
			want: map[string]string{"shop": "error: key release: ", "lax": "error: key release: "}},
		{name: "the trusted identity's keyless bundle", sign: keyless("release-bot", cosigntest.Bundle),
			want: map[string]string{"shop": "release-bot@example.com", "lax": "error: signed with a certificate, and the policy trusts no keyless identity"}},
		{name: "the trusted identity's keyless .sig tag", sign: keyless("release-bot", cosigntest.Attached),
			want: map[string]string{"shop": "release-bot@example.com"}},
		{name: "another identity's keyless bundle", sign: keyless("mallory", cosigntest.Bundle),
			want: map[string]string{"shop": "error: signed by mallory@example.com (OIDC issuer " + op.Issuer + "), which no trusted identity matches (ci: "}},
		{name: "another identity's keyless .sig tag", sign: keyless("mallory", cosigntest.Attached),
			want: map[string]string{"shop": "error: signed by mallory@example.com"}},
		{name: "a SLSA provenance attestation only", sign: attest("release"), want: map[string]string{
			"shop":     `error: the bundle is not a cosign signature (predicate "https://slsa.dev/provenance/v1")`,
			"attested": "error: no signature of ",
		}},
		{name: "a signature and a SLSA provenance attestation", sign: both(keyed("release", cosigntest.Options{Format: cosigntest.Bundle}), attest("release")), want: map[string]string{
			"shop":     "key release",
			"attested": "key release; " + slsaType + " attested by key release",
		}},
		{name: "a signature and another key's attestation", sign: both(keyed("release", cosigntest.Options{Format: cosigntest.Bundle}), attest("other")), want: map[string]string{
			"attested": "error: is signed, but carries no attestation of type " + slsaType + " by a trusted signer (referrer ",
		}},
		{name: "a signature without an attestation", sign: keyed("release", cosigntest.Options{Format: cosigntest.Attached}), want: map[string]string{
			"attested": "error: is signed, but carries no attestation of type " + slsaType + " by a trusted signer",
		}},
		{name: "a .sig signature and a logged .att attestation", inOld: true, sign: both(sigOld, attestOld("release", cosigntest.Options{})), want: map[string]string{
			"shop":         "key release",
			"attested":     "key release; " + slsaType + " attested by key release",
			"lax-attested": "key release" + signature.TlogNotChecked + "; " + slsaType + " attested by key release" + signature.TlogNotChecked,
		}},
		{name: "a bundle signature and a logged .att attestation", sign: both(keyed("release", cosigntest.Options{Format: cosigntest.Bundle}), attestOld("release", cosigntest.Options{})), want: map[string]string{
			"attested": "key release; " + slsaType + " attested by key release",
		}},
		{name: "a logged .att attestation only", inOld: true, sign: attestOld("release", cosigntest.Options{}), want: map[string]string{
			"shop":     "error: is not signed",
			"attested": "error: no signature of ",
		}},
		// An attestation whose statement claims to be cosign's signature
		// of the digest is still an attestation.
		{name: "an .att attestation of cosign's signature predicate", inOld: true, sign: attestOldAs(signature.CosignSignPredicate, "release", cosigntest.Options{}), want: map[string]string{
			"attested": `error: .att layer 0: an attestation (predicate "` + signature.CosignSignPredicate + `"), not a signature`,
		}},
		{name: "a .sig signature and another key's .att attestation", inOld: true, sign: both(sigOld, attestOld("other", cosigntest.Options{})), want: map[string]string{
			"attested": "error: .att layer 0: key release: ",
		}},
		{name: "a .sig signature and an unlogged .att attestation", inOld: true, sign: both(sigOld, attestOld("release", cosigntest.Options{NoTlog: true})), want: map[string]string{
			"attested":     "error: .att layer 0: " + signature.ErrNoTlogEntry.Error(),
			"lax-attested": "key release" + signature.TlogNotChecked + "; " + slsaType + " attested by key release" + signature.TlogNotChecked,
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := r
			if tt.inOld {
				in = old
			}
			d := in.push(t, "acme/cosign-"+string(rune('a'+i)))
			if err := tt.sign(d); err != nil {
				t.Fatalf("signing: %v", err)
			}
			for app, want := range tt.want {
				by, err := v.Verify(t.Context(), app, d.Context().Name(), d.DigestStr())
				wantErr, refused := strings.CutPrefix(want, "error: ")
				switch {
				case !refused && err != nil:
					t.Errorf("%s: Verify: %v, want signed by %q", app, err, want)
				case !refused && by != want:
					t.Errorf("%s: signed by %q, want %q", app, by, want)
				case refused && (err == nil || !strings.Contains(err.Error(), wantErr)):
					t.Errorf("%s: Verify = %q, %v; want an error saying %q", app, by, err, wantErr)
				case refused && !fault.IsPermanent(err):
					t.Errorf("%s: error %v is not permanent", app, err)
				}
			}
		})
	}
	if got := fulcio.Issued(); len(got) != 4 {
		t.Errorf("Fulcio certified %v, want the four keyless signatures'", got)
	}
}
