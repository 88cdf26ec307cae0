package main

import (
	"context"
	"time"
)

// drop is a push whose registry webhook was not delivered, for one
// subject: when the tool noticed it anyway (its poll), if it did within
// -drop-wait.
type drop struct {
	subject string
	tag     string
	// noticed: push -> the first cluster's Deployment spec carries it.
	noticed   time.Duration
	noticedOK bool
	// every: push -> every cluster's primary runs it.
	every   time.Duration
	everyOK bool
	waited  time.Duration
}

// dropWebhooks pushes a version of every webhook subject with the loud
// registry's notifications off (the registry restarted without its
// endpoints, then with them again once the pushes are stored: the webhooks
// of these pushes alone are lost), and waits up to -drop-wait for each tool
// to notice, all at once: Flux's ImageRepository scan and flotilla's poll
// run on their own clocks.
func (b *bench) dropWebhooks(ctx context.Context) ([]drop, error) {
	b.log.Info("registry restarted without its notifications: the next pushes' webhooks are lost")
	if err := b.loud.restart(ctx, nil); err != nil {
		return nil, err
	}
	type pending struct {
		s    *subject
		v    version
		m    measure
		from time.Time
	}
	var ps []pending
	for _, s := range b.subs {
		if s.poll {
			continue
		}
		m, err := b.pushNext(ctx, s)
		if err != nil {
			return nil, err
		}
		ps = append(ps, pending{s: s, v: version{m.tag, s.digests[m.tag]}, m: m, from: m.pushed})
	}
	if err := b.loud.restart(ctx, b.endpoints); err != nil {
		return nil, err
	}
	b.log.Info("registry notifying again; waiting for each tool to notice the pushes it was not told of", "up_to", b.o.dropWait)
	deadline := time.Now().Add(b.o.dropWait)
	out := make([]drop, len(ps))
	left := len(ps)
	for i, p := range ps {
		out[i] = drop{subject: p.s.name, tag: p.m.tag, waited: b.o.dropWait}
	}
	for left > 0 && time.Now().Before(deadline) {
		for i, p := range ps {
			if out[i].everyOK {
				continue
			}
			if !b.primariesRunSince(p.s, p.v, p.from) {
				continue
			}
			out[i].everyOK = true
			left--
			p.s.good = p.m.tag
			var first, lastPrimary time.Time
			for _, n := range b.names {
				if at, ok := b.track.since(n, p.s.ns, workload, p.v.tag, p.v.digest, p.from); ok && (first.IsZero() || at.Before(first)) {
					first = at
				}
				if at, ok := b.track.since(n, p.s.ns, workload+"-primary", p.v.tag, p.v.digest, p.from); ok && at.After(lastPrimary) {
					lastPrimary = at
				}
			}
			out[i].noticed, out[i].noticedOK = first.Sub(p.m.pushed), !first.IsZero()
			out[i].every = lastPrimary.Sub(p.m.pushed)
			b.log.Info("noticed a push without its webhook", "subject", p.s.name, "tag", p.m.tag,
				"first_spec", out[i].noticed.Round(time.Millisecond), "every_primary", out[i].every.Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	// A tool that changed a Deployment but had not reached every primary
	// by the deadline still noticed.
	for i, p := range ps {
		if out[i].everyOK {
			continue
		}
		for _, n := range b.names {
			if at, ok := b.track.since(n, p.s.ns, workload, p.v.tag, p.v.digest, p.from); ok && (!out[i].noticedOK || at.Sub(p.m.pushed) < out[i].noticed) {
				out[i].noticed, out[i].noticedOK = at.Sub(p.m.pushed), true
			}
		}
		b.log.Info("a push without its webhook not rolled out in time", "subject", p.s.name, "tag", p.m.tag, "noticed", out[i].noticedOK, "where", b.describe(p.s))
	}
	return out, nil
}

// primariesRunSince tells whether every cluster's primary changed to the
// version at or after from.
func (b *bench) primariesRunSince(s *subject, v version, from time.Time) bool {
	for _, n := range b.names {
		if _, ok := b.track.since(n, s.ns, workload+"-primary", v.tag, v.digest, from); !ok {
			return false
		}
	}
	return true
}
