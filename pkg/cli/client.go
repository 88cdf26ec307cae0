package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// apiClient reads the API of a running flotilla.
type apiClient struct {
	base string
	http *http.Client
}

func defaultServer() string {
	if s := os.Getenv("FLOTILLA_SERVER"); s != "" {
		return s
	}
	return "http://127.0.0.1:8080"
}

func (c apiClient) get(ctx context.Context, path string, v any) error {
	return c.do(ctx, http.MethodGet, path, "", nil, v)
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
func (c apiClient) post(ctx context.Context, path, token string, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding request: %w", err)
	}
	return c.do(ctx, http.MethodPost, path, token, body, nil)
}

// do sends one request to the API and decodes a 2xx JSON answer into out
// (when not nil); an error answer becomes an error with the server's
// message.
func (c apiClient) do(ctx context.Context, method, path, token string, body []byte, out any) error {
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
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
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
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s", e.Error)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decoding response of %s: %w", path, err)
	}
	return nil
}
