package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// apiClient talks to the API of a running flotilla. token, when set, is
// sent as `Authorization: Bearer` with every request, reads and the watch
// stream included: flotilla answers every call without one 401 (unless its
// server.anonymousRead opens the reads).
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

// tokenFlag adds --token (default $FLOTILLA_TOKEN) to a command's flags.
// Its help does not print the default: that is a secret.
func tokenFlag(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "token", os.Getenv("FLOTILLA_TOKEN"), "an API token of the server, sent with every call (env FLOTILLA_TOKEN)")
	fs.Lookup("token").DefValue = ""
}

// unauthorized is the error of a 401 answer: what to set, then the
// server's reason.
const unauthorized = "flotilla answered 401: set --token or FLOTILLA_TOKEN (an API token of the server)"

func defaultServer() string {
	if s := os.Getenv("FLOTILLA_SERVER"); s != "" {
		return s
	}
	return "http://127.0.0.1:8080"
}

// busyFor is how long a read answered "busy" (502, 503, 504: flotilla
// could not answer now, as a scale-out replica whose NATS is electing a
// leader answers) is asked again, with a growing pause, before its error is
// the command's. Reads only: a control is sent once, and its error says
// whether to send it again.
const busyFor = 30 * time.Second

func (c apiClient) get(ctx context.Context, path string, v any) error {
	deadline := time.Now().Add(busyFor)
	wait := 250 * time.Millisecond
	for {
		err := c.do(ctx, http.MethodGet, path, nil, v)
		var ae *apiError
		if !errors.As(err, &ae) || !ae.busy() || time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 4*time.Second)
	}
}

// apiError is an answer of the API other than 2xx.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

// busy tells an answer that asking again later may change.
func (e *apiError) busy() bool {
	return e.status == http.StatusBadGateway || e.status == http.StatusServiceUnavailable || e.status == http.StatusGatewayTimeout
}

// jsonBody encodes a request body.
func jsonBody(v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding request: %w", err)
	}
	return body, nil
}

// post sends v as JSON with the bearer token and fails on any non-2xx.
func (c apiClient) post(ctx context.Context, path string, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding request: %w", err)
	}
	return c.do(ctx, http.MethodPost, path, body, nil)
}

// do sends one request to the API and decodes a 2xx JSON answer into out
// (when not nil); an error answer becomes an error with the server's
// message (a 401's says to set a token).
func (c apiClient) do(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.base, "/")+path, rd)
	if err != nil {
		return fmt.Errorf("building request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c.authorize(req)
	hc := c.http
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("reaching flotilla at %s (is `flotilla serve` running? --server or FLOTILLA_SERVER): %w", c.base, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return fmt.Errorf("reading response: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Error string }
		msg := fmt.Sprintf("%s %s: %s", method, path, resp.Status)
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		if resp.StatusCode == http.StatusUnauthorized {
			msg = unauthorized + ": " + msg
		}
		return &apiError{status: resp.StatusCode, msg: msg}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decoding response of %s: %w", path, err)
	}
	return nil
}

// authorize sets the request's bearer token: the client's, else the ID
// token of a `flotilla login --sso` to its server (login.go), refreshed
// when about to expire.
func (c apiClient) authorize(req *http.Request) {
	token := c.token
	if token == "" {
		token = ssoBearer(req.Context(), c.base)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
}
