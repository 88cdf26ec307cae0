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
// real, embedded executor. It shares flotilla's process and CPU, so what
// it does per run is small: a wait reads only what changed since it last
// looked (a 1,000-cluster wave's waits scanned every cluster at each of
// the 1,000 runs' starts and ends, holding the lock each run takes).
type recorder struct {
	next *embedded.Executor

	mu    sync.Mutex
	calls map[string]map[string]*call // image ref -> cluster -> first call
	// seen is, per image ref, each run's start and successful end in the
	// order they came: the waits' feed.
	seen    map[string][]sighting
	changed chan struct{}
}

type call struct {
	rollout    string
	start, end time.Time
	err        error
}

// sighting is a run of a cluster that began (started) or returned without
// error.
type sighting struct {
	cluster string
	started bool
}

func newRecorder(next *embedded.Executor) *recorder {
	return &recorder{next: next, calls: map[string]map[string]*call{}, seen: map[string][]sighting{}, changed: make(chan struct{})}
}

func (r *recorder) Run(ctx context.Context, cluster string, p pipelines.RunParams) (pipelines.Results, error) {
	start := time.Now()
	r.see(p.Image, sighting{cluster: cluster, started: true})
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
	r.mu.Unlock()
	if err == nil {
		r.see(p.Image, sighting{cluster: cluster})
	}
	return res, err
}

// see records s of ref and wakes the waits.
func (r *recorder) see(ref string, s sighting) {
	r.mu.Lock()
	r.seen[ref] = append(r.seen[ref], s)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// until returns once every one of clusters has a sighting of ref that ok
// accepts, reading each sighting once.
func (r *recorder) until(ctx context.Context, timeout time.Duration, ref string, clusters []string, ok func(sighting) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	want := make(map[string]bool, len(clusters))
	for _, c := range clusters {
		want[c] = true
	}
	read := 0
	for {
		r.mu.Lock()
		changed, seen := r.changed, r.seen[ref]
		r.mu.Unlock()
		read = min(read, len(seen)) // forgotten meanwhile
		for ; read < len(seen); read++ {
			if ok(seen[read]) {
				delete(want, seen[read].cluster)
			}
		}
		if len(want) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// waitStarted returns once a call for ref to each of clusters has begun.
func (r *recorder) waitStarted(ctx context.Context, timeout time.Duration, ref string, clusters []string) error {
	return r.until(ctx, timeout, ref, clusters, func(s sighting) bool { return s.started })
}

// wait returns the calls for ref to every cluster once each has returned
// without error.
func (r *recorder) wait(ctx context.Context, timeout time.Duration, ref string, clusters []string) (map[string]call, error) {
	if err := r.until(ctx, timeout, ref, clusters, func(s sighting) bool { return !s.started }); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]call, len(clusters))
	for _, c := range clusters {
		out[c] = *r.calls[ref][c]
	}
	return out, nil
}

// forget drops the calls recorded for ref: a rollback reverts to a
// reference applied before.
func (r *recorder) forget(ref string) {
	r.mu.Lock()
	delete(r.calls, ref)
	delete(r.seen, ref)
	r.mu.Unlock()
}
