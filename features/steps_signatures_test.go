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

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/testkit/sigtest"
)

func (s *scenario) registerSignatureSteps(sc *godog.ScenarioContext) {
	sc.Step(`^the application accepts only images signed with the key "([^"]*)"$`, s.acceptsKey)
	sc.Step(`^wave (\d+) takes unsigned images$`, s.waveTakesUnsigned)
	sc.Step(`^version "([^"]*)" signed with the key "([^"]*)" is pushed$`, s.pushSigned)
	sc.Step(`^version "([^"]*)" is signed afterwards with the key "([^"]*)"$`, s.signAfterwards)
	sc.Step(`^the push of "([^"]*)" is rejected saying "([^"]*)"$`, s.pushRejected)
	sc.Step(`^the rollout of "([^"]*)" records the signature of the key "([^"]*)"$`, s.signatureRecorded)
	sc.Step(`^the rollout of "([^"]*)" signed with the key "([^"]*)" succeeds$`, s.signedRolloutSucceeds)
}

// key returns the scenario's signing key of that name, made on first use.
func (s *scenario) key(keyName string) *sigtest.Keypair {
	if s.w.signingKeys == nil {
		s.w.signingKeys = map[string]*sigtest.Keypair{}
	}
	if s.w.signingKeys[keyName] == nil {
		s.w.signingKeys[keyName] = sigtest.NewKeypair()
	}
	return s.w.signingKeys[keyName]
}

// acceptsKey writes the key's cosign.pub and makes it the application's
// only trusted signer.
func (s *scenario) acceptsKey(keyName string) error {
	p := filepath.Join(s.w.dir, keyName+".pub")
	if err := os.WriteFile(p, s.key(keyName).PublicKeyPEM(), 0o600); err != nil {
		return err
	}
	s.w.verify = map[string]any{"signatures": []map[string]any{{"name": keyName, "key": map[string]string{"file": p}}}}
	return nil
}

func (s *scenario) waveTakesUnsigned(wave int) error {
	s.wavePolicy(wave, "requireSignature", false)
	return nil
}

// pushSigned pushes version, signs its digest the way `cosign sign --key`
// does, then notifies flotilla.
func (s *scenario) pushSigned(ctx context.Context, version, keyName string) error {
	body, err := s.push(version)
	if err != nil {
		return err
	}
	d, err := name.NewDigest(s.w.regHost + "/" + s.w.repo + "@" + s.w.digests[version])
	if err != nil {
		return err
	}
	if err := sigtest.SignLegacy(ctx, d, s.key(keyName), nil); err != nil {
		return fmt.Errorf("signing %s: %w", d, err)
	}
	return s.notify(ctx, body)
}

// signAfterwards signs version's digest as `cosign sign --key` does after
// the image was pushed: the registry then notifies the push of the
// signature's tag (sha256-<hex>.sig), and nothing else.
func (s *scenario) signAfterwards(ctx context.Context, version, keyName string) error {
	d, err := name.NewDigest(s.w.regHost + "/" + s.w.repo + "@" + s.w.digests[version])
	if err != nil {
		return err
	}
	if err := sigtest.SignLegacy(ctx, d, s.key(keyName), nil); err != nil {
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
