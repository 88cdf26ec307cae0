package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// failure is a version failing in the last wave, for one subject: Flagger's
// analysis fails it in the failing clusters (c2..cN, the waves subject's
// last wave), passes it in c1.
type failure struct {
	subject   string
	tag, prev string
	failing   []string
	// failed: push -> the analysis check failed it in the last failing
	// cluster (Flagger's threshold is 1: its first failed check fails the
	// canary).
	failed   time.Duration
	failedOK bool
	// restored: push -> every cluster settled (the latest of them), its
	// primary on prev, if that happened within -fail-wait after failed.
	restored   time.Duration
	restoredOK bool
	waited     time.Duration
	clusters   []clusterFate
}

// clusterFate is what became of a cluster's primary.
type clusterFate struct {
	cluster string
	ranBad  bool // the primary ran the failing version (Flagger promoted it)
	backOK  bool // ... and then the previous again
	refused bool // the analysis check failed it here: Flagger kept the primary
	// takenBack: the Deployment carried the failing version and was
	// changed again before the analysis ended there (the primary never ran
	// it).
	takenBack bool
	// settled: nothing more will change (back, refused or taken back), at
	// at.
	settled bool
	at      time.Time
	back    time.Duration // push -> settled, for the report
}

// fateOf reads what became of a cluster from its primary's and its
// Deployment's histories since from, and when the check refused the
// failing version there (zero if it did not).
func fateOf(primary, spec []change, refusedAt time.Time, bad, prev version, from time.Time) clusterFate {
	c := clusterFate{refused: !refusedAt.IsZero()}
	if badAt, ok := firstSince(primary, bad.tag, bad.digest, from); ok {
		c.ranBad = true
		c.at, c.backOK = firstSince(primary, prev.tag, prev.digest, badAt)
		c.settled = c.backOK
		return c
	}
	if c.refused {
		c.settled, c.at = true, refusedAt
		return c
	}
	if carriedAt, ok := firstSince(spec, bad.tag, bad.digest, from); ok {
		for _, ch := range spec {
			if !ch.at.Before(carriedAt) && !carries(ch.image, bad.tag, bad.digest) {
				c.takenBack, c.settled, c.at = true, true, ch.at
				break
			}
		}
	}
	return c
}

// failLastWave pushes the subject's next version, failing in every cluster
// but the first, and measures who puts the previous version back where:
// it waits until the check failed it in the failing clusters, then up to
// -fail-wait until every cluster is settled (its primary back on the
// previous version, kept on it by Flagger, or its Deployment taken back
// before the analysis ended) and every primary runs the previous version.
func (b *bench) failLastWave(ctx context.Context, s *subject) (failure, error) {
	f := failure{subject: s.name, tag: tag(s.next), prev: s.good, failing: b.names[1:], waited: b.o.failWait}
	prev := version{tag: s.good, digest: s.digests[s.good]}
	b.check.setBad(s.ns, version{tag: f.tag})
	m, err := b.pushNext(ctx, s)
	if err != nil {
		return f, err
	}
	bad := version{tag: f.tag, digest: s.digests[f.tag]}
	b.check.setBad(s.ns, bad)
	from := m.pushed
	failedAt, settled := b.waitRefused(ctx, s, f.failing, bad, from)
	if !settled {
		b.log.Warn("the failing version neither failed nor was taken back everywhere in time", "subject", s.name, "tag", f.tag, "where", b.describe(s))
	}
	if f.failedOK = !failedAt.IsZero(); f.failedOK {
		f.failed = failedAt.Sub(m.pushed)
	}
	fates := func() ([]clusterFate, bool) {
		var out []clusterFate
		all := b.primariesRun(s, prev)
		for _, n := range b.names {
			refusedAt, _ := b.check.refusedIn(n, s.ns)
			c := fateOf(b.track.history(n, s.ns, workload+"-primary"), b.track.history(n, s.ns, workload), refusedAt, bad, prev, from)
			c.cluster = n
			all = all && c.settled
			out = append(out, c)
		}
		return out, all
	}
	deadline := time.Now().Add(b.o.failWait)
	for {
		cs, done := fates()
		if done || !time.Now().Before(deadline) {
			f.clusters, f.restoredOK = cs, done
			break
		}
		select {
		case <-ctx.Done():
			return f, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	for i, c := range f.clusters {
		if c.settled {
			f.clusters[i].back = c.at.Sub(m.pushed)
			f.restored = max(f.restored, f.clusters[i].back)
		}
	}
	b.log.Info("failing version", "subject", s.name, "tag", f.tag, "failed", f.failed.Round(time.Millisecond),
		"restored", f.restoredOK, "every_primary_back", f.restored.Round(time.Millisecond), "where", b.describe(s))
	return f, nil
}

// primariesRun tells whether every cluster's primary runs the version now.
func (b *bench) primariesRun(s *subject, v version) bool {
	for _, n := range b.names {
		if !carries(b.track.current(n, s.ns, workload+"-primary"), v.tag, v.digest) {
			return false
		}
	}
	return true
}

// waitRefused waits until the analysis check has failed the version in
// each of the clusters (Flagger fails a canary at its first failed check:
// threshold 1), or the cluster's Deployment was taken back from it before
// the check ran there, up to -timeout. It returns when the check last
// failed it, and whether every cluster is settled so.
func (b *bench) waitRefused(ctx context.Context, s *subject, clusters []string, bad version, from time.Time) (time.Time, bool) {
	ctx, cancel := context.WithTimeout(ctx, b.o.timeout)
	defer cancel()
	for {
		var last time.Time
		all := true
		for _, n := range clusters {
			if at, ok := b.check.refusedIn(n, s.ns); ok {
				last = maxTime(last, at)
				continue
			}
			_, carried := b.track.since(n, s.ns, workload, bad.tag, bad.digest, from)
			if !carried || carries(b.track.current(n, s.ns, workload), bad.tag, bad.digest) {
				all = false
			}
		}
		if all {
			return last, true
		}
		select {
		case <-ctx.Done():
			return last, false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// fateText says in words what became of each cluster's primary.
func fateText(f failure) string {
	var parts []string
	for _, c := range f.clusters {
		switch {
		case c.ranBad && c.backOK:
			parts = append(parts, fmt.Sprintf("%s: promoted, then %s put back at %.1f s", c.cluster, f.prev, c.back.Seconds()))
		case c.ranBad:
			parts = append(parts, fmt.Sprintf("%s: promoted, still runs it %s after the analysis failed it elsewhere (manual)", c.cluster, f.waited))
		case c.refused:
			parts = append(parts, c.cluster+": the analysis failed it, Flagger kept "+f.prev+" on the primary")
		case c.takenBack:
			parts = append(parts, fmt.Sprintf("%s: its Deployment taken back at %.1f s, before its analysis ended; the primary kept %s", c.cluster, c.back.Seconds(), f.prev))
		default:
			parts = append(parts, fmt.Sprintf("%s: not settled after %s", c.cluster, f.waited))
		}
	}
	return strings.Join(parts, "; ")
}
