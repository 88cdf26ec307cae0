// Command loadtest measures flotilla's durable webhook intake against a bare
// CloudEvents SDK HTTP receiver that persists nothing, in the same run and
// with the same load: concurrent keep-alive clients POSTing binary-mode
// CloudEvents, each a distinct image push, for a fixed time per round.
//
// Targets:
//
//   - bare: cloudevents/sdk-go's HTTP receiver acknowledging every event;
//   - flotilla /events: the intake with a cloudevents receiver, journaling
//     every event to a bbolt store (fsync, group commits) before the 202;
//   - flotilla /hooks (distribution): the same through a registry receiver
//     (a CNCF distribution notification with one event per request).
//
// Rounds alternate between targets so that a noisy neighbour hurts them
// alike. The result is a Markdown fragment that `make bench` puts into
// BENCHMARKS.md.
//
//	go run ./deploy/tools/loadtest -duration 10s -rounds 3 -concurrency 64 -out intake.md
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/flotilla-cd/flotilla/deploy/tools/internal/mdsection"
	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/events/intake"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

type options struct {
	duration    time.Duration
	rounds      int
	concurrency int
	out         string
	dir         string
	cpuprofile  string
	only        string
	update      string
	scaleOut    bool
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var o options
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per target and round")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds; each round measures every target once")
	fs.IntVar(&o.concurrency, "concurrency", 64, "concurrent clients (keep-alive connections)")
	fs.StringVar(&o.out, "out", "", "write the Markdown result here (default: stdout only)")
	fs.StringVar(&o.dir, "dir", "", "directory for the journal (default: a temporary one, removed after)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run here")
	fs.StringVar(&o.only, "only", "", "measure only the targets whose name contains this (for profiling)")
	fs.StringVar(&o.update, "update", "", "replace the intake section of this BENCHMARKS.md with the result (the rest of the file is kept)")
	fs.BoolVar(&o.scaleOut, "scale-out", true, "also measure the intake on scale-out mode's bus (a three-node NATS JetStream cluster, built by make fleet-build) with one and three replicas")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir := o.dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "flotilla-loadtest-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(tmp) }()
		dir = tmp
	}
	targets, closeAll, err := startTargets(ctx, dir, o.scaleOut)
	if err != nil {
		return err
	}
	defer closeAll()

	results := map[string][]roundResult{}
	for round := 1; round <= o.rounds; round++ {
		for _, t := range targets {
			if err := ctx.Err(); err != nil {
				return err
			}
			if !strings.Contains(t.name, o.only) {
				continue
			}
			r, err := load(ctx, t, o, round)
			if err != nil {
				return fmt.Errorf("%s round %d: %w", t.name, round, err)
			}
			fmt.Fprintf(os.Stderr, "round %d %-28s %8.0f req/s  p50 %6.2f ms  p99 %6.2f ms  errors %d\n",
				round, t.name, r.rate(), ms(r.p(0.50)), ms(r.p(0.99)), r.errors)
			results[t.name] = append(results[t.name], r)
		}
	}
	report := render(o, targets, results)
	fmt.Print(report)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(report), 0o644); err != nil {
			return err
		}
	}
	if o.update != "" {
		return updateSection(o.update, report)
	}
	return nil
}

// Section of BENCHMARKS.md the intake results live in; deploy/tools/bench writes
// the same heading.
const (
	sectionHeading = "## Durable intake: webhooks/s against a bare CloudEvents receiver"
	sectionIntro   = "`go run ./deploy/tools/loadtest` (in `make bench`): the HTTP intake journaling every event durably before its 202, side by side with cloudevents/sdk-go's HTTP receiver persisting nothing, same load, same run.\n\n"
)

// updateSection replaces the intake section of the Markdown file at path,
// or inserts it before the first "## " heading after the title.
func updateSection(path, report string) error {
	return mdsection.Replace(path, sectionHeading, sectionHeading+"\n\n"+machineLine()+sectionIntro+report+"\n", "")
}

// machineLine says when and where the numbers were taken.
func machineLine() string {
	return fmt.Sprintf("Measured %s on %d CPUs (%s); load average before the run %s, after %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), runtime.Version(), loadBefore, loadAvg())
}

var loadBefore = loadAvg()

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// target is one HTTP endpoint under load and how to build its requests.
type target struct {
	name    string
	url     string
	request func(seq uint64) (http.Header, []byte)
	// urls, when set, are replicas taking the requests in turn.
	urls []string
	turn *turn
	// scaleOut: a target on scale-out mode's bus (measured, no target
	// rate: the issue asks only for the numbers).
	scaleOut bool
}

const (
	nameBare         = "bare CloudEvents SDK receiver"
	nameEvents       = "flotilla POST /events"
	nameDistribution = "flotilla POST /hooks (distribution)"
	token            = "loadtest-token"
)

// startTargets starts the bare receiver and flotilla's intake on loopback.
func startTargets(ctx context.Context, dir string, scaleOut bool) ([]target, func(), error) {
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	bareURL, stopBare, err := startBare(ctx)
	if err != nil {
		return nil, closeAll, err
	}
	closers = append(closers, stopBare)

	st, err := store.Open(dir+"/journal.db", storeOpts()...)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	closers = append(closers, func() { _ = st.Close() })
	in, err := intake.New([]intake.ReceiverConfig{
		{Name: "events", Type: "cloudevents", Secret: token, RateLimit: intake.RateLimit{PerSecond: -1}},
		{Name: "registry", Type: "distribution", Secret: token, RateLimit: intake.RateLimit{PerSecond: -1}},
	}, journal{st}, intake.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/hooks/", in)
	mux.Handle(intake.EventsPath, in)
	flotillaURL, stopFlotilla, err := serve(ctx, mux)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	closers = append(closers, stopFlotilla)

	run := fmt.Sprintf("%x", time.Now().UnixNano())
	targets := []target{
		{name: nameBare, url: bareURL, request: cloudEventRequest(run + "-bare")},
		{name: nameEvents, url: flotillaURL + intake.EventsPath, request: cloudEventRequest(run + "-events")},
		{name: nameDistribution, url: flotillaURL + "/hooks/registry", request: distributionRequest(run)},
	}
	if scaleOut {
		nt, stopNATS, err := startNATSTargets(ctx, dir, run)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, stopNATS)
		targets = append(targets, nt...)
	}
	return targets, closeAll, nil
}

// startBare starts cloudevents/sdk-go's HTTP receiver with a handler that
// acknowledges every event and keeps nothing.
func startBare(ctx context.Context) (string, func(), error) {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	c, err := cloudevents.NewClientHTTP(cehttp.WithListener(l))
	if err != nil {
		return "", nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.StartReceiver(rctx, func(context.Context, cloudevents.Event) cloudevents.Result { return nil })
	}()
	return "http://" + l.Addr().String() + "/", func() { cancel(); <-done }, nil
}

func serve(ctx context.Context, h http.Handler) (string, func(), error) {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String(), func() { _ = srv.Close() }, nil
}

// journal adapts the store to the intake, as pkg/app does.
type journal struct{ s *store.Store }

func (j journal) Append(ctx context.Context, evs ...cloudevents.Event) (int, error) {
	recs, err := j.s.Append(ctx, evs...)
	return len(recs), err
}

// cloudEventRequest builds binary-mode image pushes with distinct ids.
func cloudEventRequest(prefix string) func(uint64) (http.Header, []byte) {
	return func(seq uint64) (http.Header, []byte) {
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set("Ce-Specversion", "1.0")
		h.Set("Ce-Id", fmt.Sprintf("%s-%d", prefix, seq))
		h.Set("Ce-Source", "/loadtest")
		h.Set("Ce-Type", events.TypeImagePushed)
		h.Set("Authorization", "Bearer "+token)
		body := fmt.Sprintf(`{"registry":"registry.example.com","repository":"shop/api","tag":"1.%d.0","digest":"sha256:%064x","sender":"loadtest","receiver":"events"}`, seq, seq)
		return h, []byte(body)
	}
}

// distributionRequest builds registry notifications of one tagged manifest
// push each, with distinct event ids.
func distributionRequest(prefix string) func(uint64) (http.Header, []byte) {
	return func(seq uint64) (http.Header, []byte) {
		h := http.Header{}
		h.Set("Content-Type", "application/vnd.docker.distribution.events.v2+json")
		h.Set("Authorization", "Bearer "+token)
		body := fmt.Sprintf(`{"events":[{"id":"%s-%d","timestamp":"2026-01-02T15:04:05Z","action":"push",`+
			`"target":{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%064x","size":708,`+
			`"repository":"shop/api","tag":"1.%d.0"},"request":{"host":"registry.example.com","method":"PUT"},"actor":{"name":"ci"}}]}`,
			prefix, seq, seq, seq)
		return h, []byte(body)
	}
}

// roundResult is one target's measurement in one round.
type roundResult struct {
	ok, errors int
	elapsed    time.Duration
	latencies  []time.Duration // sorted, successful requests only
	firstErr   string
}

func (r roundResult) rate() float64 { return float64(r.ok) / r.elapsed.Seconds() }

func (r roundResult) p(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	i := int(float64(len(r.latencies)-1) * q)
	return r.latencies[i]
}

var seq atomic.Uint64

// load runs o.concurrency clients against t for o.duration.
func load(ctx context.Context, t target, o options, round int) (roundResult, error) {
	tr := &http.Transport{MaxIdleConns: o.concurrency, MaxIdleConnsPerHost: o.concurrency, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	// Warm the connections and the server up, unmeasured.
	warm := o.duration / 10
	if _, err := drive(ctx, client, t, o.concurrency, warm); err != nil {
		return roundResult{}, fmt.Errorf("warm-up: %w", err)
	}
	runtime.GC()
	res, err := drive(ctx, client, t, o.concurrency, o.duration)
	if err != nil {
		return res, err
	}
	if res.ok == 0 {
		return res, fmt.Errorf("no request succeeded in round %d: %s", round, res.firstErr)
	}
	return res, nil
}

func drive(ctx context.Context, client *http.Client, t target, concurrency int, d time.Duration) (roundResult, error) {
	var (
		mu  sync.Mutex
		res roundResult
		wg  sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			errs, firstErr := 0, ""
			for time.Now().Before(deadline) && ctx.Err() == nil {
				took, err := post(ctx, client, t)
				if err != nil {
					errs++
					if firstErr == "" {
						firstErr = err.Error()
					}
					continue
				}
				lat = append(lat, took)
			}
			mu.Lock()
			defer mu.Unlock()
			res.ok += len(lat)
			res.errors += errs
			res.latencies = append(res.latencies, lat...)
			if res.firstErr == "" {
				res.firstErr = firstErr
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	slices.Sort(res.latencies)
	return res, ctx.Err()
}

func post(ctx context.Context, client *http.Client, t target) (time.Duration, error) {
	h, body := t.request(seq.Add(1))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.next(), strings.NewReader(string(body)))
	if err != nil {
		return 0, err
	}
	req.Header = h
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	took := time.Since(start)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return 0, errors.New(resp.Status)
	}
	return took, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Targets of the issue: durable intake at least 5,000 webhooks/s, and at least
// half the bare receiver's rate.
const (
	targetRate  = 5000
	targetRatio = 0.5
)

// render writes the Markdown fragment: per target the median round by rate.
func render(o options, targets []target, results map[string][]roundResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Load: %d concurrent keep-alive clients in the same process, %d rounds of %s per target, "+
		"targets alternating; each request one distinct image push. Median round by rate shown; every round in the raw lines below.\n\n",
		o.concurrency, o.rounds, o.duration)
	b.WriteString("| target | webhooks/s | p50 ms | p99 ms | errors | vs bare | verdict |\n|---|---:|---:|---:|---:|---:|---|\n")
	bare := median(results[nameBare])
	for _, t := range targets {
		if len(results[t.name]) == 0 {
			continue
		}
		m := median(results[t.name])
		ratio := m.rate() / bare.rate()
		verdict := "-"
		if t.name != nameBare && !t.scaleOut {
			verdict = "met"
			if m.rate() < targetRate || ratio < targetRatio {
				verdict = "**missed**"
			}
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.2f | %.2f | %d | %.2fx | %s |\n",
			t.name, m.rate(), ms(m.p(0.50)), ms(m.p(0.99)), m.errors, ratio, verdict)
	}
	b.WriteString("\nTargets: durable intake >= 5,000 webhooks/s and >= 0.5x the bare receiver.\n\n")
	b.WriteString(analysis)
	b.WriteString("\nRounds:\n\n```\n")
	for _, t := range targets {
		for i, r := range results[t.name] {
			fmt.Fprintf(&b, "%-36s round %d: %7.0f/s p50 %.2f ms p99 %.2f ms ok %d errors %d\n",
				t.name, i+1, r.rate(), ms(r.p(0.50)), ms(r.p(0.99)), r.ok, r.errors)
		}
	}
	b.WriteString("```\n")
	return b.String()
}

// analysis says what bounds the durable intake, as measured with
// LOADTEST_STORE_LOG (per-commit batch sizes and durations), -cpuprofile
// and a loop of write+fdatasync reading /proc/stat.
const analysis = `What bounds it (2026-11-22, 64 clients): on this VM every fdatasync costs the kernel
CPU as well as time, and the two cores are shared by server and clients, so the number of syncs per
second is CPU taken from HTTP. Measured per sync: growing a file 225 us, bbolt's commit (data
pages, sync, meta page, sync) about 370 us, overwriting zero-filled space 119 us. The journal used
to be bbolt buckets: 9,500/s (0.37x). It is now an append-only log of segment files: one write and
one fdatasync per group commit into space zero-filled ahead (no metadata to flush), and while
appends contend the writer waits up to 1 ms for more (PostgreSQL's commit_delay): about 25 events
per commit, about 600 commits/s, 0.7 ms per write+sync. Without the commit delay the log alone
reaches about 11,500/s; an idle store never waits. What is left: a durable request costs about
125 us of CPU (clients included) against 60-80 us for the bare receiver: parsing, decoding and
re-encoding the event (about 12 us), encoding it for the journal, the goroutine parked and woken
around the commit, and the garbage of all that.

Scale-out mode (2026-11-28, the NATS rows): the same intake appending to a JetStream stream
replicated on three nats-server nodes (server.bus, 16 partitions), all on this 2-core VM with the
clients. A 202 waits until the stream's leader and a follower stored the event (a quorum of three):
one request to the leader per webhook, about 12 ms at the median under this load. One replica
takes about 4,900/s, three (requests spread over them) about 4,200/s: on two cores the three NATS
nodes, the replicas and the clients share the CPU, so more replicas add processes, not cores. On
separate machines a replica's intake grows with its own CPU, and the stream's leader is the bound.
`

func median(rs []roundResult) roundResult {
	if len(rs) == 0 {
		return roundResult{elapsed: time.Second}
	}
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b roundResult) int {
		switch {
		case a.rate() < b.rate():
			return -1
		case a.rate() > b.rate():
			return 1
		}
		return 0
	})
	return s[len(s)/2]
}

func storeOpts() []store.Option {
	if os.Getenv("LOADTEST_STORE_LOG") == "" {
		return nil
	}
	f, _ := os.Create(os.Getenv("LOADTEST_STORE_LOG"))
	return []store.Option{store.WithLogger(slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug})))}
}
