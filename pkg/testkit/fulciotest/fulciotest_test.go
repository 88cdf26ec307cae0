package fulciotest_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/sign"

	"github.com/flotilla-cd/flotilla/pkg/testkit/fulciotest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/oidcop"
)

func provider(t *testing.T, users ...oidcop.User) *oidcop.Provider {
	t.Helper()
	p, err := oidcop.Start(users, []oidcop.Client{{ID: fulciotest.Audience}, {ID: "elsewhere"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func token(t *testing.T, p *oidcop.Provider, client, user string) string {
	t.Helper()
	tok, err := p.IDToken(t.Context(), client, user, "pw")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestSigningCert asks the stand-in for certificates with sigstore-go's
// Fulcio client, the one cosign v3 uses: a verified e-mail's token is
// certified (the e-mail as SAN, the issuer in Fulcio's extension, a chain
// to the CA it publishes); a token for another audience, of an issuer it
// does not trust, without an e-mail, or a proof of possession by another
// key, is refused.
func TestSigningCert(t *testing.T) {
	op := provider(t, oidcop.User{Name: "alice", Password: "pw", Email: "alice@example.com"}, oidcop.User{Name: "bob", Password: "pw"})
	stranger := provider(t, oidcop.User{Name: "alice", Password: "pw", Email: "alice@example.com"})
	f, err := fulciotest.Start(op.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	client := sign.NewFulcio(&sign.FulcioOptions{BaseURL: f.URL, Retries: 0})
	key, err := sign.NewEphemeralKeypair(nil)
	if err != nil {
		t.Fatal(err)
	}

	der, err := client.GetCertificate(t.Context(), key, &sign.CertificateProviderOptions{IDToken: token(t, op, fulciotest.Audience, "alice")})
	if err != nil {
		t.Fatalf("certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := certificate.SummarizeCertificate(cert)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"alice@example.com", op.Issuer}, []string{sum.SubjectAlternativeName, sum.Extensions.Issuer}); diff != "" {
		t.Errorf("SAN and issuer (-want +got):\n%s", diff)
	}
	if _, err := f.CA().(*root.FulcioCertificateAuthority).Verify(cert, time.Now()); err != nil {
		t.Errorf("the certificate does not chain to the CA: %v", err)
	}
	if got := cert.NotAfter.Sub(cert.NotBefore); got != fulciotest.Lifetime {
		t.Errorf("valid for %v, want %v", got, fulciotest.Lifetime)
	}

	for name, tok := range map[string]string{
		"another audience":    token(t, op, "elsewhere", "alice"),
		"an untrusted issuer": token(t, stranger, fulciotest.Audience, "alice"),
		"no e-mail":           token(t, op, fulciotest.Audience, "bob"),
	} {
		if _, err := client.GetCertificate(t.Context(), key, &sign.CertificateProviderOptions{IDToken: tok}); err == nil || !strings.Contains(err.Error(), "401") {
			t.Errorf("%s: %v, want a 401", name, err)
		}
	}

	// A proof of possession signed over another subject.
	pemKey, err := key.GetPublicKeyPem()
	if err != nil {
		t.Fatal(err)
	}
	proof, _, err := key.SignData(context.Background(), []byte("mallory@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"publicKeyRequest": map[string]any{
		"publicKey":         map[string]string{"algorithm": "ECDSA", "content": pemKey},
		"proofOfPossession": base64.StdEncoding.EncodeToString(proof),
	}})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, f.URL+"/api/v2/signingCert", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token(t, op, fulciotest.Audience, "alice"))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), "proof of possession") {
		t.Errorf("another subject's proof: %s %s, want 400 about the proof of possession", res.Status, msg)
	}
	if got := f.Issued(); !cmp.Equal(got, []string{"alice@example.com"}) {
		t.Errorf("issued %v, want alice's only", got)
	}
}
