package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/pkg/canary"
)

// FlaggerState says whether Flagger works in a cluster (Health.Flagger).
type FlaggerState string

const (
	// FlaggerReady: its Canary API is served and it has taken up every
	// canary flotilla made there (each one older than FlaggerGrace carries
	// a status).
	FlaggerReady FlaggerState = "Ready"
	// FlaggerNotReady: canaries older than FlaggerGrace carry no status:
	// no Flagger controller runs, or it cannot write.
	FlaggerNotReady FlaggerState = "NotReady"
	// FlaggerMissing: the cluster does not serve Flagger's Canary.
	FlaggerMissing FlaggerState = "Missing"
	// FlaggerUnknown: the cluster could not be read.
	FlaggerUnknown FlaggerState = "Unknown"
)

// FlaggerGrace is how long a new canary may wait for Flagger's first
// status before Flagger counts as not ready.
const FlaggerGrace = 30 * time.Second

// Health is what a cluster answered when flotilla last looked.
type Health struct {
	// Reachable: its API server answered; Kubernetes is its version.
	Reachable  bool
	Kubernetes string
	Flagger    FlaggerState
	// Canaries counts flotilla's canaries in the cluster, Waiting those
	// older than FlaggerGrace without a status from Flagger.
	Canaries, Waiting int
	// Detail says what failed, "" when nothing did.
	Detail string
	// Checked is when it was read.
	Checked time.Time
}

// Health read within HealthTTL is answered again, not read anew; a read
// waits at most healthTimeout for the cluster.
const (
	HealthTTL     = 10 * time.Second
	healthTimeout = 3 * time.Second
)

type healthEntry struct {
	mu sync.Mutex
	h  Health
}

// Health reads a cluster's health (Reach, then flotilla's canaries in
// every namespace), or answers the one read within HealthTTL. Concurrent
// callers share one read.
func (s *Set) Health(ctx context.Context, name string) Health {
	s.mu.Lock()
	if s.health == nil {
		s.health = map[string]*healthEntry{}
	}
	e, ok := s.health[name]
	if !ok {
		e = &healthEntry{}
		s.health[name] = e
	}
	s.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if now := time.Now(); !e.h.Checked.IsZero() && now.Sub(e.h.Checked) < HealthTTL {
		return e.h
	}
	e.h = s.readHealth(ctx, name)
	return e.h
}

func (s *Set) readHealth(ctx context.Context, name string) Health {
	h := Health{Flagger: FlaggerUnknown, Checked: time.Now()}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	cfg, err := s.Config(name)
	if err != nil {
		h.Detail = err.Error()
		return h
	}
	p, err := Reach(ctx, cfg)
	if p.Version != "" {
		h.Reachable, h.Kubernetes = true, p.Version
	}
	if err != nil {
		h.Detail = err.Error()
		return h
	}
	if !p.Flagger {
		h.Flagger, h.Detail = FlaggerMissing, "Flagger's Canary ("+FlaggerGroupVersion+") is not served: install Flagger (flotilla fleet bootstrap)"
		return h
	}
	c, err := s.clientsFor(name)
	if err != nil {
		h.Detail = err.Error()
		return h
	}
	// flotilla's canaries only: another tool's may wait for a Flagger of
	// their own.
	list, err := c.flagger.FlaggerV1beta1().Canaries(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		LabelSelector: canary.LabelManagedBy + "=" + canary.ManagedBy,
	})
	if err != nil {
		h.Detail = fmt.Sprintf("listing canaries: %v", err)
		return h
	}
	h.Flagger, h.Canaries, h.Waiting, h.Detail = JudgeFlagger(list.Items, h.Checked)
	return h
}

// JudgeFlagger says, from the canaries of a cluster that serves
// Flagger's Canary, read at now, whether Flagger has taken them up:
// Ready unless a canary older than FlaggerGrace has no status phase.
func JudgeFlagger(cs []flaggerv1.Canary, now time.Time) (state FlaggerState, canaries, waiting int, detail string) {
	for _, c := range cs {
		if c.Status.Phase == "" && now.Sub(c.CreationTimestamp.Time) >= FlaggerGrace {
			if waiting == 0 {
				detail = "canary " + c.Namespace + "/" + c.Name
			}
			waiting++
		}
	}
	if waiting == 0 {
		return FlaggerReady, len(cs), 0, ""
	}
	if waiting > 1 {
		detail += fmt.Sprintf(" and %d more", waiting-1)
	}
	return FlaggerNotReady, len(cs), waiting, fmt.Sprintf("%s without a status from Flagger after %s: is Flagger running?", detail, FlaggerGrace)
}
