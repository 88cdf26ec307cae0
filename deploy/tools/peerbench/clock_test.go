package main

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
)

// TestPushClock: a push's clock is the start of its first manifest PUT, not
// the blobs' uploads before it, a manifest's HEAD or GET, nor a retried PUT.
func TestPushClock(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	t0 := time.Date(2026, 12, 3, 13, 0, 0, 0, time.UTC)
	type req struct{ method, path string }
	tests := []struct {
		name string
		reqs []req
		want time.Time // t0 + the index of the request that started the clock
	}{
		{"blobs then the manifest", []req{
			{"HEAD", "/v2/peers/keel-webhook/blobs/sha256:aa"},
			{"POST", "/v2/peers/keel-webhook/blobs/uploads/"},
			{"PUT", "/v2/peers/keel-webhook/blobs/uploads/1234"},
			{"PUT", "/v2/peers/keel-webhook/manifests/1.2.0"},
		}, t0.Add(3 * time.Second)},
		{"a retried PUT keeps the first", []req{
			{"PUT", "/v2/peers/flux-webhook/manifests/1.2.0"},
			{"PUT", "/v2/peers/flux-webhook/manifests/1.2.0"},
		}, t0},
		{"a manifest read is no push", []req{
			{"HEAD", "/v2/peers/flux-webhook/manifests/1.2.0"},
			{"GET", "/v2/peers/flux-webhook/manifests/1.2.0"},
			{"PUT", "/v2/peers/flux-webhook/manifests/sha256:bb"},
		}, t0.Add(2 * time.Second)},
		{"a repository named manifests uploading a blob", []req{
			{"PUT", "/v2/team/manifests/blobs/uploads/1234"},
		}, time.Time{}},
		{"no manifest", []req{
			{"PUT", "/v2/peers/keel-webhook/blobs/uploads/1234"},
		}, time.Time{}},
		{"no reference", []req{
			{"PUT", "/v2/peers/keel-webhook/manifests/"},
		}, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newPushClock(http.DefaultTransport)
			i := 0
			c.now = func() time.Time { return t0.Add(time.Duration(i) * time.Second) }
			for ; i < len(tt.reqs); i++ {
				r, err := http.NewRequest(tt.reqs[i].method, srv.URL+tt.reqs[i].path, nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := c.RoundTrip(r)
				if err != nil {
					t.Fatal(err)
				}
				_ = resp.Body.Close()
			}
			if diff := cmp.Diff(tt.want, c.manifestAt()); diff != "" {
				t.Errorf("manifestAt (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPushStartsTheClockAtTheManifest: a push to a registry returns the
// moment its manifest PUT started: after the push began, no later than the
// registry received that PUT, and before the push returned.
func TestPushStartsTheClockAtTheManifest(t *testing.T) {
	var mu sync.Mutex
	var received time.Time
	reg := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isManifestPut(r.Method, r.URL.Path) {
			mu.Lock()
			received = time.Now()
			mu.Unlock()
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	r := &registry{host: strings.TrimPrefix(srv.URL, "http://")}
	start := time.Now()
	_, at, err := r.push(t.Context(), "peers/keel-webhook", "1.2.0")
	end := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if received.IsZero() {
		t.Fatal("the registry received no manifest PUT")
	}
	if at.Before(start) || at.After(received) || !at.Before(end) {
		t.Errorf("the push's moment %s is not in [push started %s, manifest received %s], before %s",
			at.Format(time.StampMicro), start.Format(time.StampMicro), received.Format(time.StampMicro), end.Format(time.StampMicro))
	}
}
