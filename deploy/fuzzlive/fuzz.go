package main

import (
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// maxBusyRechecks bounds the journal-busy requests re-posted at the end.
const maxBusyRechecks = 50

// fuzzer posts random deliveries to every receiver of a running flotilla.
type fuzzer struct {
	lab     *lab
	f       *flotilla
	seed    int64
	workers int
	tally   *tally
	log     *failureLog
	recent  *recent

	requests, failures atomic.Int64

	mu     sync.Mutex
	busy   []*request // journal-busy requests (unsigned) to re-post at the end
	health []string   // /healthz answers other than 200 seen during the fuzz
	crash  string     // how flotilla died during the fuzz; "" if it did not
	// lastWords is the end of flotilla's log when it died.
	lastWords string
	// orphans are requests without an answer because flotilla had died.
	orphans atomic.Int64
}

// run fuzzes for d with z.workers workers, each with its own math/rand
// seeded z.seed+worker, until d is over or flotilla dies.
func (z *fuzzer) run(ctx context.Context, d time.Duration) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	deadline := time.Now().Add(d)
	monitored := make(chan struct{})
	go func() {
		defer close(monitored)
		z.monitor(ctx, cancel, time.Now())
	}()
	var wg sync.WaitGroup
	for i := range z.workers {
		wg.Go(func() { z.worker(ctx, i, deadline) })
	}
	wg.Wait()
	cancel()
	<-monitored
	if z.crash != "" {
		// What killed it may have been answered 202 (journaled, then read
		// back by the runtime): the last accepted requests go to the log.
		for _, rec := range z.recent.all() {
			rec.Why = whyBeforeCrash
			z.log.add(rec)
		}
	}
}

// monitor watches the process and /healthz every second, and says how the
// fuzz goes every ten.
func (z *fuzzer) monitor(ctx context.Context, cancel context.CancelFunc, start time.Time) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := start
	for {
		select {
		case <-ctx.Done():
			return
		case <-z.f.p.Done():
			z.mu.Lock()
			z.crash = fmt.Sprintf("flotilla exited %s into the fuzz (%s)", time.Since(start).Round(time.Millisecond), z.f.exit())
			z.lastWords = z.f.logTail(6)
			z.mu.Unlock()
			logf("%s; stopping the workers", z.crash)
			cancel()
			return
		case <-tick.C:
			status, body, err := z.f.healthz(ctx)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				logf("GET /healthz: %v (flotilla busy? counted only if it lasts to the end)", err)
			case status != http.StatusOK:
				z.mu.Lock()
				z.health = append(z.health, fmt.Sprintf("%s: %d %s", time.Since(start).Round(time.Second), status, body))
				z.mu.Unlock()
				logf("GET /healthz: %d %s", status, body)
			}
			if time.Since(last) >= 10*time.Second {
				last = time.Now()
				logf("%s: %d requests, %d failures", time.Since(start).Round(time.Second), z.requests.Load(), z.failures.Load())
			}
		}
	}
}

// worker posts random deliveries until deadline or ctx ends.
func (z *fuzzer) worker(ctx context.Context, id int, deadline time.Time) {
	r := rand.New(rand.NewSource(z.seed + int64(id)))
	base := z.f.url("")
	for seq := 0; time.Now().Before(deadline) && ctx.Err() == nil; seq++ {
		t := z.lab.targets[r.Intn(len(z.lab.targets))]
		req := t.next(r)
		unsigned := req.clone()
		if err := t.signer.sign(r, req); err != nil {
			logf("signing a %s delivery: %v", t.sender, err)
			continue
		}
		res := post(ctx, z.lab.client, base, req)
		if res.status == 0 && ctx.Err() != nil {
			return // stopped by the fuzzer, not dropped by flotilla
		}
		z.requests.Add(1)
		z.tally.add(req.Receiver, res.column())
		rec := record{At: time.Now().UTC(), Seed: z.seed, Worker: id, Seq: seq, Status: res.status, Request: unsigned,
			Response: truncate(string(res.body), 500)}
		if res.err != nil {
			rec.Error = res.err.Error()
		}
		switch res.verdict() {
		case verdictFailure:
			if res.status == 0 && z.diedMeanwhile() {
				// The crash's victim, not a failure of its own (it is
				// logged, to replay, with the crash's suspects).
				z.orphans.Add(1)
				rec.Why = whyOrphan
				z.log.add(rec)
				continue
			}
			z.failures.Add(1)
			rec.Why = whyFailed
			z.log.add(rec)
		case verdictJournalBusy:
			rec.Why = whyBusy
			z.log.add(rec)
			z.mu.Lock()
			if len(z.busy) < maxBusyRechecks {
				z.busy = append(z.busy, unsigned)
			}
			z.mu.Unlock()
		default:
			if res.status >= 200 && res.status < 300 {
				z.recent.add(rec)
			}
		}
	}
}

// diedMeanwhile tells whether flotilla has exited, waiting a little for the
// exit of a process whose connections are gone already.
func (z *fuzzer) diedMeanwhile() bool {
	select {
	case <-z.f.p.Done():
		return true
	case <-time.After(500 * time.Millisecond):
		return false
	}
}

// recheckBusy re-posts the journal-busy requests one at a time on the now
// idle flotilla: one that gets the 503 again is refused for good, not busy.
// It returns those.
func (z *fuzzer) recheckBusy(ctx context.Context) []string {
	var persistent []string
	r := rand.New(rand.NewSource(z.seed))
	for _, req := range z.busy {
		t := z.lab.byName[req.Receiver]
		signed := req.clone()
		if err := t.signer.sign(r, signed); err != nil {
			continue
		}
		res := post(ctx, z.lab.client, z.f.url(""), signed)
		if res.verdict() != verdictOK {
			persistent = append(persistent, fmt.Sprintf("%s %s: %s %s", req.Receiver, req.Fixture, res.column(), truncate(string(res.body), 200)))
		}
	}
	return persistent
}

// tally counts results by receiver and column (status code, "no answer",
// "unsent").
type tally struct {
	mu     sync.Mutex
	counts map[string]map[string]int
}

func newTally() *tally { return &tally{counts: map[string]map[string]int{}} }

func (t *tally) add(receiver, column string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts[receiver] == nil {
		t.counts[receiver] = map[string]int{}
	}
	t.counts[receiver][column]++
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
