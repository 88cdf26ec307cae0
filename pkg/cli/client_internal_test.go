package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// A read answered 503 (a scale-out replica whose NATS did not answer in
// time) is asked again and succeeds; a control is sent once; a 404 is not
// asked again.
func TestGetAsksABusyServerAgain(t *testing.T) {
	var calls atomic.Int32
	busyFor := int32(2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		switch {
		case r.URL.Path == "/missing":
			http.Error(w, `{"error":"no rollout x"}`, http.StatusNotFound)
		case n <= busyFor:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"listing rollouts: nats: timeout"}`))
		default:
			_, _ = w.Write([]byte(`{"phase":"Succeeded"}`))
		}
	}))
	defer srv.Close()
	c := apiClient{base: srv.URL}

	var v struct{ Phase string }
	if err := c.get(t.Context(), "/ro", &v); err != nil || v.Phase != "Succeeded" || calls.Load() != 3 {
		t.Errorf("get = %v, phase %q after %d calls; want Succeeded after 3", err, v.Phase, calls.Load())
	}

	calls.Store(0)
	if err := c.post(t.Context(), "/ro/pause", map[string]string{}); err == nil || !strings.Contains(err.Error(), "nats: timeout") || calls.Load() != 1 {
		t.Errorf("post = %v after %d calls; want the 503's error after 1", err, calls.Load())
	}

	calls.Store(100)
	if err := c.get(t.Context(), "/missing", &v); err == nil || err.Error() != "no rollout x" || calls.Load() != 101 {
		t.Errorf("get of a missing rollout = %v after %d calls; want its 404's error at once", err, calls.Load()-100)
	}
}
