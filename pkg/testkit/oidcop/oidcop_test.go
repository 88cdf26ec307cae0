package oidcop_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/oauth2"

	"github.com/flotilla-cd/flotilla/pkg/testkit/oidcop"
)

type claims struct {
	Subject  string   `json:"sub"`
	Email    string   `json:"email"`
	Username string   `json:"preferred_username"`
	Groups   []string `json:"groups"`
	Nonce    string   `json:"nonce"`
}

// alice's subject is opaque, as Keycloak's, Okta's and Google's are: the
// tokens name her by it, her login name is her preferred_username.
var alice = oidcop.User{Name: "alice", Subject: "f3b1c2d4-7e0a-4c5e-9a61-0d2b8f7c1e55", Password: "pw-alice", Email: "alice@example.com", Groups: []string{"payments"}}

func start(t *testing.T, clients ...oidcop.Client) (*oidcop.Provider, *oidc.Provider) {
	t.Helper()
	p, err := oidcop.Start([]oidcop.User{alice}, clients)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	discovered, err := oidc.NewProvider(t.Context(), p.Issuer)
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	return p, discovered
}

// TestCodeFlowWithPKCE logs in as a browser would: the authorization
// endpoint redirects to the login form, the form back to the callback with
// a code, and the code with its PKCE verifier buys an ID token that
// go-oidc's verifier accepts, with the user's claims.
func TestCodeFlowWithPKCE(t *testing.T) {
	var callback *url.URL
	rp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { callback = r.URL }))
	defer rp.Close()
	_, discovered := start(t, oidcop.Client{ID: "web", Secret: "s3cret", RedirectURIs: []string{rp.URL + "/cb"}})
	conf := oauth2.Config{ClientID: "web", ClientSecret: "s3cret", Endpoint: discovered.Endpoint(), RedirectURL: rp.URL + "/cb",
		Scopes: []string{oidc.ScopeOpenID, "email", "profile", "groups"}}
	verifier := oauth2.GenerateVerifier()
	start := conf.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier), oidc.Nonce("n0"))
	res, err := http.Get(start) // follows to the login form
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	id := res.Request.URL.Query().Get("authRequestID")
	if id == "" {
		t.Fatalf("not at the login form: %s", res.Request.URL)
	}
	login := res.Request.URL.ResolveReference(&url.URL{Path: "/login"})
	if res, err := http.PostForm(login.String(), url.Values{"id": {id}, "username": {"alice"}, "password": {"wrong"}}); err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong password: %v %v", res, err)
	}
	res, err = http.PostForm(login.String(), url.Values{"id": {id}, "username": {"alice"}, "password": {"pw-alice"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if callback == nil || callback.Query().Get("state") != "st" {
		t.Fatalf("callback %v", callback)
	}
	tok, err := conf.Exchange(t.Context(), callback.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	if _, err := conf.Exchange(t.Context(), callback.Query().Get("code"), oauth2.VerifierOption("other")); err == nil {
		t.Error("a code was exchanged twice")
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := discovered.Verifier(&oidc.Config{ClientID: "web"}).Verify(t.Context(), raw)
	if err != nil {
		t.Fatalf("verifying the ID token: %v", err)
	}
	var got claims
	if err := idt.Claims(&got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(claims{Subject: alice.Subject, Email: "alice@example.com", Username: "alice", Groups: []string{"payments"}, Nonce: "n0"}, got); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
}

// TestDeviceFlowAndRefresh: a CLI asks for a device code, the person
// approves it on the provider's page, the CLI's poll gets an ID token for
// its client id and a refresh token, and the refresh token buys a new ID
// token (and is rotated).
func TestDeviceFlowAndRefresh(t *testing.T) {
	p, discovered := start(t, oidcop.Client{ID: "cli"})
	p.SetGroups("alice", []string{"payments", "release-managers"})
	conf := oauth2.Config{ClientID: "cli", Endpoint: discovered.Endpoint(), Scopes: []string{oidc.ScopeOpenID, oidc.ScopeOfflineAccess, "email", "profile", "groups"}}
	if conf.Endpoint.DeviceAuthURL == "" {
		t.Fatal("discovery names no device_authorization_endpoint")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	da, err := conf.DeviceAuth(ctx)
	if err != nil {
		t.Fatalf("device auth: %v", err)
	}
	go func() {
		time.Sleep(500 * time.Millisecond)
		res, err := http.PostForm(strings.TrimSuffix(p.Issuer, "/")+"/device", url.Values{"user_code": {da.UserCode}, "username": {"alice"}, "password": {"pw-alice"}})
		if err == nil {
			res.Body.Close()
		}
	}()
	tok, err := conf.DeviceAccessToken(ctx, da)
	if err != nil {
		t.Fatalf("device token: %v", err)
	}
	if tok.RefreshToken == "" {
		t.Fatal("no refresh token")
	}
	verify := discovered.Verifier(&oidc.Config{ClientID: "cli"})
	raw, _ := tok.Extra("id_token").(string)
	idt, err := verify.Verify(ctx, raw)
	if err != nil {
		t.Fatalf("verifying: %v", err)
	}
	var got claims
	_ = idt.Claims(&got)
	if diff := cmp.Diff(claims{Subject: alice.Subject, Email: "alice@example.com", Username: "alice", Groups: []string{"payments", "release-managers"}}, got); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
	tok.Expiry = time.Now().Add(-time.Minute) // force the refresh
	fresh, err := conf.TokenSource(ctx, tok).Token()
	if err != nil {
		t.Fatalf("refresh: %v", err)
	}
	raw, _ = fresh.Extra("id_token").(string)
	refreshed, err := verify.Verify(ctx, raw)
	if err != nil {
		t.Fatalf("verifying the refreshed ID token: %v", err)
	}
	if refreshed.Subject != alice.Subject {
		t.Errorf("the refreshed ID token's subject is %q, want %q", refreshed.Subject, alice.Subject)
	}
	if fresh.RefreshToken == tok.RefreshToken {
		t.Error("the refresh token was not rotated")
	}
	if _, err := conf.TokenSource(ctx, tok).Token(); err == nil {
		t.Error("a spent refresh token was accepted")
	}
}
