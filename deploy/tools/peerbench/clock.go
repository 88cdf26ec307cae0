package main

import (
	"net/http"
	"strings"
	"sync"
	"time"
)

// pushClock is the transport of one push: it notes when the push's
// manifest PUT starts, before its first byte is sent. That is the push's
// moment on every measure's clock: the tag exists for nobody before it, the
// registry stores the manifest and notifies its endpoints while that
// request is in flight (so a tool can change a Deployment before the
// registry's answer reaches the bench), and the blobs uploaded before it
// are the same for every tool.
type pushClock struct {
	next http.RoundTripper
	now  func() time.Time
	mu   sync.Mutex
	at   time.Time
}

func newPushClock(next http.RoundTripper) *pushClock {
	return &pushClock{next: next, now: time.Now}
}

func (c *pushClock) RoundTrip(r *http.Request) (*http.Response, error) {
	if isManifestPut(r.Method, r.URL.Path) {
		c.mu.Lock()
		if c.at.IsZero() {
			c.at = c.now()
		}
		c.mu.Unlock()
	}
	return c.next.RoundTrip(r)
}

// manifestAt is when the first manifest PUT started (a retried PUT keeps
// the first's), zero if none did.
func (c *pushClock) manifestAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at
}

// isManifestPut tells whether a request writes a manifest: PUT
// /v2/<name>/manifests/<reference> (a reference, tag or digest, has no
// slash; a repository may have a component named manifests).
func isManifestPut(method, path string) bool {
	if method != http.MethodPut {
		return false
	}
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	return len(segs) >= 4 && segs[0] == "v2" && segs[len(segs)-2] == "manifests" && segs[len(segs)-1] != ""
}
