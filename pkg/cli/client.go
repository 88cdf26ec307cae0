package cli

import (
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.base, "/")+path, nil)
	if err != nil {
		return fmt.Errorf("building request: %w", err)
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
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return fmt.Errorf("reading response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s", e.Error)
		}
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decoding response of %s: %w", path, err)
	}
	return nil
}
