package main

import (
	"context"
	"sync"
	"time"

	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pipelines/embedded"
)

// recorder is the executor flotilla runs with: it timestamps the start (the
// apply request) and the end of every run and passes it through to the
// real, embedded executor.
type recorder struct {
	next *embedded.Executor

	mu      sync.Mutex
	calls   map[string]map[string]*call // image ref -> cluster -> first call
	started map[string]map[string]bool  // image ref -> cluster -> a call began
	changed chan struct{}
}

type call struct {
	rollout    string
	start, end time.Time
	err        error
}

func newRecorder(next *embedded.Executor) *recorder {
	return &recorder{next: next, calls: map[string]map[string]*call{}, started: map[string]map[string]bool{}, changed: make(chan struct{})}
}

func (r *recorder) Run(ctx context.Context, cluster string, p pipelines.RunParams) (pipelines.Results, error) {
	start := time.Now()
	r.mu.Lock()
	if r.started[p.Image] == nil {
		r.started[p.Image] = map[string]bool{}
	}
	r.started[p.Image][cluster] = true
	r.signal()
	r.mu.Unlock()
	res, err := r.next.Run(ctx, cluster, p)
	end := time.Now()
	r.mu.Lock()
	byCluster := r.calls[p.Image]
	if byCluster == nil {
		byCluster = map[string]*call{}
		r.calls[p.Image] = byCluster
	}
	if c, ok := byCluster[cluster]; !ok || c.err != nil {
		byCluster[cluster] = &call{rollout: p.Rollout, start: start, end: end, err: err}
	}
	r.signal()
	r.mu.Unlock()
	return res, err
}

// signal wakes the waits; r.mu is held.
func (r *recorder) signal() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// waitStarted returns once a call for ref to each of clusters has begun.
func (r *recorder) waitStarted(ctx context.Context, timeout time.Duration, ref string, clusters []string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		r.mu.Lock()
		changed, n := r.changed, 0
		for _, c := range clusters {
			if r.started[ref][c] {
				n++
			}
		}
		r.mu.Unlock()
		if n == len(clusters) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// wait returns the calls for ref to every cluster once each has returned
// without error.
func (r *recorder) wait(ctx context.Context, timeout time.Duration, ref string, clusters []string) (map[string]call, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		r.mu.Lock()
		changed := r.changed
		out := map[string]call{}
		for _, c := range clusters {
			if k, ok := r.calls[ref][c]; ok && k.err == nil {
				out[c] = *k
			}
		}
		r.mu.Unlock()
		if len(out) == len(clusters) {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		}
	}
}

// forget drops the calls recorded for ref: a rollback reverts to a
// reference applied before.
func (r *recorder) forget(ref string) {
	r.mu.Lock()
	delete(r.calls, ref)
	delete(r.started, ref)
	r.mu.Unlock()
}
