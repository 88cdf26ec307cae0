package cli

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// `flotilla login --sso --browser`: the authorization code flow with PKCE
// through a loopback redirect (RFC 8252), as `argocd login --sso` does.

const (
	// defaultSSOPort is --sso-port's default, argocd login --sso's: a
	// provider that wants the redirect URL registered exactly (Dex) is
	// given http://127.0.0.1:8085/auth/callback once.
	defaultSSOPort = 8085
	// ssoCallbackPath is the loopback redirect's path.
	ssoCallbackPath = "/auth/callback"
	// browserLoginWait is how long the login waits for the browser.
	browserLoginWait = 5 * time.Minute
)

// callbackResult is what the provider's redirect brought.
type callbackResult struct {
	code string
	err  error
}

// ssoBrowserLogIn runs the code flow against server's provider through a
// callback on 127.0.0.1:port (0: a free port) and keeps the login.
func ssoBrowserLogIn(ctx context.Context, out io.Writer, server string, port int) error {
	st, err := startSSO(ctx, server)
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("listening for the provider's redirect on 127.0.0.1:%d (--sso-port): %w", port, err)
	}
	redirect := "http://" + l.Addr().String() + ssoCallbackPath
	endpoint := st.provider.Endpoint()
	endpoint.AuthStyle = oauth2.AuthStyleInParams // a public client: its id, no secret
	conf := oauth2.Config{ClientID: st.sc.ClientID, Endpoint: endpoint, Scopes: st.sc.Scopes, RedirectURL: redirect}
	state, nonce, verifier := randomToken(), randomToken(), oauth2.GenerateVerifier()

	results := make(chan callbackResult, 1)
	srv := &http.Server{Handler: callbackHandler(state, results), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()

	fmt.Fprintf(out, "Open this URL in a browser on this machine and log in:\n%s\n", conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce)))
	fmt.Fprintf(out, "Waiting for the provider to redirect to %s...\n", redirect)
	wctx, cancel := context.WithTimeout(ctx, browserLoginWait)
	defer cancel()
	var res callbackResult
	select {
	case <-wctx.Done():
		return fmt.Errorf("waiting for the browser's login: %w", wctx.Err())
	case res = <-results:
	}
	if res.err != nil {
		return res.err
	}
	tok, err := conf.Exchange(ctx, res.code, oauth2.VerifierOption(verifier))
	if err != nil {
		return fmt.Errorf("exchanging the login's code: %w", err)
	}
	return keepLogin(ctx, out, st, server, endpoint.TokenURL, tok, nonce)
}

// callbackHandler takes the provider's redirect: a code with this login's
// state is sent on results, once; a redirect with another state (a forged
// one, or an old login's) is refused and the login goes on waiting; the
// provider's error ends the login.
func callbackHandler(state string, results chan<- callbackResult) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+ssoCallbackPath, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 {
			callbackPage(w, http.StatusBadRequest, "This is not the login flotilla login is waiting for (its state differs): nothing was done.")
			return
		}
		res := callbackResult{code: q.Get("code")}
		switch {
		case q.Get("error") != "":
			res.err = fmt.Errorf("the provider refused the login: %s %s", q.Get("error"), q.Get("error_description"))
		case res.code == "":
			res.err = errors.New("the provider's redirect carries no code")
		}
		select {
		case results <- res:
		default: // a second redirect of the same login: the first counts
			callbackPage(w, http.StatusConflict, "This login was already taken: go back to the terminal.")
			return
		}
		if res.err != nil {
			callbackPage(w, http.StatusUnauthorized, "Login failed: "+res.err.Error())
			return
		}
		callbackPage(w, http.StatusOK, "Logged in: go back to the terminal, flotilla login has the code. You can close this tab.")
	})
	return mux
}

var callbackTemplate = template.Must(template.New("callback").Parse(`<!doctype html>
<html><head><title>flotilla login</title></head><body><p id="result">{{.}}</p></body></html>`))

func callbackPage(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = callbackTemplate.Execute(w, msg)
}

// randomToken is 32 random bytes, base64url: a state or a nonce.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
