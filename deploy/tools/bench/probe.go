package main

import (
	"context"
	"sync"
	"time"
)

// stallProbe measures how late this process gets to run: a goroutine sleeps
// 1 ms in a loop and records every sleep that overshot by more than 1 ms. A
// long overshoot during a measurement means flotilla (in this process) was
// waiting for a CPU, not for its own work.
type stallProbe struct {
	mu     sync.Mutex
	stalls []stall // oldest first
}

type stall struct {
	from, to time.Time // the late part of the sleep
}

const probeTick = time.Millisecond

func newStallProbe(ctx context.Context) *stallProbe {
	p := &stallProbe{}
	go func() {
		for ctx.Err() == nil {
			start := time.Now()
			time.Sleep(probeTick)
			end := time.Now()
			if end.Sub(start) > 2*probeTick {
				p.mu.Lock()
				p.stalls = append(p.stalls, stall{from: start.Add(probeTick), to: end})
				if len(p.stalls) > 100000 {
					p.stalls = append(p.stalls[:0], p.stalls[50000:]...)
				}
				p.mu.Unlock()
			}
		}
	}()
	return p
}

// within returns the longest stall overlapping [from, to] and the total
// stalled time inside it.
func (p *stallProbe) within(from, to time.Time) (longest, total time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.stalls) - 1; i >= 0; i-- {
		s := p.stalls[i]
		if s.to.Before(from) {
			break
		}
		a, b := s.from, s.to
		if a.Before(from) {
			a = from
		}
		if b.After(to) {
			b = to
		}
		if d := b.Sub(a); d > 0 {
			longest, total = max(longest, s.to.Sub(s.from)), total+d
		}
	}
	return longest, total
}
