package features

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/testkit/cosigntest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fulciotest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/oidcop"
	"github.com/flotilla-cd/flotilla/pkg/testkit/rekortest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/sigtest"
)

// signingKit is what a scenario signs with: the real cosign CLI, logging
// in a Rekor stand-in (rekortest, on sigstore-go's VirtualSigstore) that
// lives as long as the scenario.
type signingKit struct {
	log    *rekortest.Log
	cosign *cosigntest.Signer
	keys   map[string]bool // generated key pairs, by name
	// Keyless: the OpenID provider whose users sign (oidcop, as the SSO
	// scenarios run it) and the Fulcio certifying their tokens.
	op     *oidcop.Provider
	fulcio *fulciotest.Server
}

// keylessPassword is every keyless signer's password at the provider.
const keylessPassword = "a CI job's password"

func (s *scenario) registerSignatureSteps(sc *godog.ScenarioContext) {
	sc.Step(`^the application accepts only images signed with the key "([^"]*)"$`, s.acceptsKey)
	sc.Step(`^wave (\d+) takes unsigned images$`, s.waveTakesUnsigned)
	sc.Step(`^version "([^"]*)" signed with the key "([^"]*)" is pushed$`, s.pushSigned)
	sc.Step(`^version "([^"]*)" signed with the key "([^"]*)" in the \.sig tag is pushed$`, s.pushSignedAttached)
	sc.Step(`^version "([^"]*)" signed with the key "([^"]*)" without a transparency-log entry is pushed$`, s.pushSignedNoTlog)
	sc.Step(`^version "([^"]*)" signed with the key "([^"]*)" in a tampered bundle is pushed$`, s.pushTampered)
	sc.Step(`^version "([^"]*)" is signed afterwards with the key "([^"]*)"$`, s.signAfterwards)
	sc.Step(`^the push of "([^"]*)" is rejected saying "([^"]*)"$`, s.pushRejected)
	sc.Step(`^the rollout of "([^"]*)" records the signature of the key "([^"]*)"$`, s.signatureRecorded)
	sc.Step(`^the rollout of "([^"]*)" signed with the key "([^"]*)" succeeds$`, s.signedRolloutSucceeds)
	sc.Step(`^the workloads of every cluster stay unchanged for (\d+) seconds$`, s.workloadsUnchanged)
	sc.Step(`^the application accepts only images signed with the key "([^"]*)", ignoring the transparency log$`, s.acceptsKeyIgnoringTlog)
	sc.Step(`^the rollout of "([^"]*)" records the signature of the key "([^"]*)", its transparency log not checked$`, s.signatureRecordedTlogSkipped)
	sc.Step(`^the application accepts only images signed with the key "([^"]*)" and attested by it with "([^"]*)"$`, s.acceptsKeyAttested)
	sc.Step(`^version "([^"]*)" signed with the key "([^"]*)" and attested with "([^"]*)" by the key "([^"]*)" is pushed$`, s.pushSignedAttested)
	sc.Step(`^the rollout of "([^"]*)" records "([^"]*)" as its signer$`, s.signerRecorded)
	sc.Step(`^an OpenID provider where "([^"]*)" and "([^"]*)" log in, and a Fulcio trusting its tokens$`, s.keylessProvider)
	sc.Step(`^the application accepts only images signed keylessly by "([^"]*)" of that provider$`, s.acceptsIdentity)
	sc.Step(`^version "([^"]*)" signed keylessly by "([^"]*)" is pushed$`, s.pushSignedKeyless)
	sc.Step(`^the rollout of "([^"]*)" records the keyless signature of "([^"]*)"$`, s.keylessRecorded)
	sc.Step(`^Fulcio certified "([^"]*)" then "([^"]*)", and the Rekor log holds (\d+) entries$`, s.fulcioCertified)
	sc.After(func(ctx context.Context, _ *godog.Scenario, err error) (context.Context, error) {
		if s.w != nil && s.w.signing != nil {
			_ = s.w.signing.log.Close()
			if s.w.signing.fulcio != nil {
				_ = s.w.signing.fulcio.Close()
			}
			if s.w.signing.op != nil {
				_ = s.w.signing.op.Close()
			}
			s.w.signing = nil
		}
		return ctx, err
	})
}

// kit starts the scenario's Rekor stand-in and cosign on first use.
func (s *scenario) kit() (*signingKit, error) {
	if s.w.signing != nil {
		return s.w.signing, nil
	}
	l, err := rekortest.Start()
	if err != nil {
		return nil, err
	}
	c, err := cosigntest.New(filepath.Join(s.w.dir, "cosign"), l)
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	s.w.signing = &signingKit{log: l, cosign: c, keys: map[string]bool{}}
	return s.w.signing, nil
}

// key runs `cosign generate-key-pair` for keyName on first use.
func (s *scenario) key(ctx context.Context, keyName string) (*signingKit, error) {
	k, err := s.kit()
	if err != nil {
		return nil, err
	}
	if !k.keys[keyName] {
		if _, err := k.cosign.GenerateKeyPair(ctx, keyName); err != nil {
			return nil, err
		}
		k.keys[keyName] = true
	}
	return k, nil
}

// acceptsKey makes the key's cosign.pub the application's only trusted
// signer, its signatures to be found in the scenario's Rekor log (the
// default policy: no ignoreTlog).
func (s *scenario) acceptsKey(ctx context.Context, keyName string) error {
	k, err := s.key(ctx, keyName)
	if err != nil {
		return err
	}
	s.w.verify = map[string]any{"signatures": []map[string]any{{
		"name": keyName, "key": map[string]string{"file": k.cosign.PublicKeyFile(keyName)},
		"trustedRoot": map[string]string{"file": k.cosign.TrustedRootFile()},
	}}}
	return nil
}

// acceptsKeyIgnoringTlog trusts the key's cosign.pub with verify.ignoreTlog:
// its signatures need no transparency-log entry (and the key no trusted
// root).
func (s *scenario) acceptsKeyIgnoringTlog(ctx context.Context, keyName string) error {
	k, err := s.key(ctx, keyName)
	if err != nil {
		return err
	}
	s.w.verify = map[string]any{"ignoreTlog": true, "signatures": []map[string]any{{
		"name": keyName, "key": map[string]string{"file": k.cosign.PublicKeyFile(keyName)},
	}}}
	return nil
}

// acceptsKeyAttested is acceptsKey, and the digest must also carry an
// attestation of predicateType signed by the key.
func (s *scenario) acceptsKeyAttested(ctx context.Context, keyName, predicateType string) error {
	if err := s.acceptsKey(ctx, keyName); err != nil {
		return err
	}
	s.w.verify["attestations"] = []map[string]any{{"predicateType": predicateType}}
	return nil
}

// predicates are the predicates `cosign attest --type` is given, by
// cosign's type name.
var predicates = map[string]string{
	// SLSA provenance v1 (https://slsa.dev/provenance/v1), as a CI job's
	// builder writes it.
	"slsaprovenance1": `{"buildDefinition": {"buildType": "https://flotilla.test/build/v1",` +
		` "externalParameters": {"repository": "https://git.flotilla.test/demo/podinfo", "ref": "refs/tags/v1"}},` +
		` "runDetails": {"builder": {"id": "https://flotilla.test/ci"}, "metadata": {"invocationId": "features"}}}`,
}

// pushSignedAttested pushes version, signs its digest with `cosign sign
// --key` (a logged bundle), attests it with `cosign attest --key
// --type` (a logged bundle of an in-toto statement), then notifies
// flotilla of the push.
func (s *scenario) pushSignedAttested(ctx context.Context, version, keyName, predicateType, attester string) error {
	predicate, ok := predicates[predicateType]
	if !ok {
		return fmt.Errorf("no predicate of type %s for cosign attest", predicateType)
	}
	body, err := s.push(version)
	if err != nil {
		return err
	}
	d, err := s.digestRef(version)
	if err != nil {
		return err
	}
	k, err := s.key(ctx, keyName)
	if err != nil {
		return err
	}
	if _, err := s.key(ctx, attester); err != nil {
		return err
	}
	if err := k.cosign.Sign(ctx, keyName, d.String(), cosigntest.Options{Format: cosigntest.Bundle}); err != nil {
		return fmt.Errorf("signing %s: %w", d, err)
	}
	if err := k.cosign.Attest(ctx, attester, d.String(), predicateType, []byte(predicate)); err != nil {
		return fmt.Errorf("attesting %s: %w", d, err)
	}
	return s.notify(ctx, body)
}

func (s *scenario) signerRecorded(ctx context.Context, version, want string) error {
	by, err := s.signedBy(ctx, version)
	if err != nil {
		return err
	}
	if by != want {
		return fmt.Errorf("the rollout of %s records the signer %q, want %q", version, by, want)
	}
	return nil
}

// keylessProvider starts an OpenID provider (pkg/testkit/oidcop, the SSO
// scenarios' provider) where the two e-mails' users log in, with Fulcio's
// client "sigstore", and a Fulcio stand-in trusting its ID tokens; the
// scenario's cosign signs keylessly with its certificates.
func (s *scenario) keylessProvider(a, b string) error {
	k, err := s.kit()
	if err != nil {
		return err
	}
	var users []oidcop.User
	for _, email := range []string{a, b} {
		users = append(users, oidcop.User{Name: strings.Split(email, "@")[0], Password: keylessPassword, Email: email})
	}
	if k.op, err = oidcop.Start(users, []oidcop.Client{{ID: fulciotest.Audience}}); err != nil {
		return err
	}
	if k.fulcio, err = fulciotest.Start(k.op.Issuer); err != nil {
		return err
	}
	return k.cosign.UseFulcio(k.fulcio)
}

// acceptsIdentity makes the e-mail, as certified for the provider's
// tokens, the application's only trusted signer, under the trusted root
// naming the Fulcio's CA and the Rekor log.
func (s *scenario) acceptsIdentity(email string) error {
	k := s.w.signing
	if k == nil || k.op == nil {
		return errors.New("no OpenID provider and Fulcio: their step comes first")
	}
	s.w.verify = map[string]any{"signatures": []map[string]any{{
		"name": "ci", "keyless": map[string]any{
			"issuer": k.op.Issuer, "subject": regexp.QuoteMeta(email),
			"trustedRoot": map[string]string{"file": k.cosign.TrustedRootFile()},
		},
	}}}
	return nil
}

// pushSignedKeyless pushes version, then signs its digest as a CI job
// does: an ID token of the e-mail's user from the provider (the device
// flow), and `cosign sign --fulcio-url --rekor-url --identity-token`
// (an ephemeral key, Fulcio's certificate, the signature logged in Rekor,
// a bundle among the referrers); then notifies flotilla of the push.
func (s *scenario) pushSignedKeyless(ctx context.Context, version, email string) error {
	k := s.w.signing
	if k == nil || k.op == nil {
		return errors.New("no OpenID provider and Fulcio: their step comes first")
	}
	body, err := s.push(version)
	if err != nil {
		return err
	}
	d, err := s.digestRef(version)
	if err != nil {
		return err
	}
	tok, err := k.op.IDToken(ctx, fulciotest.Audience, strings.Split(email, "@")[0], keylessPassword)
	if err != nil {
		return fmt.Errorf("the ID token of %s: %w", email, err)
	}
	if err := k.cosign.SignKeyless(ctx, d.String(), tok, cosigntest.Options{Format: cosigntest.Bundle}); err != nil {
		return fmt.Errorf("signing %s keylessly as %s: %w", d, email, err)
	}
	return s.notify(ctx, body)
}

// signedBy reads who the rollout of version records as its signer.
func (s *scenario) signedBy(ctx context.Context, version string) (string, error) {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return "", err
	}
	var ro struct{ SignedBy string }
	if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
		return "", err
	}
	return ro.SignedBy, nil
}

func (s *scenario) keylessRecorded(ctx context.Context, version, email string) error {
	by, err := s.signedBy(ctx, version)
	if err != nil {
		return err
	}
	if by != email {
		return fmt.Errorf("the rollout of %s records the signature of %q, want %s", version, by, email)
	}
	return nil
}

func (s *scenario) signatureRecordedTlogSkipped(ctx context.Context, version, keyName string) error {
	by, err := s.signedBy(ctx, version)
	if err != nil {
		return err
	}
	if want := "key " + keyName + " (transparency log not checked: verify.ignoreTlog)"; by != want {
		return fmt.Errorf("the rollout of %s records the signature of %q, want %q", version, by, want)
	}
	return nil
}

// fulcioCertified reads the stand-ins: whom Fulcio certified, in order,
// and how many entries the Rekor log took (the keyless signatures went
// through the transparency log).
func (s *scenario) fulcioCertified(a, b string, entries int) error {
	k := s.w.signing
	if k == nil || k.fulcio == nil {
		return errors.New("no Fulcio")
	}
	if got := k.fulcio.Issued(); !slices.Equal(got, []string{a, b}) {
		return fmt.Errorf("Fulcio certified %v, want [%s %s]", got, a, b)
	}
	if got := k.log.Entries(); got != int64(entries) {
		return fmt.Errorf("the Rekor log holds %d entries, want %d", got, entries)
	}
	return nil
}

func (s *scenario) waveTakesUnsigned(wave int) error {
	s.wavePolicy(wave, "requireSignature", false)
	return nil
}

func (s *scenario) digestRef(version string) (name.Digest, error) {
	return name.NewDigest(s.w.regHost + "/" + s.w.repo + "@" + s.w.digests[version])
}

// pushSignedWith pushes version, signs its digest with `cosign sign
// --key` as o says, then notifies flotilla of the push.
func (s *scenario) pushSignedWith(ctx context.Context, version, keyName string, o cosigntest.Options) error {
	body, err := s.push(version)
	if err != nil {
		return err
	}
	d, err := s.digestRef(version)
	if err != nil {
		return err
	}
	k, err := s.key(ctx, keyName)
	if err != nil {
		return err
	}
	if err := k.cosign.Sign(ctx, keyName, d.String(), o); err != nil {
		return fmt.Errorf("signing %s: %w", d, err)
	}
	return s.notify(ctx, body)
}

// pushSigned signs as cosign v3 does by default: a Sigstore bundle,
// logged in Rekor, attached as an OCI referrer.
func (s *scenario) pushSigned(ctx context.Context, version, keyName string) error {
	return s.pushSignedWith(ctx, version, keyName, cosigntest.Options{Format: cosigntest.Bundle})
}

// pushSignedAttached signs in the .sig tag (--new-bundle-format=false),
// logged in Rekor (the Rekor bundle annotation).
func (s *scenario) pushSignedAttached(ctx context.Context, version, keyName string) error {
	return s.pushSignedWith(ctx, version, keyName, cosigntest.Options{Format: cosigntest.Attached})
}

// pushSignedNoTlog signs a bundle with a signing config naming no log.
func (s *scenario) pushSignedNoTlog(ctx context.Context, version, keyName string) error {
	return s.pushSignedWith(ctx, version, keyName, cosigntest.Options{Format: cosigntest.Bundle, NoTlog: true})
}

// pushTampered pushes version with the bundle cosign made for it (logged
// in Rekor), its log entry's integrated time moved an hour back: the
// signature and the entry's body still match, the log's signed entry
// timestamp no longer does. cosign cannot be made to attach that: the
// project's own attach (sigtest) pushes it, as cosign would.
func (s *scenario) pushTampered(ctx context.Context, version, keyName string) error {
	body, err := s.push(version)
	if err != nil {
		return err
	}
	d, err := s.digestRef(version)
	if err != nil {
		return err
	}
	k, err := s.key(ctx, keyName)
	if err != nil {
		return err
	}
	file := filepath.Join(s.w.dir, "cosign", "bundle-"+version+".json")
	if err := k.cosign.SignToFile(ctx, keyName, d.String(), file, false); err != nil {
		return fmt.Errorf("signing %s: %w", d, err)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	tampered, err := tamperIntegratedTime(raw)
	if err != nil {
		return err
	}
	if err := sigtest.AttachBundle(d, tampered, "https://sigstore.dev/cosign/sign/v1", remote.WithContext(ctx)); err != nil {
		return err
	}
	return s.notify(ctx, body)
}

// tamperIntegratedTime moves the integrated time of a bundle's log
// entries an hour back.
func tamperIntegratedTime(raw []byte) ([]byte, error) {
	var b map[string]any
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, err
	}
	vm, _ := b["verificationMaterial"].(map[string]any)
	entries, _ := vm["tlogEntries"].([]any)
	if len(entries) == 0 {
		return nil, fmt.Errorf("cosign's bundle has no log entry to tamper with")
	}
	for _, e := range entries {
		m := e.(map[string]any)
		var t int64
		if _, err := fmt.Sscan(fmt.Sprint(m["integratedTime"]), &t); err != nil {
			return nil, fmt.Errorf("integratedTime %v: %w", m["integratedTime"], err)
		}
		m["integratedTime"] = fmt.Sprint(t - 3600)
	}
	return json.Marshal(b)
}

// signAfterwards signs version's digest with `cosign sign --key` in the
// .sig tag after the image was pushed: the registry then notifies the
// push of the signature's tag (sha256-<hex>.sig), and nothing else.
func (s *scenario) signAfterwards(ctx context.Context, version, keyName string) error {
	d, err := s.digestRef(version)
	if err != nil {
		return err
	}
	k, err := s.key(ctx, keyName)
	if err != nil {
		return err
	}
	if err := k.cosign.Sign(ctx, keyName, d.String(), cosigntest.Options{Format: cosigntest.Attached}); err != nil {
		return fmt.Errorf("signing %s: %w", d, err)
	}
	tag := strings.Replace(d.DigestStr(), ":", "-", 1) + ".sig"
	desc, err := remote.Head(d.Context().Tag(tag), remote.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("reading the signature %s: %w", tag, err)
	}
	body, err := json.Marshal(map[string]any{"events": []map[string]any{{
		"id": randomHex(8), "timestamp": time.Now().UTC().Format(time.RFC3339Nano), "action": "push",
		"target": map[string]any{
			"mediaType": string(desc.MediaType), "digest": desc.Digest.String(), "size": desc.Size, "length": desc.Size,
			"repository": s.w.repo, "url": fmt.Sprintf("http://%s/v2/%s/manifests/%s", s.w.regHost, s.w.repo, desc.Digest), "tag": tag,
		},
		"request": map[string]any{"id": randomHex(8), "addr": "127.0.0.1:40000", "host": s.w.regHost, "method": "PUT", "useragent": "cosign"},
		"actor":   map[string]any{"name": "ci"},
		"source":  map[string]any{"addr": "registry:5000", "instanceID": "features"},
	}}})
	if err != nil {
		return err
	}
	return s.notify(ctx, body)
}

func (s *scenario) pushRejected(ctx context.Context, version, reason string) error {
	e, err := s.w.sink.waitFor(ctx, "push of "+version+" rejected", func(e cloudevents.Event) bool {
		if e.Type() != events.TypeImageRejected {
			return false
		}
		p, err := events.Decode[events.ImageRejected](e)
		return err == nil && p.Tag == version
	})
	if err != nil {
		return err
	}
	p, _ := events.Decode[events.ImageRejected](e)
	if !strings.Contains(p.Reason, reason) {
		return fmt.Errorf("the push of %s was rejected saying %q, want %q", version, p.Reason, reason)
	}
	return nil
}

func (s *scenario) signatureRecorded(ctx context.Context, version, keyName string) error {
	by, err := s.signedBy(ctx, version)
	if err != nil {
		return err
	}
	if by != "key "+keyName {
		return fmt.Errorf("the rollout of %s records the signature of %q, want key %s", version, by, keyName)
	}
	return nil
}

// signedRolloutSucceeds waits for the rollout of version that records the
// key's signature (an earlier one may have taken it unsigned) to succeed.
func (s *scenario) signedRolloutSucceeds(ctx context.Context, version, keyName string) error {
	checked := map[string]bool{}
	e, err := s.w.sink.waitFor(ctx, "rollout of "+version+" signed with "+keyName+" started", func(e cloudevents.Event) bool {
		if e.Type() != events.TypeRolloutStarted {
			return false
		}
		p, err := events.Decode[events.RolloutStarted](e)
		if err != nil || p.Tag != version || checked[p.RolloutID] {
			return false
		}
		checked[p.RolloutID] = true
		var ro struct{ SignedBy string }
		return s.getJSON(ctx, "/api/v1/rollouts/"+p.RolloutID, &ro) == nil && ro.SignedBy == "key "+keyName
	})
	if err != nil {
		return err
	}
	p, _ := events.Decode[events.RolloutStarted](e)
	id := p.RolloutID
	end, err := s.w.sink.waitFor(ctx, "end of rollout "+id, func(e cloudevents.Event) bool {
		return (e.Type() == events.TypeRolloutSucceeded || e.Type() == events.TypeRolloutRolledBack) && events.RolloutID(e) == id
	})
	if err != nil {
		return err
	}
	if end.Type() != events.TypeRolloutSucceeded {
		return fmt.Errorf("rollout %s of %s ended %s: %s", id, version, end.Type(), end.Data())
	}
	return nil
}

// workloadsUnchanged reads the image of the workload and its primary (and
// the second application's, a release set's other member's) in
// every cluster, then reads them again every 200 ms for the given time:
// any change (a refused image applied, then reverted, included) fails.
func (s *scenario) workloadsUnchanged(ctx context.Context, seconds int) error {
	type obj struct{ cluster, name string }
	read := func() (map[obj]string, error) {
		got := map[obj]string{}
		names := []string{s.w.workload, s.w.workload + "-primary"}
		if s.w.second != nil { // a second application's, a release set's other member's
			names = append(names, s.w.second.name, s.w.second.name+"-primary")
		}
		for _, c := range s.w.clusters {
			for _, d := range names {
				img, err := s.imageOf(ctx, c, d)
				if apierrors.IsNotFound(err) {
					img = "(none)"
				} else if err != nil {
					return nil, err
				}
				got[obj{c.Name, d}] = img
			}
		}
		return got, nil
	}
	first, err := read()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		now, err := read()
		if err != nil {
			return err
		}
		for o, img := range now {
			if img != first[o] {
				return fmt.Errorf("%s in %s changed from %s to %s", o.name, o.cluster, first[o], img)
			}
		}
	}
	return nil
}
