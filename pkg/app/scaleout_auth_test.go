package app

import (
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
	"github.com/flotilla-cd/flotilla/pkg/testkit/natstest"
)

// busFiles are the credentials and TLS files of a scale-out config; the
// empty ones are left out.
type busFiles struct{ creds, ca, cert, key string }

// securedBus is the server.bus line of a config for a one-node cluster at
// url, with files f.
func securedBus(url string, f busFiles) string {
	bus := fmt.Sprintf("url: %q, stream: SECURED, replicas: 1, partitions: 2, replica: a", url)
	if f.creds != "" {
		bus += fmt.Sprintf(", credentialsFile: %q", f.creds)
	}
	var tls []string
	for _, kv := range [][2]string{{"caFile", f.ca}, {"certFile", f.cert}, {"keyFile", f.key}} {
		if kv[1] != "" {
			tls = append(tls, fmt.Sprintf("%s: %q", kv[0], kv[1]))
		}
	}
	if len(tls) > 0 {
		bus += ", tls: {" + strings.Join(tls, ", ") + "}"
	}
	return "  bus: {" + bus + "}\n"
}

// Scale-out mode on a NATS server that requires TLS with a client
// certificate and a user's JWT (operator mode): with the credentials file
// and the TLS files, openScaleOut creates the stream and the buckets, and
// an event and a document go through; without one of them, or with a
// stranger's, it fails at once and says what was refused.
func TestScaleOutSecuredBus(t *testing.T) {
	nc, err := natstest.StartSecured(t.Context(), t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Stop)
	a := nc.Auth()
	good := busFiles{creds: a.CredsFile, ca: a.CAFile, cert: a.CertFile, key: a.KeyFile}
	log := slog.New(slog.DiscardHandler) // its callbacks may outlive the test

	t.Run("accepted", func(t *testing.T) {
		so, err := openScaleOut(t.Context(), testConfig(t, securedBus(nc.URL(), good)).Server, dispatch.WallClock, log)
		if err != nil {
			t.Fatalf("openScaleOut (server log %s): %v", nc.Log(0), err)
		}
		defer so.close()
		checkStreams(t, so, []string{
			"KV_SECURED_apps", "KV_SECURED_archive", "KV_SECURED_cursors", "KV_SECURED_docs",
			"KV_SECURED_ids", "KV_SECURED_rollouts", "KV_SECURED_timers", "SECURED",
		})
		checkRoundTrip(t, so)
	})

	for _, tc := range []struct {
		name  string
		files busFiles
		want  string // a regexp the error matches
	}{
		{"no credentials file", busFiles{ca: good.ca, cert: good.cert, key: good.key}, `nats: Authorization Violation`},
		{"a user of an unknown account", busFiles{creds: a.UnknownCredsFile, ca: good.ca, cert: good.cert, key: good.key}, `nats: Authorization Violation`},
		// The server refuses the handshake after it completes on the
		// client's side: nats.go says so, or passes on the server's alert.
		{"no client certificate", busFiles{creds: good.creds, ca: good.ca}, `nats: tls error: connection closed by remote after TLS handshake|remote error: tls: certificate required`},
		{"a CA that does not sign the server", busFiles{creds: good.creds, ca: a.OtherCAFile, cert: good.cert, key: good.key}, `nats: tls error: tls: failed to verify certificate: x509: certificate signed by unknown authority`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, securedBus(nc.URL(), tc.files))
			start := time.Now()
			so, err := openScaleOut(t.Context(), cfg.Server, dispatch.WallClock, log)
			if err == nil {
				so.close()
				t.Fatal("openScaleOut succeeded")
			}
			if !regexp.MustCompile(tc.want).MatchString(err.Error()) {
				t.Errorf("openScaleOut: %v\nwant an error matching %q", err, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("openScaleOut failed after %v, want at once", d)
			}
		})
	}
}

// checkStreams compares the account's streams with want (sorted).
func checkStreams(t *testing.T, so *scaleOut, want []string) {
	t.Helper()
	js, err := jetstream.New(so.nc)
	if err != nil {
		t.Fatal(err)
	}
	names := js.StreamNames(t.Context())
	var got []string
	for n := range names.Name() {
		got = append(got, n)
	}
	if err := names.Err(); err != nil {
		t.Fatalf("listing the streams: %v", err)
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("streams (-want +got):\n%s", diff)
	}
}

// checkRoundTrip appends an event to the bus and writes a document, and
// reads both back.
func checkRoundTrip(t *testing.T, so *scaleOut) {
	t.Helper()
	e, err := events.New("w1", "/test", events.TypeWaveStarted, events.WaveStarted{RolloutID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := so.bus.Append(t.Context(), e); err != nil {
		t.Fatalf("Append: %v", err)
	}
	recs, err := so.bus.Read(t.Context(), 0, 0)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.Event.ID())
	}
	if diff := cmp.Diff([]string{"w1"}, ids); diff != "" {
		t.Errorf("events read back (-want +got):\n%s", diff)
	}
	if err := so.docs.Put(t.Context(), "test", "k", map[string]string{"v": "1"}); err != nil {
		t.Fatalf("Put: %v", err)
	}
	var doc map[string]string
	if found, err := so.docs.Get(t.Context(), "test", "k", &doc); err != nil || !found {
		t.Fatalf("Get: found %v, %v", found, err)
	}
	if diff := cmp.Diff(map[string]string{"v": "1"}, doc); diff != "" {
		t.Errorf("document read back (-want +got):\n%s", diff)
	}
}
