// Package oidcop runs a real OpenID provider for tests, built with
// github.com/zitadel/oidc/v3's pkg/op: discovery, JWKS (an RSA key made at
// start), the authorization code flow with PKCE, the device authorization
// grant (RFC 8628) and refresh tokens, on a loopback port. Its users, their
// passwords, e-mails and groups, and its clients are given by the test; the
// ID tokens carry email, preferred_username (the login name) and a groups
// claim, and the user's sub: its login name, or an opaque one the test
// gives (User.Subject) as Keycloak, Okta and Google give. A person
// logs in on a plain HTML form (/login for the code flow, /device for a
// device's user code) that a browser, headless Chromium in the features,
// fills in; IDToken fills the device page itself, for a test that needs a
// user's ID token as a CLI or a CI job holds one (cosign's keyless
// signing). It keeps everything in memory and is not a stub of flotilla's
// side: flotilla's SSO and CLI talk to it as to any provider.
package oidcop
