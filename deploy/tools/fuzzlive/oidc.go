package main

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// oidcIssuer plays Google for the gar receiver: its own RSA key, published
// as a JWKS file the receiver's oidc.jwksFile names, and tokens with the
// claims a Pub/Sub push subscription's carry.
type oidcIssuer struct {
	issuer, audience, email string
	key                     *rsa.PrivateKey
	kid                     string

	mu     sync.Mutex
	tok    string
	minted time.Time
}

// tokenLifetime is how long a minted token is valid; a new one is minted
// when half of it is gone.
const tokenLifetime = time.Hour

func newOIDCIssuer(issuer, audience, email string) (*oidcIssuer, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generating the OIDC key: %w", err)
	}
	kid := make([]byte, 8)
	if _, err := rand.Read(kid); err != nil {
		return nil, err
	}
	return &oidcIssuer{issuer: issuer, audience: audience, email: email, key: key, kid: hex.EncodeToString(kid)}, nil
}

// jwks is the public key set, as the receiver's jwksFile.
func (o *oidcIssuer) jwks() ([]byte, error) {
	return json.MarshalIndent(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{
		Key: &o.key.PublicKey, KeyID: o.kid, Algorithm: string(jose.RS256), Use: "sig",
	}}}, "", "  ")
}

// token returns a valid token, minting one when needed.
func (o *oidcIssuer) token() (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	if o.tok != "" && now.Sub(o.minted) < tokenLifetime/2 {
		return o.tok, nil
	}
	tok, err := o.mint(now)
	if err != nil {
		return "", err
	}
	o.tok, o.minted = tok, now
	return tok, nil
}

func (o *oidcIssuer) mint(now time.Time) (string, error) {
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: o.key, KeyID: o.kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", fmt.Errorf("minting an OIDC token: %w", err)
	}
	claims := map[string]any{
		"iss":            o.issuer,
		"aud":            o.audience,
		"azp":            "113774264463038321964",
		"sub":            "113774264463038321964",
		"email":          o.email,
		"email_verified": true,
		"iat":            now.Add(-time.Minute).Unix(),
		"exp":            now.Add(tokenLifetime).Unix(),
	}
	tok, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		return "", fmt.Errorf("minting an OIDC token: %w", err)
	}
	return tok, nil
}
