package config

import (
	"sync"
	"sync/atomic"
)

// Provider is the configuration in force. The consumers that outlive one
// event (the functions, the poll, the reconcile, the pipelines' runner...)
// read it once per event instead of keeping a copy made at start-up, so
// that a configuration swapped in (Live) is the one the next event meets.
// A *Config is a Provider of itself, for tests and for what never reloads
// (`flotilla simulate`).
type Provider interface {
	Current() *Config
}

// Current is c itself: a fixed configuration.
func (c *Config) Current() *Config { return c }

// Live holds the configuration in force and swaps it whole: a reader sees
// the old one or the new one, never a mix. Only the swap (pkg/reload)
// stores into it, with a configuration validated as Load validates.
type Live struct {
	cfg atomic.Pointer[Config]

	mu      sync.Mutex
	changed chan struct{}
}

// NewLive holds c.
func NewLive(c *Config) *Live {
	l := &Live{changed: make(chan struct{})}
	l.cfg.Store(c)
	return l
}

// Current is the configuration in force.
func (l *Live) Current() *Config { return l.cfg.Load() }

// Store puts c in force and wakes up whoever waits on Changed.
func (l *Live) Store(c *Config) {
	l.cfg.Store(c)
	l.mu.Lock()
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

// Changed is closed by the next Store: the loops that depend on the
// configuration's shape (which applications are polled, say) wait on it
// and take Current again.
func (l *Live) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}
