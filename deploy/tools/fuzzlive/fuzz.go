package main

import (
	"cmp"
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxBusyRechecks bounds the busy (documented 503) requests re-posted at the end.
const maxBusyRechecks = 50

// fuzzer posts random deliveries to every receiver of a running flotilla.
type fuzzer struct {
	lab     *lab
	f       *flotilla // the flotilla fuzzed now
	seed    int64
	workers int
	tally   *tally
	log     *failureLog
	recent  *recent

	requests, failures, orphans atomic.Int64
	seqs                        []int // requests sent by each worker

	mu   sync.Mutex
	busy []*request // busy (documented 503) requests (unsigned) to re-post at the end
	// unanswered are this segment's requests without an answer: failures,
	// unless flotilla died in the segment (then they are its victims).
	unanswered []record
	slowest    []record // the slowest requests, slowest first
	health     []string // /healthz answers other than 200 seen during the fuzz
	crashes    []crash
}

// crash is flotilla dying during the fuzz.
type crash struct {
	at        time.Duration // into the fuzz
	exit      string
	lastWords string // the end of its log
	// restart says how a restart on the same data dir went: "" when it
	// came back up, else why not.
	restart string
}

// run fuzzes for d with z.workers workers, each with its own math/rand
// seeded z.seed+worker. When flotilla dies, the requests it accepted last
// are logged (what killed it may have been answered 202), it is restarted
// on the same data dir, or, when that fails, a new flotilla on a new one
// is, and the fuzz goes on.
func (z *fuzzer) run(ctx context.Context, d time.Duration) {
	start := time.Now()
	deadline := start.Add(d)
	z.seqs = make([]int, z.workers)
	rands := make([]*rand.Rand, z.workers)
	for i := range rands {
		rands[i] = rand.New(rand.NewSource(z.seed + int64(i)))
	}
	for time.Now().Before(deadline) && ctx.Err() == nil {
		died := z.segment(ctx, start, deadline, rands)
		if !died || ctx.Err() != nil {
			return
		}
		n := len(z.crashes)
		c := &z.crashes[n-1]
		for _, rec := range z.recent.drain() {
			if rec.Why == "" {
				rec.Why = whyBeforeCrash
			}
			rec.Crash = n
			z.log.add(rec)
		}
		if err := z.f.start(ctx); err != nil {
			c.restart = err.Error()
			logf("crash %d: the restart on the same data dir failed too; going on with a new flotilla on a new data dir", n)
			z.f.kill()
			f, err := z.lab.startFlotilla(ctx)
			if err != nil {
				logf("starting a new flotilla: %v", err)
				return
			}
			z.f = f
		} else {
			logf("crash %d: flotilla came back up on the same data dir; going on", n)
		}
	}
}

// segment fuzzes z.f until deadline or it dies (true).
func (z *fuzzer) segment(ctx context.Context, start, deadline time.Time, rands []*rand.Rand) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	died := make(chan bool, 1)
	go func() { died <- z.monitor(ctx, cancel, start) }()
	var wg sync.WaitGroup
	for i, r := range rands {
		wg.Go(func() { z.worker(ctx, z.f, i, r, deadline) })
	}
	wg.Wait()
	cancel()
	crashed := <-died
	z.mu.Lock()
	unanswered := z.unanswered
	z.unanswered = nil
	z.mu.Unlock()
	for _, rec := range unanswered {
		if crashed {
			// Its connection went with the process (refused, reset, closed
			// by the shutdown): a victim of the crash, not a failure of its
			// own. Logged with the crash's suspects, to replay.
			z.orphans.Add(1)
			rec.Why = whyOrphan
			z.recent.add(rec)
			continue
		}
		z.failures.Add(1)
		rec.Why = whyFailed
		z.log.add(rec)
	}
	return crashed
}

// monitor watches the process and /healthz every second, and says how the
// fuzz goes every ten seconds. It returns true when flotilla died.
func (z *fuzzer) monitor(ctx context.Context, cancel context.CancelFunc, start time.Time) bool {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-z.f.p.Done():
			c := crash{at: time.Since(start), exit: z.f.exit(), lastWords: lastWords(z.f)}
			z.mu.Lock()
			z.crashes = append(z.crashes, c)
			z.mu.Unlock()
			logf("crash %d: flotilla exited %s into the fuzz (%s); stopping the workers", len(z.crashes), c.at.Round(time.Millisecond), c.exit)
			cancel()
			return true
		case <-tick.C:
			status, body, err := z.f.healthz(ctx)
			switch {
			case ctx.Err() != nil:
				return false
			case err != nil:
				logf("GET /healthz: %v (busy? only a failure if it lasts to the end)", err)
			case status != http.StatusOK:
				z.mu.Lock()
				z.health = append(z.health, fmt.Sprintf("%s: %d %s", time.Since(start).Round(time.Second), status, body))
				z.mu.Unlock()
				logf("GET /healthz: %d %s", status, body)
			}
			if time.Since(last) >= 10*time.Second {
				last = time.Now()
				logf("%s: %d requests, %d failures, %d crashes", time.Since(start).Round(time.Second),
					z.requests.Load(), z.failures.Load(), len(z.crashes))
			}
		}
	}
}

// worker posts random deliveries to f until deadline or ctx ends.
func (z *fuzzer) worker(ctx context.Context, f *flotilla, id int, r *rand.Rand, deadline time.Time) {
	base := f.url("")
	for time.Now().Before(deadline) && ctx.Err() == nil {
		seq := z.seqs[id]
		z.seqs[id]++
		t := z.lab.targets[r.Intn(len(z.lab.targets))]
		made := time.Now()
		req := t.next(r)
		if d := time.Since(made); d > 2*time.Second {
			logf("worker %d took %s to make request %d (%s, %d bytes): the fuzzer is slow, not flotilla", id, d.Round(time.Millisecond), seq, req.Fixture, len(req.Body))
		}
		unsigned := req.clone()
		if err := t.signer.sign(r, req); err != nil {
			logf("signing a %s delivery: %v", t.sender, err)
			continue
		}
		sent := time.Now()
		res := post(ctx, z.lab.client, base, req)
		took := time.Since(sent)
		if res.status == 0 && ctx.Err() != nil {
			return // stopped by the fuzzer, not dropped by flotilla
		}
		z.requests.Add(1)
		z.tally.add(req.Receiver, res.column())
		rec := record{At: time.Now().UTC(), Seed: z.seed, Worker: id, Seq: seq, Status: res.status, Request: unsigned,
			Response: truncate(string(res.body), 500), Took: took}
		if res.err != nil {
			rec.Error = res.err.Error()
		}
		z.timed(rec)
		switch res.verdict() {
		case verdictFailure:
			if res.status == 0 {
				z.mu.Lock()
				z.unanswered = append(z.unanswered, rec)
				z.mu.Unlock()
				continue
			}
			z.failures.Add(1)
			rec.Why = whyFailed
			z.log.add(rec)
		case verdictBusy:
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

// slowRequest is the time after which a request is logged as slow: not a
// failure, but one request holding flotilla up that long is worth a look.
const slowRequest = 5 * time.Second

// timed keeps the slowest requests, and logs those slower than slowRequest.
func (z *fuzzer) timed(rec record) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if rec.Took >= slowRequest {
		slow := rec
		slow.Why = whySlow
		z.log.add(slow)
	}
	if len(z.slowest) < 3 || rec.Took > z.slowest[len(z.slowest)-1].Took {
		z.slowest = append(z.slowest, rec)
		slices.SortFunc(z.slowest, func(a, b record) int { return cmp.Compare(b.Took, a.Took) })
		z.slowest = z.slowest[:min(3, len(z.slowest))]
	}
}

// recheckBusy re-posts the busy (documented 503) requests one at a time on the now
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
			persistent = append(persistent, fmt.Sprintf("%s %s: %s %s", req.Receiver, req.Fixture, res.column(),
				strings.TrimSpace(truncate(string(res.body), 200))))
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

// lastWords are the last lines of f's log, each cut to 300 bytes: the
// fatal error is the last one, the lines before it may quote a webhook.
func lastWords(f *flotilla) string {
	lines := strings.Split(f.logTail(3), "\n")
	for i, l := range lines {
		lines[i] = truncate(l, 300)
	}
	return strings.Join(lines, "\n")
}
