package intake

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/flotilla-cd/flotilla/events"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// countJournal journals nothing and counts: the intake's own CPU cost,
// without the store.
type countJournal struct{ n atomic.Int64 }

func (j *countJournal) Append(_ context.Context, evs ...cloudevents.Event) (int, error) {
	j.n.Add(int64(len(evs)))
	return len(evs), nil
}

// BenchmarkIntake measures the CPU cost of one delivery through the intake's
// handler (authentication, parsing, event building, response), per sender.
// The HTTP server, the network and the store are left out: deploy/tools/loadtest
// measures the whole path.
func BenchmarkIntake(b *testing.B) {
	const secret = "bench-s3cret"
	cases := []struct {
		name, path string
		req        func(i int64) (http.Header, []byte)
	}{
		{"cloudevents-binary", "/events", func(i int64) (http.Header, []byte) {
			return header("Content-Type", "application/json", "Ce-Specversion", "1.0", "Ce-Id", fmt.Sprint("id-", i),
					"Ce-Source", "/bench", "Ce-Type", events.TypeImagePushed, "Authorization", "Bearer "+secret),
				[]byte(`{"registry":"registry.example.com","repository":"shop/api","tag":"1.4.2","digest":"sha256:0b31a5c5c1b1d4d0e5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7c8c9cacbcc"}`)
		}},
		{"distribution", "/hooks/registry", func(i int64) (http.Header, []byte) {
			return header("Content-Type", distributionEventsV2, "Authorization", "Bearer "+secret),
				[]byte(fmt.Sprintf(`{"events":[{"id":"e-%d","timestamp":"2026-01-02T15:04:05Z","action":"push","target":{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:fea8","repository":"shop/api","tag":"1.4.2"},"request":{"host":"registry.example.com"},"actor":{"name":"ci"}}]}`, i))
		}},
		{"github-push", "/hooks/gh", func(i int64) (http.Header, []byte) {
			body := []byte(fmt.Sprintf(`{"ref":"refs/heads/main","before":"a","after":"b%d","repository":{"clone_url":"https://github.com/shop/deploy.git"},"pusher":{"name":"ci"},"commits":[{"modified":["apps/api/values.yaml"]}]}`, i))
			return githubHeaders("push", fmt.Sprint("d-", i), githubSign(secret, body)), body
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			in, err := New([]ReceiverConfig{
				{Name: "ce", Type: SenderCloudEvents, Secret: secret, RateLimit: RateLimit{PerSecond: -1}},
				{Name: "registry", Type: SenderDistribution, Secret: secret, RateLimit: RateLimit{PerSecond: -1}},
				{Name: "gh", Type: SenderGitHub, Secret: secret, RateLimit: RateLimit{PerSecond: -1}},
			}, &countJournal{})
			if err != nil {
				b.Fatal(err)
			}
			var seq atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					h, body := c.req(seq.Add(1))
					r := httptest.NewRequestWithContext(b.Context(), http.MethodPost, c.path, bytes.NewReader(body))
					r.Header = h
					w := httptest.NewRecorder()
					in.ServeHTTP(w, r)
					if w.Code != http.StatusAccepted {
						b.Fatalf("status %d: %s", w.Code, w.Body)
					}
				}
			})
		})
	}
}
