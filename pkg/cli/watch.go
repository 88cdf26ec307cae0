package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// changes follows the server's watch stream (GET /api/v1/watch) and
// sends each rollout it reports (every rollout, or the one of id) until
// ctx ends. It reconnects, after a pause, when the stream ends or the
// server cannot be reached.
func (c apiClient) changes(ctx context.Context, id string) <-chan rollout.Rollout {
	out := make(chan rollout.Rollout)
	go func() {
		defer close(out)
		for ctx.Err() == nil {
			_ = c.stream(ctx, id, out)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return out
}

// stream reads one connection of the watch stream.
func (c apiClient) stream(ctx context.Context, id string, out chan<- rollout.Rollout) error {
	u := strings.TrimRight(c.base, "/") + "/api/v1/watch?only=rollouts"
	if id != "" {
		u += "&rollout=" + url.QueryEscape(id)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	c.authorize(req)
	resp, err := http.DefaultClient.Do(req) // no timeout: the stream lasts
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode == http.StatusUnauthorized {
		return fmt.Errorf("%s: GET %s: %s", unauthorized, u, resp.Status)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return readRollouts(ctx, resp.Body, out)
}

// readRollouts decodes the "rollout" messages of a Server-Sent Events
// stream.
func readRollouts(ctx context.Context, body io.Reader, out chan<- rollout.Rollout) error {
	lines := bufio.NewScanner(body)
	lines.Buffer(make([]byte, 64<<10), 16<<20) // a rollout of thousands of clusters
	kind := ""
	for lines.Scan() {
		l := lines.Text()
		switch {
		case l == "":
			kind = ""
		case strings.HasPrefix(l, "event: "):
			kind = strings.TrimPrefix(l, "event: ")
		case strings.HasPrefix(l, "data: ") && kind == "rollout":
			var r rollout.Rollout
			if err := json.Unmarshal([]byte(strings.TrimPrefix(l, "data: ")), &r); err != nil {
				return err
			}
			select {
			case out <- r:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return lines.Err()
}

// screen redraws a view: on a terminal it clears the screen first,
// otherwise it separates the views with a timestamped line.
type screen struct {
	out io.Writer
	tty bool
}

func newScreen(out io.Writer) screen {
	return screen{out: out, tty: isTerminal(out) && os.Getenv("TERM") != "dumb"}
}

// isTerminal tells whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Stat() (os.FileInfo, error) })
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (s screen) draw(view func(w io.Writer, color bool)) {
	var b strings.Builder
	if s.tty {
		b.WriteString("\x1b[H\x1b[2J") // home, clear
	} else {
		fmt.Fprintf(&b, "--- %s\n", time.Now().Format(time.TimeOnly))
	}
	view(&b, s.tty)
	_, _ = io.WriteString(s.out, b.String())
}
