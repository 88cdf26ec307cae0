package main

import (
	"fmt"
	"maps"
	"math/rand"
	"net/http"
	"slices"
)

// target is one receiver under fuzz: how its deliveries look, what they
// are made from, and how they are signed.
type target struct {
	name, sender string
	profile      profile
	fixtures     []fixture
	signer       signer
}

func newTarget(name, senderType, testdata string, c credentials) (*target, error) {
	p, err := profileFor(senderType)
	if err != nil {
		return nil, err
	}
	fs, err := loadFixtures(testdata, p.dirs)
	if err != nil {
		return nil, fmt.Errorf("sender %s: %w", senderType, err)
	}
	s, err := newSigner(senderType, c)
	if err != nil {
		return nil, err
	}
	return &target{name: name, sender: senderType, profile: p, fixtures: fs, signer: s}, nil
}

// next builds a random delivery for t, not yet signed.
func (t *target) next(r *rand.Rand) *request {
	return t.build(r, t.fixtures[r.Intn(len(t.fixtures))], true)
}

// build makes a delivery of f for t, not yet signed; mutate false sends the
// fixture as the sender would (tests).
func (t *target) build(r *rand.Rand, f fixture, mutate bool) *request {
	req := &request{Receiver: t.name, Sender: t.sender, Header: http.Header{}, Fixture: f.String(), Body: f.Body}
	t.profile.prepare(r, f, req)
	if mutate {
		req.Body, req.Mutations = mutateBody(r, f)
	}
	if t.profile.encode != nil {
		t.profile.encode(r, req)
	}
	if mutate && r.Intn(7) == 0 {
		mutateHeaders(r, req)
	}
	if mutate && r.Intn(100) == 0 {
		req.Method = pick(r, http.MethodGet, http.MethodPut, http.MethodOptions, http.MethodDelete)
		if req.Method == http.MethodOptions && r.Intn(2) == 0 {
			req.Header.Set("WebHook-Request-Origin", pick(r, "fuzz.example.com", "", hostileString(r)))
		}
		req.Mutations = append(req.Mutations, "method "+req.Method)
	}
	sanitizeHeaders(req.Header)
	return req
}

// mutateHeaders changes a header or query value the sender reads, removes
// one, or adds one it may read.
func mutateHeaders(r *rand.Rand, req *request) {
	if len(req.Query) > 0 && r.Intn(3) == 0 {
		keys := slices.Sorted(maps.Keys(req.Query))
		k := pick(r, keys...)
		v := hostileString(r)
		req.Query.Set(k, v)
		req.Mutations = append(req.Mutations, fmt.Sprintf("query %s = %s", k, preview(v)))
		return
	}
	keys := slices.Sorted(maps.Keys(req.Header))
	switch op := r.Intn(10); {
	case op < 6 && len(keys) > 0:
		k := pick(r, keys...)
		var v string
		if timeKey.MatchString(k) || r.Intn(4) == 0 {
			v = pick(r, hostileTimes...)
		} else {
			v = hostileString(r)
		}
		req.Header.Set(k, v)
		req.Mutations = append(req.Mutations, fmt.Sprintf("header %s = %s", k, preview(v)))
	case op < 8 && len(keys) > 0:
		k := pick(r, keys...)
		req.Header.Del(k)
		req.Mutations = append(req.Mutations, "header "+k+" removed")
	default:
		k := pick(r, "Ce-Time", "Ce-Rolloutid", "Ce-Specversion", "Ce-Id", "Ce-Type", "Content-Type", "X-GitHub-Event", "Content-Encoding")
		v := pick(r, append([]string{hostileString(r), "application/json; charset=utf-16", "text/plain", "application/cloudevents+json; charset=x",
			"multipart/form-data; boundary=", "application/json;;;", "gzip", "0.3", "dev.flotilla.image.pushed.v1"}, hostileTimes...)...)
		req.Header.Set(k, v)
		req.Mutations = append(req.Mutations, fmt.Sprintf("header %s = %s", k, preview(v)))
	}
}
