package features

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/testkit/cosigntest"
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
}

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
	sc.After(func(ctx context.Context, _ *godog.Scenario, err error) (context.Context, error) {
		if s.w != nil && s.w.signing != nil {
			_ = s.w.signing.log.Close()
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
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	var ro struct{ SignedBy string }
	if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
		return err
	}
	if ro.SignedBy != "key "+keyName {
		return fmt.Errorf("the rollout of %s records the signature of %q, want key %s", version, ro.SignedBy, keyName)
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

// workloadsUnchanged reads the image of the workload and its primary in
// every cluster, then reads them again every 200 ms for the given time:
// any change (a refused image applied, then reverted, included) fails.
func (s *scenario) workloadsUnchanged(ctx context.Context, seconds int) error {
	type obj struct{ cluster, name string }
	read := func() (map[obj]string, error) {
		got := map[obj]string{}
		for _, c := range s.w.clusters {
			for _, d := range []string{s.w.workload, s.w.workload + "-primary"} {
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
