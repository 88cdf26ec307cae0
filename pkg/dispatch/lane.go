package dispatch

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Lane is a pool of workers of its own, for functions whose calls wait long
// (an executor following a pipeline run to its end): they never take the
// workers of the functions that move rollouts on. Every event a laned
// function consumes is its own key, so two runs never wait for each other
// either. A Function joins a lane by implementing [Laned].
type Lane struct {
	Name string
	// Workers bounds the calls running at once in the lane.
	Workers int
	// CallTimeout is the deadline of one call.
	CallTimeout time.Duration
	// Attempts is the number of calls per event before the function gives
	// up (a function.failed event); MaxBackoff caps the wait between them.
	Attempts   int
	MaxBackoff time.Duration
}

// Laned is a Function that runs in a lane of its own.
type Laned interface {
	Lane() Lane
}

// lane is a pool of workers and its queue of ready partitions.
type lane struct {
	Lane
	ready    chan *partition
	inflight int // events of the lane read and not yet handled (scheduler.mu)
}

// defaultLaneName names the default lane in metrics.
const defaultLaneName = "functions"

// metricName is the lane's name in metrics.
func (l *lane) metricName() string {
	if l.Name == "" {
		return defaultLaneName
	}
	return l.Name
}

// defaultMaxBackoff caps the retry backoff of the default lane.
const defaultMaxBackoff = 5 * time.Second

// CheckLanes reports whether fns may run together: each lane well formed
// and all the consumers of a type in one lane. New checks it; a replica in
// scale-out mode, whose dispatchers start only with the partitions it
// takes, checks it before it starts.
func CheckLanes(fns []Function) error {
	_, _, err := buildLanes(Options{}, fns)
	return err
}

// buildLanes returns the default lane (from o) and the lanes of fns by
// consumed type. Every function consuming a type must be in the same lane.
func buildLanes(o Options, fns []Function) (*lane, map[string]*lane, error) {
	def := &lane{Lane: Lane{Name: "", Workers: o.Workers, CallTimeout: o.CallTimeout, Attempts: o.Attempts, MaxBackoff: defaultMaxBackoff}}
	byName := map[string]*lane{}
	byType := map[string]*lane{}
	for _, f := range fns {
		l := def
		if ld, ok := f.(Laned); ok {
			spec := ld.Lane()
			if spec.Name == "" || spec.Workers <= 0 || spec.CallTimeout <= 0 || spec.Attempts <= 0 || spec.MaxBackoff <= 0 {
				return nil, nil, fmt.Errorf("dispatch: function %s: lane %+v needs a name, workers, a call timeout, attempts and a backoff cap", f.Name(), spec)
			}
			if byName[spec.Name] == nil {
				byName[spec.Name] = &lane{Lane: spec}
			}
			l = byName[spec.Name]
		}
		for _, t := range f.Consumes() {
			if prev, ok := byType[t]; ok && prev != l {
				return nil, nil, fmt.Errorf("dispatch: the consumers of %s are in different lanes (%q, %q)", t, prev.Name, l.Name)
			}
			byType[t] = l
		}
	}
	return def, byType, nil
}

// slots bound the calls of each lane across the dispatchers of one
// replica (Shards): its partitions' dispatchers each run the lane's
// workers, and take a slot of the lane's shared pool for each call.
type slots struct {
	mu     sync.Mutex
	byLane map[string]chan struct{}
}

// pool is lane l's pool, made with l's workers at its first use.
func (s *slots) pool(l *lane) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.byLane[l.Name]
	if !ok {
		p = make(chan struct{}, l.Workers)
		s.byLane[l.Name] = p
	}
	return p
}

// acquire takes a slot of l's pool, false when ctx ended first. A nil
// slots (one dispatcher) always has room: its workers are the bound.
func (s *slots) acquire(ctx context.Context, l *lane) bool {
	if s == nil {
		return true
	}
	select {
	case s.pool(l) <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// release gives back a slot acquire took.
func (s *slots) release(l *lane) {
	if s != nil {
		<-s.pool(l)
	}
}
