package app

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// kubeconfig points at an address nothing listens on: New does not call it.
const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c1, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c1, context: {cluster: c1, user: u}}]
current-context: c1
`

// testToken is the API token (named "default") of testConfig's server.
const testToken = "tok"

// testConfig loads a minimal valid config, its API token testToken; extra is appended to its server
// section.
func testConfig(t *testing.T, extra string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "c1.kubeconfig"), []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FLOTILLA_SERVER_TEST_SECRET", "q9X/3vT+k2==")
	t.Setenv("FLOTILLA_TEST_API_TOKEN", testToken)
	cfg, err := config.Parse([]byte(`
server:
  listen: 127.0.0.1:0
  dataDir: data
  apiToken: {env: FLOTILLA_TEST_API_TOKEN}
`+extra+`
receivers:
  - {name: canaries, type: flagger, secret: {env: FLOTILLA_SERVER_TEST_SECRET}}
fleet:
  clusters: [{name: c1, kubeconfig: c1.kubeconfig}]
  waves: [{clusters: [c1]}]
applications:
  - {name: podinfo, image: registry.example.com/demo/podinfo, workload: {name: podinfo}, service: {port: 9898}}
`), dir)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestExternalURL(t *testing.T) {
	tests := []struct {
		name   string
		server string // extra server fields
		listen string // Options.Listen
		want   func(addr string) string
	}{{
		name: "derived from the bound address",
		want: func(addr string) string { return "http://" + addr },
	}, {
		name:   "derived from --listen's bound address",
		listen: "127.0.0.1:0",
		want:   func(addr string) string { return "http://" + addr },
	}, {
		// --listen used to replace a configured externalURL silently.
		name:   "configured, kept under --listen",
		server: "  externalURL: https://flotilla.example.com\n",
		listen: "127.0.0.1:0",
		want:   func(string) string { return "https://flotilla.example.com" },
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(t.Context(), testConfig(t, tt.server), Options{Listen: tt.listen, NoPrune: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			if got, want := s.ExternalURL(), tt.want(s.Addr()); got != want {
				t.Errorf("ExternalURL() = %q, want %q", got, want)
			}
		})
	}
}

// A start-up error after the store opened used to panic in Close (nil
// pointer) instead of being returned.
func TestNewStartupErrorAfterStoreOpens(t *testing.T) {
	busy, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = busy.Close() })
	cfg := testConfig(t, "")
	s, err := New(t.Context(), cfg, Options{Listen: busy.Addr().String(), NoPrune: true})
	if err == nil {
		_ = s.Close()
		t.Fatal("New on a port in use: no error")
	}
	if s != nil || !strings.Contains(err.Error(), "listening on "+busy.Addr().String()) {
		t.Errorf("New = %v, %v: want nil and the listen error", s, err)
	}
	// The store was closed: it opens again.
	s, err = New(t.Context(), cfg, Options{NoPrune: true})
	if err != nil {
		t.Fatalf("New after a failed New: %v", err)
	}
	_ = s.Close()
}

func TestFlaggerHookURL(t *testing.T) {
	got := FlaggerHookURL("https://flotilla.example.com/", "canaries", "q9X/3v?T#k%2==")
	want := "https://flotilla.example.com/hooks/canaries/q9X%2F3v%3FT%23k%252=="
	if got != want {
		t.Errorf("FlaggerHookURL = %q, want %q", got, want)
	}
}

// Headers are read before any authentication: an anonymous client must not
// make flotilla hold a megabyte of them per connection, nor a connection
// for long by sending them slowly. What the client sees is net/http's
// (README, "What flotilla refuses"): 431 for too many, and for headers
// that do not finish in time the connection closed without an answer, or
// 400 when not even the request line is complete.
func TestHeadersRefused(t *testing.T) {
	const timeout = 300 * time.Millisecond
	s := runServer(t, testConfig(t, ""), Options{NoPrune: true, ReadHeaderTimeout: timeout})
	tests := []struct {
		name string
		send string
		want string // the answer's status line; "" for none
	}{{
		name: "headers over MaxHeaderBytes",
		send: "POST /hooks/canaries/x HTTP/1.1\r\nHost: flotilla\r\nX-Padding: " + strings.Repeat("x", 2*MaxHeaderBytes) + "\r\n\r\n",
		want: "HTTP/1.1 431 Request Header Fields Too Large",
	}, {
		name: "nothing sent",
	}, {
		name: "a request line never finished",
		send: "POST /hooks/canaries/x",
		want: "HTTP/1.1 400 Bad Request",
	}, {
		name: "a header line never finished",
		send: "POST /hooks/canaries/x HTTP/1.1\r\nHost: flotilla\r\nX-Delivery: 1",
	}, {
		name: "headers never ended",
		send: "POST /hooks/canaries/x HTTP/1.1\r\nHost: flotilla\r\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", s.Addr())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			if _, err := io.WriteString(conn, tt.send); err != nil {
				t.Fatal(err)
			}
			// Closed well within 10 timeouts, or the bound does not hold.
			if err := conn.SetReadDeadline(time.Now().Add(10 * timeout)); err != nil {
				t.Fatal(err)
			}
			answer, err := io.ReadAll(conn)
			if err != nil {
				t.Fatalf("reading the answer (%q so far): %v: want the connection closed", answer, err)
			}
			status, _, _ := strings.Cut(string(answer), "\r\n")
			if status != tt.want {
				t.Errorf("answer %q, want status line %q", answer, tt.want)
			}
		})
	}
}

// A sink no longer configured must not hold the journal's retention back
// with the cursor it left: New forgets it (and keeps it while configured).
func TestNewForgetsTheCursorOfARemovedSink(t *testing.T) {
	cfg := testConfig(t, "")
	path := filepath.Join(cfg.Server.DataDir, "flotilla.db")
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	e := cloudevents.NewEvent()
	e.SetID("e1")
	e.SetSource("/test")
	e.SetType("dev.flotilla.test")
	if _, err := st.Append(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"sink", "runtime"} {
		if err := st.SetCursor(t.Context(), c, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		sink string
		want []string
	}{
		{"http://127.0.0.1:1/", []string{"runtime", "sink"}},
		{"", []string{"runtime"}},
	} {
		cfg.Events.Sink = tt.sink
		s, err := New(t.Context(), cfg, Options{NoPrune: true})
		if err != nil {
			t.Fatal(err)
		}
		_ = s.Close()
		st, err := store.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range []string{"runtime", "sink"} {
			if seq, err := st.Cursor(t.Context(), c); err == nil && seq == 1 {
				got = append(got, c)
			}
		}
		_ = st.Close()
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("sink %q: cursors (-want +got):\n%s", tt.sink, diff)
		}
	}
}

// runServer builds flotilla from cfg and o and runs it until the test ends;
// then it must stop within 20 s.
func runServer(t *testing.T, cfg *config.Config, o Options) *Server {
	t.Helper()
	s, err := New(t.Context(), cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	return s
}
