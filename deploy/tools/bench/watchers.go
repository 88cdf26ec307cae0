package main

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// watchers holds -watchers streams of flotilla's GET /api/v1/watch open
// during a scenario's measured runs, each reading every message as a web UI
// page or `--watch` does: the load of people watching the fleet.
type watchers struct {
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	messages   atomic.Int64
	reconnects atomic.Int64
}

// startWatchers opens n streams of base's watch stream (every rollout),
// with the API token. It returns once every stream is open.
func startWatchers(ctx context.Context, base, token string, n int) *watchers {
	ctx, cancel := context.WithCancel(ctx)
	w := &watchers{cancel: cancel}
	client := &http.Client{Transport: bearer{token, &http.Transport{MaxIdleConnsPerHost: n}}}
	var open sync.WaitGroup
	open.Add(n)
	for range n {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			first := true
			for ctx.Err() == nil {
				w.stream(ctx, client, base, func() {
					if first {
						first = false
						open.Done()
					}
				})
				if ctx.Err() == nil {
					w.reconnects.Add(1)
					time.Sleep(100 * time.Millisecond)
				}
			}
			if first {
				open.Done()
			}
		}()
	}
	open.Wait()
	return w
}

// stream reads one connection until it ends, counting messages; opened is
// called once the stream's first line arrived.
func (w *watchers) stream(ctx context.Context, client *http.Client, base string, opened func()) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/watch", nil)
	if err != nil {
		return
	}
	resp, err := client.Do(req)
	if err != nil {
		return
	}
	defer func() { _ = resp.Body.Close() }()
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 64<<10), 16<<20)
	for lines.Scan() {
		opened()
		if strings.HasPrefix(lines.Text(), "data: ") {
			w.messages.Add(1)
		}
	}
}

// stop closes the streams and says how many messages they read and how
// often one was dropped (and reconnected).
func (w *watchers) stop() (messages, reconnects int64) {
	w.cancel()
	w.wg.Wait()
	return w.messages.Load(), w.reconnects.Load()
}
