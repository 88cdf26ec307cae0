package fulciotest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// Audience is the audience Fulcio wants in ID tokens (its client ID).
const Audience = "sigstore"

// Lifetime is how long a certificate is valid, as Fulcio's.
const Lifetime = 10 * time.Minute

// Server is a running Fulcio stand-in.
type Server struct {
	// URL is the server's base URL (http://127.0.0.1:port).
	URL string

	ca      *root.FulcioCertificateAuthority
	caKey   *ecdsa.PrivateKey // the intermediate's
	issuers []string
	srv     *http.Server

	mu        sync.Mutex
	verifiers map[string]*oidc.IDTokenVerifier
	issued    []string // the SANs certified, in order
}

// Start serves a Fulcio trusting ID tokens of the given OIDC issuers (for
// Audience) on a loopback port until Close.
func Start(issuers ...string) (*Server, error) {
	if len(issuers) == 0 {
		return nil, errors.New("no OIDC issuer to trust")
	}
	rootCert, rootKey, err := ca.GenerateRootCa()
	if err != nil {
		return nil, err
	}
	inter, interKey, err := ca.GenerateFulcioIntermediate(rootCert, rootKey)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{
		URL:   "http://" + ln.Addr().String(),
		caKey: interKey, issuers: slices.Clone(issuers),
		verifiers: map[string]*oidc.IDTokenVerifier{},
	}
	s.ca = &root.FulcioCertificateAuthority{
		Root: rootCert, Intermediates: []*x509.Certificate{inter}, URI: s.URL,
		// Valid from before the CA was made for a day: long scenarios
		// outlive an hour. Its certificates are valid 5 h (root) and 2 h
		// (intermediate), as sigstore-go's generators make them.
		ValidityPeriodStart: time.Now().Add(-time.Hour),
		ValidityPeriodEnd:   time.Now().Add(24 * time.Hour),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v2/signingCert", s.signingCert)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// CA is the certificate authority of the certificates issued, for a
// trusted root.
func (s *Server) CA() root.CertificateAuthority { return s.ca }

// Issued lists the SANs (e-mails) certified so far, in order.
func (s *Server) Issued() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.issued)
}

// apiError is Fulcio's error body.
func apiError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": code, "message": err.Error()})
}

// certRequest is Fulcio v2's CreateSigningCertificateRequest, public key
// form (cosign does not send a CSR).
type certRequest struct {
	PublicKeyRequest struct {
		PublicKey struct {
			Algorithm string `json:"algorithm"`
			Content   string `json:"content"`
		} `json:"publicKey"`
		ProofOfPossession string `json:"proofOfPossession"`
	} `json:"publicKeyRequest"`
	CertificateSigningRequest string `json:"certificateSigningRequest"`
}

func (s *Server) signingCert(w http.ResponseWriter, r *http.Request) {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || raw == "" {
		apiError(w, http.StatusUnauthorized, errors.New("no bearer ID token"))
		return
	}
	var req certRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, fmt.Errorf("request: %w", err))
		return
	}
	if req.CertificateSigningRequest != "" {
		apiError(w, http.StatusBadRequest, errors.New("certificate signing requests are not served by this stand-in: send publicKeyRequest"))
		return
	}
	email, issuer, err := s.identity(r.Context(), raw)
	if err != nil {
		apiError(w, http.StatusUnauthorized, err)
		return
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey([]byte(req.PublicKeyRequest.PublicKey.Content))
	if err != nil {
		apiError(w, http.StatusBadRequest, fmt.Errorf("public key: %w", err))
		return
	}
	if err := proven(pub, req.PublicKeyRequest.ProofOfPossession, email); err != nil {
		apiError(w, http.StatusBadRequest, err)
		return
	}
	leaf, err := s.issue(pub, email, issuer)
	if err != nil {
		apiError(w, http.StatusInternalServerError, err)
		return
	}
	chain := []string{string(cryptoutils.PEMEncode(cryptoutils.CertificatePEMType, leaf))}
	for _, c := range append(slices.Clone(s.ca.Intermediates), s.ca.Root) {
		chain = append(chain, string(cryptoutils.PEMEncode(cryptoutils.CertificatePEMType, c.Raw)))
	}
	s.mu.Lock()
	s.issued = append(s.issued, email)
	s.mu.Unlock()
	// 200, as Fulcio's gateway answers (sigstore-go takes nothing else).
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"signedCertificateEmbeddedSct": map[string]any{"chain": map[string]any{"certificates": chain}},
	})
}

// identity verifies the ID token (signature, issuer, audience, expiry) and
// returns its verified e-mail and issuer.
func (s *Server) identity(ctx context.Context, raw string) (email, issuer string, err error) {
	issuer, err = unverifiedIssuer(raw)
	if err != nil {
		return "", "", err
	}
	if !slices.Contains(s.issuers, issuer) {
		return "", "", fmt.Errorf("the token's issuer %q is not trusted", issuer)
	}
	v, err := s.verifier(ctx, issuer)
	if err != nil {
		return "", "", err
	}
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		return "", "", fmt.Errorf("the ID token does not verify: %w", err)
	}
	var claims struct {
		Email         string `json:"email"`
		EmailVerified bool   `json:"email_verified"`
	}
	if err := tok.Claims(&claims); err != nil {
		return "", "", err
	}
	if claims.Email == "" || !claims.EmailVerified {
		return "", "", fmt.Errorf("the ID token of %s carries no verified email", tok.Subject)
	}
	return claims.Email, issuer, nil
}

// verifier discovers issuer once and keeps its verifier.
func (s *Server) verifier(ctx context.Context, issuer string) (*oidc.IDTokenVerifier, error) {
	s.mu.Lock()
	v := s.verifiers[issuer]
	s.mu.Unlock()
	if v != nil {
		return v, nil
	}
	p, err := oidc.NewProvider(ctx, issuer)
	if err != nil {
		return nil, fmt.Errorf("discovering %s: %w", issuer, err)
	}
	v = p.Verifier(&oidc.Config{ClientID: Audience})
	s.mu.Lock()
	s.verifiers[issuer] = v
	s.mu.Unlock()
	return v, nil
}

// unverifiedIssuer reads a JWT's iss claim, to pick its verifier.
func unverifiedIssuer(raw string) (string, error) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return "", errors.New("the ID token is not a JWT")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", fmt.Errorf("the ID token's payload: %w", err)
	}
	var c struct {
		Issuer string `json:"iss"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return "", fmt.Errorf("the ID token's payload: %w", err)
	}
	return c.Issuer, nil
}

// proven checks the proof of possession: subject signed by pub's key.
func proven(pub crypto.PublicKey, proof, subject string) error {
	sig, err := base64.StdEncoding.DecodeString(proof)
	if err != nil || len(sig) == 0 {
		return errors.New("no proof of possession")
	}
	v, err := signature.LoadDefaultVerifier(pub)
	if err != nil {
		return fmt.Errorf("public key: %w", err)
	}
	if err := v.VerifySignature(bytes.NewReader(sig), strings.NewReader(subject)); err != nil {
		return fmt.Errorf("the proof of possession is not the token's subject signed by the key: %w", err)
	}
	return nil
}

// issue makes the code-signing certificate of pub for email, issued by
// the intermediate.
func (s *Server) issue(pub crypto.PublicKey, email, issuer string) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	issuerV2, err := asn1.MarshalWithParams(issuer, "utf8")
	if err != nil {
		return nil, err
	}
	now := time.Now().Truncate(time.Second)
	tmpl := &x509.Certificate{
		SerialNumber:   serial,
		NotBefore:      now,
		NotAfter:       now.Add(Lifetime),
		KeyUsage:       x509.KeyUsageDigitalSignature,
		ExtKeyUsage:    []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		EmailAddresses: []string{email},
		ExtraExtensions: []pkix.Extension{
			{Id: certificate.OIDIssuer, Value: []byte(issuer)}, //nolint:staticcheck // Fulcio still writes the v1 extension
			{Id: certificate.OIDIssuerV2, Value: issuerV2},
		},
	}
	return x509.CreateCertificate(rand.Reader, tmpl, s.ca.Intermediates[0], pub, s.caKey)
}
