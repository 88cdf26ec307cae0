package main

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"math/rand"
	"net/url"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
)

// signer authenticates a request as the receiver's sender does. It runs
// last, on the body as it will be sent.
type signer interface {
	sign(r *rand.Rand, req *request) error
}

type signFunc func(r *rand.Rand, req *request) error

func (f signFunc) sign(r *rand.Rand, req *request) error { return f(r, req) }

// credentials are what the fuzzer holds for one receiver.
type credentials struct {
	// secret is the receiver's shared secret (every type but gar).
	secret string
	// oidc mints gar's tokens.
	oidc *oidcIssuer
}

// signers builds the signer of each sender type: how the README says that
// sender authenticates.
var signers = map[string]func(credentials) signer{
	"dockerhub":        pathToken,
	"quay":             pathToken,
	"tekton":           pathToken,
	"flagger":          flaggerToken,
	"harbor":           headerToken("Authorization"),
	"distribution":     headerToken("Authorization"),
	"acr":              headerToken("Authorization"),
	"ecr":              headerToken("Authorization"),
	"cloudevents":      headerToken("Authorization"),
	"gitlab":           headerToken("X-Gitlab-Token"),
	"github":           hmacHeader("X-Hub-Signature-256", "sha256=", sha256.New),
	"bitbucket":        hmacHeader("X-Hub-Signature", "sha256=", sha256.New),
	"bitbucket-server": hmacHeader("X-Hub-Signature", "sha256=", sha256.New),
	"nexus":            hmacHeader("X-Nexus-Webhook-Signature", "", sha1.New),
	"artifactory":      artifactoryAuth,
	"gitea":            giteaSignature,
	"forgejo":          giteaSignature,
	"gar":              oidcToken,
}

// newSigner returns the signer of a sender type; an unknown type is an
// error, so a new sender cannot go unfuzzed.
func newSigner(senderType string, c credentials) (signer, error) {
	f, ok := signers[senderType]
	if !ok {
		return nil, fmt.Errorf("no signer for sender type %q: add one to deploy/tools/fuzzlive/sign.go", senderType)
	}
	if senderType == "gar" && c.oidc == nil || senderType != "gar" && c.secret == "" {
		return nil, fmt.Errorf("sender type %q: missing credentials", senderType)
	}
	return f(c), nil
}

// pathToken posts to /hooks/<receiver>/<secret>.
func pathToken(c credentials) signer {
	return signFunc(func(_ *rand.Rand, req *request) error {
		req.PathToken = c.secret
		return nil
	})
}

// headerToken sends the secret in header, in each form a static header
// takes: verbatim, as a bearer token, as Basic credentials.
func headerToken(header string) func(credentials) signer {
	return func(c credentials) signer {
		return signFunc(func(r *rand.Rand, req *request) error {
			v := c.secret
			switch r.Intn(4) {
			case 0:
				v = "Bearer " + c.secret
			case 1:
				v = "bearer " + c.secret
			case 2:
				v = "Basic " + base64.StdEncoding.EncodeToString([]byte(c.secret))
			}
			req.Header.Set(header, v)
			return nil
		})
	}
}

func hexMAC(newHash func() hash.Hash, secret string, body []byte) string {
	mac := hmac.New(newHash, []byte(secret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// hmacHeader sets header to prefix + the hex HMAC of the body.
func hmacHeader(header, prefix string, newHash func() hash.Hash) func(credentials) signer {
	return func(c credentials) signer {
		return signFunc(func(_ *rand.Rand, req *request) error {
			req.Header.Set(header, prefix+hexMAC(newHash, c.secret, req.Body))
			return nil
		})
	}
}

// artifactoryAuth sends X-JFrog-Event-Auth as the secret itself or, as a
// webhook that signs its payload does, the body's HMAC-SHA256.
func artifactoryAuth(c credentials) signer {
	return signFunc(func(r *rand.Rand, req *request) error {
		v := c.secret
		if r.Intn(3) != 0 {
			v = hexMAC(sha256.New, c.secret, req.Body)
		}
		req.Header.Set("X-JFrog-Event-Auth", v)
		return nil
	})
}

// giteaSignature signs what Gitea and Forgejo sign (the "payload" field of
// a form-encoded body, else the body) in some of the headers they send.
func giteaSignature(c credentials) signer {
	return signFunc(func(r *rand.Rand, req *request) error {
		payload := req.Body
		if req.Header.Get("Content-Type") == "application/x-www-form-urlencoded" {
			form, err := url.ParseQuery(string(req.Body))
			if err != nil {
				return fmt.Errorf("gitea: form-encoded body: %w", err)
			}
			payload = []byte(form.Get("payload"))
		}
		sig := hexMAC(sha256.New, c.secret, payload)
		headers := []struct{ name, value string }{
			{"X-Gitea-Signature", sig}, {"X-Forgejo-Signature", sig}, {"X-Hub-Signature-256", "sha256=" + sig},
		}
		set := 1 + r.Intn(7) // a non-empty subset
		for i, h := range headers {
			if set&(1<<i) != 0 {
				req.Header.Set(h.name, h.value)
			}
		}
		return nil
	})
}

// flaggerToken posts to /hooks/<receiver>/<secret>, or, one request in four,
// puts the secret in the payload's metadata.token when the body is a payload
// Flagger could have sent (its metadata a map of strings).
func flaggerToken(c credentials) signer {
	return signFunc(func(r *rand.Rand, req *request) error {
		if r.Intn(4) == 0 {
			if b, ok := withMetadataToken(req.Body, c.secret); ok {
				req.Body = b
				return nil
			}
		}
		req.PathToken = c.secret
		return nil
	})
}

func withMetadataToken(body []byte, token string) ([]byte, bool) {
	doc, err := decodeJSON(body)
	if err != nil {
		return nil, false
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, false
	}
	meta, ok := m["metadata"].(map[string]any)
	if !ok {
		meta = map[string]any{}
		m["metadata"] = meta
	}
	meta["token"] = token
	b, err := encodeJSON(m)
	if err != nil {
		return nil, false
	}
	var p flaggerv1.CanaryWebhookPayload
	if json.Unmarshal(b, &p) != nil {
		return nil, false
	}
	return b, true
}

// oidcToken sends a token signed by the fuzzer's own key, as a Pub/Sub push
// subscription sends Google's.
func oidcToken(c credentials) signer {
	return signFunc(func(r *rand.Rand, req *request) error {
		tok, err := c.oidc.token()
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", pick(r, "Bearer ", "bearer ")+tok)
		return nil
	})
}
