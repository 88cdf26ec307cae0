package main

import (
	"bytes"
	"fmt"
	"math/rand"
	"net/url"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/events/intake"
)

// profile is how the deliveries of one sender type look: which fixtures
// they are made from and which headers and query a fixture is sent with.
type profile struct {
	// dirs are its fixture directories under events/intake/testdata.
	dirs []string
	// prepare sets what a fixture is sent with (content type, the sender's
	// event and delivery headers, query) before its body is mutated.
	prepare func(r *rand.Rand, f fixture, req *request)
	// encode, when set, runs after the body was mutated and before it is
	// signed: form encoding, CloudEvents' binary and batch modes.
	encode func(r *rand.Rand, req *request)
}

// profiles has one entry per sender type of intake.SenderTypes; a type
// without one is an error (profileFor), so a new sender cannot go unfuzzed.
var profiles = map[string]profile{
	"dockerhub":    {dirs: []string{"dockerhub"}, prepare: contentType("application/json")},
	"quay":         {dirs: []string{"quay"}, prepare: contentType("application/json")},
	"acr":          {dirs: []string{"acr"}, prepare: contentType("application/json")},
	"gar":          {dirs: []string{"gar"}, prepare: contentType("application/json")},
	"ecr":          {dirs: []string{"ecr"}, prepare: contentType("application/json; charset=utf-8")},
	"artifactory":  {dirs: []string{"artifactory"}, prepare: contentType("application/json")},
	"harbor":       {dirs: []string{"harbor"}, prepare: prepareHarbor, encode: encodeHarbor},
	"distribution": {dirs: []string{"distribution"}, prepare: prepareDistribution},
	"github":       {dirs: []string{"github", "ghcr"}, prepare: prepareGitHub, encode: maybeForm},
	"nexus":        {dirs: []string{"nexus"}, prepare: prepareNexus},
	"gitlab":       {dirs: []string{"gitlab"}, prepare: prepareGitLab},
	"gitea":        {dirs: []string{"gitea"}, prepare: prepareGitea(false), encode: maybeForm},
	"forgejo":      {dirs: []string{"gitea"}, prepare: prepareGitea(true), encode: maybeForm},
	"bitbucket": {dirs: []string{"bitbucket"}, prepare: prepareBitbucket("X-Request-UUID", map[string]string{
		"pullrequest_created.json": "pullrequest:created",
	}, "repo:push")},
	"bitbucket-server": {dirs: []string{"bitbucket-server"}, prepare: prepareBitbucket("X-Request-Id", map[string]string{
		"ping.json": "diagnostics:ping", "pr_opened.json": "pr:opened",
	}, "repo:refs_changed")},
	"flagger":     {dirs: []string{"flagger"}, prepare: prepareFlagger},
	"tekton":      {dirs: []string{"tekton"}, prepare: prepareTekton},
	"cloudevents": {dirs: []string{"cloudevents"}, prepare: prepareCloudEvents, encode: encodeCloudEvents},
}

func profileFor(senderType string) (profile, error) {
	p, ok := profiles[senderType]
	if !ok {
		return profile{}, fmt.Errorf("no fuzz profile for sender type %q: add one to deploy/tools/fuzzlive/senders.go", senderType)
	}
	return p, nil
}

func contentType(ct string) func(*rand.Rand, fixture, *request) {
	return func(_ *rand.Rand, _ fixture, req *request) { req.Header.Set("Content-Type", ct) }
}

// uuid is a random version-4 UUID from r.
func uuid(r *rand.Rand) string {
	b := make([]byte, 16)
	r.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.Intn(len(xs))] }

func prepareHarbor(_ *rand.Rand, f fixture, req *request) {
	if strings.HasPrefix(f.Name, "cloudevents_") {
		req.Header.Set("Content-Type", mediaCloudEvent)
		return
	}
	req.Header.Set("Content-Type", "application/json")
}

// encodeHarbor sends Harbor's CloudEvents fixtures in any CloudEvents mode.
func encodeHarbor(r *rand.Rand, req *request) {
	if strings.HasPrefix(req.Fixture, "harbor/cloudevents_") {
		encodeCloudEventModes(r, req)
	}
}

func prepareDistribution(r *rand.Rand, _ fixture, req *request) {
	req.Header.Set("Content-Type", pick(r,
		"application/vnd.docker.distribution.events.v2+json",
		"application/vnd.docker.distribution.events.v1+json",
		"application/json"))
}

func prepareGitHub(r *rand.Rand, f fixture, req *request) {
	event := "push"
	switch {
	case f.Dir == "github" && f.Name == "ping.json":
		event = "ping"
	case f.Dir == "ghcr" && strings.HasPrefix(f.Name, "registry_package"):
		event = "registry_package"
	case f.Dir == "ghcr":
		event = "package"
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", uuid(r))
	req.Header.Set("User-Agent", "GitHub-Hookshot/044aadd")
}

// maybeForm form-encodes one delivery in five, as GitHub and Gitea do with
// content type "form": the JSON in a "payload" field.
func maybeForm(r *rand.Rand, req *request) {
	if r.Intn(5) != 0 {
		return
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Body = []byte(url.Values{"payload": {string(req.Body)}}.Encode())
	req.Mutations = append(req.Mutations, "form-encoded")
}

func prepareNexus(r *rand.Rand, f fixture, req *request) {
	webhook := "rm:repository:component"
	switch f.Name {
	case "asset_created.json":
		webhook = "rm:repository:asset"
	case "audit.json":
		webhook = "rm:audit"
	}
	req.Header.Set("Content-Type", "application/json; charset=UTF-8")
	req.Header.Set("X-Nexus-Webhook-Id", webhook)
	req.Header.Set("X-Nexus-Webhook-Delivery", uuid(r))
}

func prepareGitLab(r *rand.Rand, f fixture, req *request) {
	event := "Push Hook"
	switch {
	case strings.HasPrefix(f.Name, "tag_"):
		event = "Tag Push Hook"
	case strings.HasPrefix(f.Name, "system_hook"):
		event = "System Hook"
	case f.Name == "merge_request.json":
		event = "Merge Request Hook"
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Gitlab-Event", event)
	req.Header.Set("X-Gitlab-Instance", "https://gitlab.example.com")
	req.Header.Set("Idempotency-Key", uuid(r))
	req.Header.Set("X-Gitlab-Event-UUID", uuid(r))
}

func prepareGitea(forgejo bool) func(*rand.Rand, fixture, *request) {
	return func(r *rand.Rand, f fixture, req *request) {
		event := "push"
		switch f.Name {
		case "create.json":
			event = "create"
		case "delete.json":
			event = "delete"
		}
		id := uuid(r)
		req.Header.Set("Content-Type", "application/json")
		if !forgejo || r.Intn(2) == 0 {
			req.Header.Set("X-Gitea-Event", event)
			req.Header.Set("X-Gitea-Delivery", id)
			req.Header.Set("X-GitHub-Event", event)
			req.Header.Set("X-GitHub-Delivery", id)
		}
		if forgejo {
			req.Header.Set("X-Forgejo-Event", event)
			req.Header.Set("X-Forgejo-Delivery", id)
		}
	}
}

func prepareBitbucket(deliveryHeader string, events map[string]string, push string) func(*rand.Rand, fixture, *request) {
	return func(r *rand.Rand, f fixture, req *request) {
		event, ok := events[f.Name]
		if !ok {
			event = push
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Event-Key", event)
		req.Header.Set(deliveryHeader, uuid(r))
	}
}

var gateTypes = []string{
	intake.GateConfirmRollout, intake.GatePreRollout, intake.GateRollout, intake.GateConfirmTrafficIncrease,
	intake.GateConfirmPromotion, intake.GatePostRollout, intake.GateRollback,
}

func prepareFlagger(r *rand.Rand, f fixture, req *request) {
	req.Header.Set("Content-Type", "application/json")
	req.Query = url.Values{}
	if f.Name == "gate.json" && r.Intn(10) != 0 || r.Intn(10) == 0 {
		req.Query.Set("gate", pick(r, gateTypes...))
	}
	// Flagger events name their cluster in metadata or in the hook's URL.
	if !bytes.Contains(f.Body, []byte(`"cluster"`)) || r.Intn(3) == 0 {
		req.Query.Set("cluster", pick(r, "eu-1", "c1", "us-2"))
	}
}

func prepareTekton(r *rand.Rand, f fixture, req *request) {
	kind, phase, _ := strings.Cut(strings.TrimSuffix(f.Name, ".json"), "_")
	if phase == "cancelled" {
		phase = "failed" // Tekton reports a cancelled run as failed
	}
	run := "release-" + uuid(r)[:8]
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Ce-Specversion", "1.0")
	req.Header.Set("Ce-Id", uuid(r))
	req.Header.Set("Ce-Source", "/apis///namespaces/ci//"+run)
	req.Header.Set("Ce-Subject", run)
	req.Header.Set("Ce-Time", time.Now().UTC().Format(time.RFC3339Nano))
	req.Header.Set("Ce-Type", "dev.tekton.event."+kind+"."+phase+".v1")
	req.Query = url.Values{"cluster": {pick(r, "eu-1", "c1")}}
}

func prepareCloudEvents(r *rand.Rand, _ fixture, req *request) {
	req.Header.Set("Content-Type", mediaCloudEvent)
	req.Events = r.Intn(10) < 7
}
