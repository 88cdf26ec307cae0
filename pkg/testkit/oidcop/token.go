package oidcop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// IDToken is an ID token of the public client clientID for user, got as a
// CLI gets one: the device authorization grant, its user code approved on
// the provider's /device form with the user's password, as a person would.
// Its scopes are openid, email and profile: the token carries the user's
// email, verified, when the user has one (what Fulcio certifies).
func (p *Provider) IDToken(ctx context.Context, clientID, user, password string) (string, error) {
	discovered, err := oidc.NewProvider(ctx, p.Issuer)
	if err != nil {
		return "", fmt.Errorf("discovery: %w", err)
	}
	conf := oauth2.Config{ClientID: clientID, Endpoint: discovered.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "email", "profile"}}
	da, err := conf.DeviceAuth(ctx)
	if err != nil {
		return "", fmt.Errorf("device authorization: %w", err)
	}
	form := url.Values{"user_code": {da.UserCode}, "username": {user}, "password": {password}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(p.Issuer, "/")+"/device", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("approving the device code: %w", err)
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("approving the device code as %s: %s: %s", user, res.Status, strings.TrimSpace(string(body)))
	}
	tok, err := conf.DeviceAccessToken(ctx, da)
	if err != nil {
		return "", fmt.Errorf("device token: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return "", errors.New("the token response holds no id_token")
	}
	return raw, nil
}
