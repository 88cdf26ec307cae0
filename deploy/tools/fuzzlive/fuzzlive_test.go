package main

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flotilla-cd/flotilla/events/intake"
)

const testdata = "../../../events/intake/testdata"

// testReceiver builds the real sender of a type, as a receiver of the
// fuzzer's generated config would have it, and the fuzzer's target for it.
func testReceiver(t *testing.T, senderType string) (intake.Sender, *target) {
	t.Helper()
	rc := intake.ReceiverConfig{Name: senderType, Type: senderType}
	var c credentials
	if senderType == "gar" {
		iss, err := newOIDCIssuer(garIssuer, garAudience, garServiceAccount)
		if err != nil {
			t.Fatal(err)
		}
		jwks, err := iss.jwks()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "jwks.json")
		if err := os.WriteFile(path, jwks, 0o600); err != nil {
			t.Fatal(err)
		}
		rc.OIDC = intake.OIDCConfig{Issuer: garIssuer, Audience: garAudience, ServiceAccount: garServiceAccount, JWKSFile: path}
		c.oidc = iss
	} else {
		rc.Secret = "s3cr3t-" + senderType
		c.secret = rc.Secret
	}
	if senderType == "nexus" {
		rc.Registry = nexusRegistry
	}
	s, err := intake.NewSender(rc)
	if err != nil {
		t.Fatal(err)
	}
	tgt, err := newTarget(senderType, senderType, testdata, c)
	if err != nil {
		t.Fatal(err)
	}
	return s, tgt
}

// bodySigners are the sender types whose signature covers the body.
var bodySigners = []string{"github", "bitbucket", "bitbucket-server", "nexus", "gitea", "forgejo"}

// TestSignersSatisfySenders checks that every sender's own Authenticate
// accepts what the fuzzer signs, mutated or not, and refuses it unsigned
// (and, where the signature covers the body, with the body changed after
// signing).
func TestSignersSatisfySenders(t *testing.T) {
	ctx := context.Background()
	for _, typ := range intake.SenderTypes() {
		t.Run(typ, func(t *testing.T) {
			s, tgt := testReceiver(t, typ)
			for seed := range int64(100) {
				r := rand.New(rand.NewSource(seed))
				req := tgt.next(r)
				unsigned := req.clone()
				if err := tgt.signer.sign(r, req); err != nil {
					t.Fatalf("seed %d: signing: %v", seed, err)
				}
				if err := s.Authenticate(ctx, req.delivery()); err != nil {
					t.Fatalf("seed %d: %s (%v) refused: %v", seed, req.Fixture, req.Mutations, err)
				}
				if err := s.Authenticate(ctx, unsigned.delivery()); !errors.Is(err, intake.ErrUnauthenticated) {
					t.Fatalf("seed %d: unsigned %s: Authenticate = %v, want unauthenticated", seed, req.Fixture, err)
				}
				if slices.Contains(bodySigners, typ) {
					tampered := req.clone()
					tampered.PathToken = req.PathToken
					tampered.Body = append(tampered.Body, ' ')
					if err := s.Authenticate(ctx, tampered.delivery()); !errors.Is(err, intake.ErrUnauthenticated) {
						t.Fatalf("seed %d: body changed after signing: Authenticate = %v, want unauthenticated", seed, err)
					}
				}
			}
		})
	}
}

// refusedFixtures are fixtures of deliveries their sender refuses by design.
var refusedFixtures = []string{"dockerhub/no_tag.json"}

// TestFixturesParse checks that the headers, query and CloudEvents modes a
// profile sends a fixture with are what its sender reads: unmutated and
// signed, every fixture parses (most of the time: a profile also sends some
// deliveries the sender must refuse, such as a gate call without its gate).
func TestFixturesParse(t *testing.T) {
	ctx := context.Background()
	for _, typ := range intake.SenderTypes() {
		t.Run(typ, func(t *testing.T) {
			s, tgt := testReceiver(t, typ)
			for _, f := range tgt.fixtures {
				if slices.Contains(refusedFixtures, f.String()) {
					continue
				}
				const tries = 20
				var errs []error
				for seed := range int64(tries) {
					r := rand.New(rand.NewSource(seed))
					req := tgt.build(r, f, false)
					if err := tgt.signer.sign(r, req); err != nil {
						t.Fatal(err)
					}
					d := req.delivery()
					if err := s.Authenticate(ctx, d); err != nil {
						t.Fatalf("%s: %v", f, err)
					}
					if _, err := s.Parse(d); err != nil {
						errs = append(errs, err)
					}
				}
				if len(errs) > tries/5 {
					t.Errorf("%s: %d of %d deliveries refused, first: %v", f, len(errs), tries, errs[0])
				}
			}
		})
	}
}

// TestMutationsKeepJSONValid checks that structure-aware mutations of every
// fixture encode to valid JSON and say what they did.
func TestMutationsKeepJSONValid(t *testing.T) {
	dirs, err := os.ReadDir(testdata)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		fs, err := loadFixtures(testdata, []string{dir.Name()})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			for seed := range int64(20) {
				r := rand.New(rand.NewSource(seed))
				doc, err := decodeJSON(f.Body)
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				n := mutationCount(r)
				doc, what := mutateJSON(r, doc, n)
				b, err := encodeJSON(doc)
				if err != nil {
					t.Fatalf("%s seed %d: encoding %v: %v", f, seed, what, err)
				}
				if !json.Valid(b) {
					t.Fatalf("%s seed %d: %v gave invalid JSON", f, seed, what)
				}
				stoppedEarly := len(what) > 0 && len(what) < n && tooBig(doc)
				if len(what) != n && !stoppedEarly {
					t.Fatalf("%s seed %d: %d mutations described, want %d (fewer only for a document grown too big)", f, seed, len(what), n)
				}
			}
		}
	}
}

// TestMutatedBodiesAreBounded checks that mutations cannot compound (an
// array grown with copies of itself, wrapped, grown again) into bodies of
// hundreds of megabytes, which once took a worker 90 seconds to encode.
func TestMutatedBodiesAreBounded(t *testing.T) {
	fs, err := loadFixtures(testdata, []string{"flagger", "gar"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		for seed := range int64(8) {
			r := rand.New(rand.NewSource(seed))
			doc, err := decodeJSON(f.Body)
			if err != nil {
				t.Fatal(err)
			}
			// The document stops growing past maxDocSize; its last
			// mutation may have doubled it.
			doc, what := mutateJSON(r, doc, 40)
			if n := approxSize(doc, 3*maxDocSize); n > 2*maxDocSize+(1<<20) {
				t.Fatalf("%s seed %d: %d bytes after %d mutations", f, seed, n, len(what))
			}
			b, _ := mutateBody(r, f)
			if len(b) > 4<<20 {
				t.Fatalf("%s seed %d: a body of %d bytes", f, seed, len(b))
			}
		}
	}
}

// TestNestedDocRoundTrip checks that a payload inside a payload (GAR's
// base64 Pub/Sub data) is found and encoded back the same way.
func TestNestedDocRoundTrip(t *testing.T) {
	fs, err := loadFixtures(testdata, []string{"gar"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		doc, err := decodeJSON(f.Body)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := doc.(map[string]any)["message"].(map[string]any)["data"].(string)
		inner, enc, ok := nestedDoc(data)
		if !ok {
			t.Fatalf("%s: message.data not recognized as a nested document", f)
		}
		again, _, ok := nestedDoc(enc(inner))
		if !ok {
			t.Fatalf("%s: re-encoded data not recognized", f)
		}
		a, _ := encodeJSON(inner)
		b, _ := encodeJSON(again)
		if string(a) != string(b) {
			t.Errorf("%s: round trip changed the payload:\n%s\n%s", f, a, b)
		}
	}
}

// TestRawMutationsAreBounded runs the byte-level mutators over every kind of
// input, empty included: each says what it did, none makes a body of more
// than a few megabytes.
func TestRawMutationsAreBounded(t *testing.T) {
	for seed := range int64(500) {
		r := rand.New(rand.NewSource(seed))
		body := pick(r, []byte{}, []byte("{}"), []byte(`{"a":"b","n":12}`), randomBytes(r))
		out, what := mutateRaw(r, body)
		if len(out) > 4<<20 {
			t.Fatalf("seed %d: %v made %d bytes", seed, what, len(out))
		}
	}
}
