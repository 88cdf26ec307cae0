package main

import (
	"context"
	"fmt"
	"time"
)

// measure is one measured push of one subject.
type measure struct {
	subject string
	tag     string
	// pushed is the push's moment: its manifest PUT started (pushClock);
	// every time below counts from it.
	pushed time.Time
	push   time.Duration // pushing took, blobs and manifest
	// firstSpec, allSpec: push -> the first / every cluster's Deployment
	// spec carries the version; allPrimary: push -> every cluster's
	// primary runs it (Flagger promoted).
	firstSpec, allSpec, allPrimary time.Duration
	firstCluster                   string
	// cpu, peakKiB: what the subject's tool's processes used from the
	// push to the end of the pause after it (CPU), and the sum of their
	// peak RSS in that time.
	cpu     time.Duration
	peakKiB int64
}

// results are a run's measures and what each tool's processes used.
type results struct {
	subjects []*subject
	measures []measure
	usage    []usage
	drops    []drop
	fails    []failure
	notRun   []string       // the peers left out, and why
	procs    map[string]int // subject -> how many processes its tool has
	clusters int
	took     time.Duration
	keelPoll string
}

func (b *bench) run(ctx context.Context) (*results, error) {
	res := &results{subjects: b.subs, clusters: len(b.names), keelPoll: "@every 1m", procs: map[string]int{}}
	for _, s := range b.subs {
		res.procs[s.name] = len(b.pidsOf(s))
	}
	if err := b.createWorkloads(ctx); err != nil {
		return nil, err
	}
	var nss []string
	for _, s := range b.subs {
		nss = append(nss, s.ns)
	}
	b.track = newTracker(b.kube, nss)

	// The first version everywhere: flotilla rolls it out (its first
	// rollout renders the Canaries), Keel has it already (same tag), Flux
	// applies it from the deployments repository once its objects exist
	// (created after the push, so that the first scan finds the tag).
	b.log.Info("pushing the first version of every repository; flotilla rolls it out")
	for _, s := range b.subs {
		if _, err := b.pushNext(ctx, s); err != nil {
			return nil, err
		}
	}
	if b.o.flux {
		if err := b.applyFluxObjects(ctx); err != nil {
			return nil, err
		}
	}
	if b.o.kargo {
		if err := b.applyKargoObjects(ctx); err != nil {
			return nil, err
		}
	}
	for _, s := range b.subs {
		s.good = tag(firstVersion)
	}
	for _, s := range b.subs[:2] {
		if err := b.waitPrimaries(ctx, s, tag(firstVersion), s.digests[tag(firstVersion)], time.Time{}); err != nil {
			return nil, fmt.Errorf("%s's first rollout: %w", s.name, err)
		}
	}
	if err := b.copyCanaries(ctx, b.subs[0].ns); err != nil {
		return nil, err
	}
	for _, s := range b.subs[2:] {
		if err := b.waitPrimaries(ctx, s, tag(firstVersion), "", time.Time{}); err != nil {
			return nil, fmt.Errorf("Flagger initializing %s's Canaries: %w", s.name, err)
		}
	}
	b.meter = newMeter()
	cpu0 := b.cpuOf()

	// One unmeasured push per webhook subject, then the measured ones
	// round-robin, so a drift of the machine's load spreads over all.
	for round := 0; round <= b.o.pushes; round++ {
		for _, s := range b.subs {
			if s.poll {
				continue
			}
			m, err := b.measurePush(ctx, s)
			if err != nil {
				return nil, err
			}
			if round == 0 {
				b.log.Info("warm-up push done", "subject", s.name, "every_primary", m.allPrimary.Round(time.Millisecond))
				continue
			}
			b.log.Info("measured", "subject", s.name, "tag", m.tag, "first_spec", m.firstSpec.Round(time.Millisecond),
				"every_spec", m.allSpec.Round(time.Millisecond), "every_primary", m.allPrimary.Round(time.Millisecond))
			res.measures = append(res.measures, m)
		}
	}
	for _, s := range b.subs {
		if !s.poll {
			continue
		}
		for range b.o.pollPushes {
			m, err := b.measurePush(ctx, s)
			if err != nil {
				return nil, err
			}
			b.log.Info("measured", "subject", s.name, "tag", m.tag, "first_spec", m.firstSpec.Round(time.Millisecond),
				"every_spec", m.allSpec.Round(time.Millisecond), "every_primary", m.allPrimary.Round(time.Millisecond))
			res.measures = append(res.measures, m)
		}
	}
	res.usage = b.wholeRun(cpu0)
	if b.o.dropWait > 0 {
		var err error
		if res.drops, err = b.dropWebhooks(ctx); err != nil {
			return nil, err
		}
	}
	if b.o.failWait > 0 {
		for _, s := range b.subs {
			if s.poll {
				continue
			}
			f, err := b.failLastWave(ctx, s)
			if err != nil {
				return nil, err
			}
			res.fails = append(res.fails, f)
		}
	}
	res.took = time.Since(b.started)
	return res, nil
}

// pushNext pushes the subject's next version and returns when the registry
// acknowledged it, the measure's clock started at its manifest PUT.
func (b *bench) pushNext(ctx context.Context, s *subject) (measure, error) {
	t := tag(s.next)
	s.next++
	start := time.Now()
	d, at, err := s.reg.push(ctx, s.repo, t)
	if err != nil {
		return measure{}, err
	}
	s.digests[t] = d
	return measure{subject: s.name, tag: t, pushed: at, push: time.Since(start)}, nil
}

// measurePush pushes the subject's next version, waits until every
// cluster's primary runs it and the pause, and reads the times from the
// tracker and what the tool's processes used meanwhile.
func (b *bench) measurePush(ctx context.Context, s *subject) (measure, error) {
	w, err := b.meter.open(b.pidsOf(s))
	if err != nil {
		return measure{}, err
	}
	m, err := b.pushNext(ctx, s)
	if err != nil {
		return m, err
	}
	d := s.digests[m.tag]
	// Changes count from the manifest PUT's start: Keel has been seen to
	// update a Deployment before the registry's answer to the push reached
	// the bench (the notification goes out as the manifest is stored).
	from := m.pushed
	if err := b.waitPrimaries(ctx, s, m.tag, d, from); err != nil {
		return m, fmt.Errorf("%s, %s: %w", s.name, m.tag, err)
	}
	var first, last time.Time
	var lastPrimary time.Time
	for _, n := range b.names {
		at, ok := b.track.since(n, s.ns, workload, m.tag, d, from)
		if !ok {
			// A tool could write the primary only; none does here.
			return m, fmt.Errorf("%s, %s: %s's primary runs it, its Deployment %s never carried it", s.name, m.tag, n, workload)
		}
		if first.IsZero() || at.Before(first) {
			first, m.firstCluster = at, n
		}
		if at.After(last) {
			last = at
		}
		p, _ := b.track.since(n, s.ns, workload+"-primary", m.tag, d, from)
		if p.After(lastPrimary) {
			lastPrimary = p
		}
	}
	m.firstSpec, m.allSpec, m.allPrimary = first.Sub(m.pushed), last.Sub(m.pushed), lastPrimary.Sub(m.pushed)
	select {
	case <-ctx.Done():
		return m, ctx.Err()
	case <-time.After(b.o.settle):
	}
	m.cpu, m.peakKiB = b.meter.close(w)
	s.good = m.tag
	return m, nil
}

// waitPrimaries waits until every cluster's primary runs the version: up
// to -timeout, plus the scan interval for Flux's and Kargo's polling
// subjects (Keel's poll, a minute, fits in the timeout).
func (b *bench) waitPrimaries(ctx context.Context, s *subject, tag, digest string, from time.Time) error {
	timeout := b.o.timeout
	switch {
	case s.tool == "flux" && s.poll:
		timeout += fluxImageInterval
	case s.tool == "kargo" && s.poll:
		timeout += kargoWarehouseInterval
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		done := true
		for _, n := range b.names {
			if _, ok := b.track.since(n, s.ns, workload+"-primary", tag, digest, from); !ok {
				done = false
				break
			}
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w after %s waiting for every primary to run %s (%s)", errTimeout, timeout, tag, b.describe(s))
		case <-tick.C:
		}
	}
}
