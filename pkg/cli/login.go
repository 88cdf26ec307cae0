package cli

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/spf13/cobra"
	"golang.org/x/oauth2"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/identity"
)

// The CLI's own config file keeps the single sign-on logins, one per
// server: the provider's token URL, the CLI's client id, the refresh
// token and the last ID token (sent as the bearer token). 0600.
const cliConfigEnv = "FLOTILLA_CLI_CONFIG"

// refreshAhead: an ID token expiring within it is refreshed before a call.
const refreshAhead = time.Minute

// cliConfig is the file's content.
type cliConfig struct {
	Logins []ssoLogin `json:"logins"`
}

// ssoLogin is one server's login.
type ssoLogin struct {
	Server       string    `json:"server"`
	Name         string    `json:"name"`
	Issuer       string    `json:"issuer"`
	ClientID     string    `json:"clientID"`
	TokenURL     string    `json:"tokenURL"`
	IDToken      string    `json:"idToken"`
	RefreshToken string    `json:"refreshToken"`
	Expiry       time.Time `json:"expiry"`
}

// cliConfigPath is $FLOTILLA_CLI_CONFIG, else ~/.config/flotilla/config.yaml
// (the user's config directory).
func cliConfigPath() (string, error) {
	if p := os.Getenv(cliConfigEnv); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("finding the config directory (set %s): %w", cliConfigEnv, err)
	}
	return filepath.Join(dir, "flotilla", "config.yaml"), nil
}

func readCLIConfig(path string) (cliConfig, error) {
	var c cliConfig
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("reading %s: %w", path, err)
	}
	if err := yaml.UnmarshalStrict(raw, &c); err != nil {
		return c, fmt.Errorf("reading %s: %w", path, err)
	}
	return c, nil
}

// writeCLIConfig writes c with mode 0600 (it holds refresh tokens),
// through a temporary file so a crash leaves the old one.
func writeCLIConfig(path string, c cliConfig) error {
	raw, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.yaml")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.Write(raw)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil { // the old file stays: the temporary one is not renamed
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func sameServer(a, b string) bool { return strings.TrimRight(a, "/") == strings.TrimRight(b, "/") }

// withLogin is c with l in place of the server's login (nil: without it).
func (c cliConfig) withLogin(server string, l *ssoLogin) cliConfig {
	c.Logins = slices.DeleteFunc(slices.Clone(c.Logins), func(x ssoLogin) bool { return sameServer(x.Server, server) })
	if l != nil {
		c.Logins = append(c.Logins, *l)
	}
	return c
}

func newLoginCmd() *cobra.Command {
	var server string
	var sso, browser bool
	var port int
	cmd := &cobra.Command{
		Use:   "login --sso",
		Short: "Log in to a flotilla through its single sign-on (device flow, or --browser)",
		Long: `login --sso logs you in through the OpenID provider of the flotilla at
--server (its server.sso). By default with the device authorization grant
(RFC 8628): it prints a URL and a code, you open the URL in any browser, log
in there and enter the code, and login waits for it. With --browser, as
argocd login --sso does, it listens on 127.0.0.1:--sso-port (default 8085; 0
picks a free port, for providers that take any loopback port, RFC 8252) and
prints the provider's authorization URL (code flow with PKCE, a state and a
nonce): open it in a browser on this machine, log in, and the provider sends
the browser back to http://127.0.0.1:<port>/auth/callback, where login takes
the code (its state checked), exchanges it with the PKCE verifier and
verifies the ID token. The CLI's client (server.sso.cliClientID) must then
allow the authorization code grant and that redirect URL.

Either way it keeps the refresh token in ~/.config/flotilla/config.yaml (mode
0600; $FLOTILLA_CLI_CONFIG elsewhere), and the other commands then send your
ID token, refreshed before it expires, whenever they are given no --token:
their calls are recorded under your name and allowed by your groups' roles.
flotilla whoami says who flotilla takes you for; flotilla logout forgets the
login.`,
		Example: `  flotilla login --sso --server https://flotilla.example.com
  flotilla login --sso --browser --sso-port 8085
  flotilla approve r-20260102-api-7f3c --wave 2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !sso {
				return usageError{errors.New("login needs --sso (API tokens need no login: pass --token or set FLOTILLA_TOKEN)")}
			}
			if port < 0 || port > 65535 {
				return usageError{fmt.Errorf("--sso-port %d: want 0-65535", port)}
			}
			if browser {
				return ssoBrowserLogIn(cmd.Context(), cmd.OutOrStdout(), server, port)
			}
			if cmd.Flags().Changed("sso-port") {
				return usageError{errors.New("--sso-port is the port of --browser's callback: add --browser")}
			}
			return ssoLogIn(cmd.Context(), cmd.OutOrStdout(), server)
		},
	}
	cmd.Flags().StringVar(&server, "server", defaultServer(), "URL of the running flotilla (env FLOTILLA_SERVER)")
	cmd.Flags().BoolVar(&sso, "sso", false, "log in through the server's OpenID provider (device flow, or --browser)")
	cmd.Flags().BoolVar(&browser, "browser", false, "log in in a browser on this machine: the provider redirects to a callback on 127.0.0.1 (code flow with PKCE)")
	cmd.Flags().IntVar(&port, "sso-port", defaultSSOPort, "port of --browser's callback on 127.0.0.1 (0: a free one)")
	return cmd
}

func newLogoutCmd() *cobra.Command {
	var server string
	cmd := &cobra.Command{
		Use:   "logout",
		Short: "Forget the single sign-on login of a flotilla",
		Long: `logout removes the login to --server that flotilla login --sso kept (its refresh
token and ID token) from ~/.config/flotilla/config.yaml ($FLOTILLA_CLI_CONFIG).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := cliConfigPath()
			if err != nil {
				return err
			}
			c, err := readCLIConfig(path)
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(c.Logins, func(l ssoLogin) bool { return sameServer(l.Server, server) }) {
				fmt.Fprintf(cmd.OutOrStdout(), "not logged in to %s\n", server)
				return nil
			}
			if err := writeCLIConfig(path, c.withLogin(server, nil)); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "logged out of %s\n", server)
			return nil
		},
	}
	cmd.Flags().StringVar(&server, "server", defaultServer(), "URL of the running flotilla (env FLOTILLA_SERVER)")
	return cmd
}

// ssoClientConfig is the server's GET /auth/config (pkg/api).
type ssoClientConfig struct {
	Issuer        string   `json:"issuer"`
	ClientID      string   `json:"clientID"`
	Scopes        []string `json:"scopes"`
	UsernameClaim string   `json:"usernameClaim"`
}

// ssoStart is where a login begins, in either flow: the CLI config's
// path, to keep the login in, and the server's provider.
type ssoStart struct {
	path     string
	sc       ssoClientConfig
	provider *oidc.Provider
}

// startSSO finds the CLI's config and asks server how to log in (GET
// /auth/config), discovering its provider.
func startSSO(ctx context.Context, server string) (ssoStart, error) {
	path, err := cliConfigPath()
	if err != nil {
		return ssoStart{}, err
	}
	var sc ssoClientConfig
	if err := (apiClient{base: server}).get(ctx, "/auth/config", &sc); err != nil {
		return ssoStart{}, fmt.Errorf("asking %s how to log in: %w", server, err)
	}
	provider, err := oidc.NewProvider(ctx, sc.Issuer)
	if err != nil {
		return ssoStart{}, fmt.Errorf("discovering the provider %s: %w", sc.Issuer, err)
	}
	return ssoStart{path: path, sc: sc, provider: provider}, nil
}

// ssoLogIn runs the device flow against server's provider and keeps the
// login.
func ssoLogIn(ctx context.Context, out io.Writer, server string) error {
	st, err := startSSO(ctx, server)
	if err != nil {
		return err
	}
	conf := oauth2.Config{ClientID: st.sc.ClientID, Endpoint: st.provider.Endpoint(), Scopes: st.sc.Scopes}
	if conf.Endpoint.DeviceAuthURL == "" {
		return fmt.Errorf("the provider %s offers no device authorization endpoint", st.sc.Issuer)
	}
	da, err := conf.DeviceAuth(ctx)
	if err != nil {
		return fmt.Errorf("starting the device login: %w", err)
	}
	fmt.Fprintf(out, "Open %s and enter the code %s\n", da.VerificationURI, da.UserCode)
	if da.VerificationURIComplete != "" {
		fmt.Fprintf(out, "(or open %s)\n", da.VerificationURIComplete)
	}
	fmt.Fprintln(out, "Waiting for the login...")
	tok, err := conf.DeviceAccessToken(ctx, da)
	if err != nil {
		return fmt.Errorf("waiting for the device login: %w", err)
	}
	return keepLogin(ctx, out, st, server, conf.Endpoint.TokenURL, tok, "")
}

// keepLogin verifies the ID token of tok (and its nonce, when not "")
// with st's provider and keeps the login to server in the CLI's config at
// st's path: the device flow's and the browser's alike.
func keepLogin(ctx context.Context, out io.Writer, st ssoStart, server, tokenURL string, tok *oauth2.Token, nonce string) error {
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return errors.New("the provider returned no ID token")
	}
	idt, err := st.provider.Verifier(&oidc.Config{ClientID: st.sc.ClientID}).Verify(ctx, raw)
	if err != nil {
		return fmt.Errorf("verifying the ID token: %w", err)
	}
	if nonce != "" && subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		return errors.New("verifying the ID token: its nonce is not this login's")
	}
	var claims map[string]any
	_ = idt.Claims(&claims)
	// Named as flotilla names the person (the same rule, the server's
	// username claim).
	name := identity.OfClaims(idt.Subject, claims, identity.ClaimNames{Username: st.sc.UsernameClaim}).Name
	if tok.RefreshToken == "" {
		fmt.Fprintln(out, "warning: the provider gave no refresh token: log in again when the ID token expires")
	}
	c, err := readCLIConfig(st.path)
	if err != nil {
		return err
	}
	l := ssoLogin{Server: server, Name: name, Issuer: st.sc.Issuer, ClientID: st.sc.ClientID, TokenURL: tokenURL,
		IDToken: raw, RefreshToken: tok.RefreshToken, Expiry: idt.Expiry}
	if err := writeCLIConfig(st.path, c.withLogin(server, &l)); err != nil {
		return err
	}
	fmt.Fprintf(out, "Logged in to %s as %s\n", server, name)
	return nil
}

// ssoBearer is the ID token of the login to server, refreshed first when
// it expires within refreshAhead; "" when there is none (or the refresh
// failed: said on stderr, and the call goes without a token).
func ssoBearer(ctx context.Context, server string) string {
	path, err := cliConfigPath()
	if err != nil {
		return ""
	}
	c, err := readCLIConfig(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "flotilla: %v\n", err)
		return ""
	}
	i := slices.IndexFunc(c.Logins, func(l ssoLogin) bool { return sameServer(l.Server, server) })
	if i < 0 {
		return ""
	}
	l := c.Logins[i]
	if time.Until(l.Expiry) > refreshAhead {
		return l.IDToken
	}
	fresh, err := refreshLogin(ctx, l)
	if err != nil {
		fmt.Fprintf(os.Stderr, "flotilla: the login to %s has expired and could not be refreshed (run flotilla login --sso): %v\n", server, err)
		return ""
	}
	if err := writeCLIConfig(path, c.withLogin(server, &fresh)); err != nil {
		fmt.Fprintf(os.Stderr, "flotilla: keeping the refreshed login: %v\n", err)
	}
	return fresh.IDToken
}

// refreshLogin buys a new ID token with l's refresh token (the provider
// may rotate it).
func refreshLogin(ctx context.Context, l ssoLogin) (ssoLogin, error) {
	if l.RefreshToken == "" {
		return l, errors.New("no refresh token")
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, &http.Client{Timeout: 10 * time.Second})
	conf := oauth2.Config{ClientID: l.ClientID, Endpoint: oauth2.Endpoint{TokenURL: l.TokenURL}}
	tok, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: l.RefreshToken, Expiry: time.Unix(1, 0)}).Token()
	if err != nil {
		return l, err
	}
	raw, _ := tok.Extra("id_token").(string)
	exp, err := jwtExpiry(raw)
	if err != nil {
		return l, fmt.Errorf("the refresh gave no usable ID token: %w", err)
	}
	l.IDToken, l.Expiry = raw, exp
	if tok.RefreshToken != "" {
		l.RefreshToken = tok.RefreshToken
	}
	return l, nil
}

// jwtExpiry reads a JWT's exp claim, unverified: the server verifies the
// token; the CLI only needs to know when to refresh it.
func jwtExpiry(raw string) (time.Time, error) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return time.Time{}, errors.New("not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, fmt.Errorf("decoding the JWT: %w", err)
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == 0 {
		return time.Time{}, errors.New("the JWT has no exp")
	}
	return time.Unix(claims.Exp, 0), nil
}
