// Command journalbench journals millions of events into the embedded store
// (pkg/store, as flotilla serve opens it) and measures what history costs:
// the resident memory and Go heap as the journal grows, the memory of the
// dedupe index per event, and how long a restart takes.
//
// It runs two stores, one after the other, each fed the same events (about
// the size of an image push, eight appenders of 100 events per Append, a
// consumer moving its cursor along as the dispatcher does):
//
//   - unbounded: retention off and a dedupe window that forgets nothing (the
//     journal and its id index as they were before retention);
//
//   - bounded: flotilla's defaults for the id index (1,000,000 ids) and a
//     retention of -retention (a short one, so that the run sees segments go
//     in minutes rather than a week).
//
//     go run ./deploy/tools/journalbench -events 5000000 -out journal.md
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/pkg/store"
)

type options struct {
	events    int
	appenders int
	batch     int
	retention time.Duration
	samples   int
	dir       string
	out       string
}

func main() {
	var o options
	flag.IntVar(&o.events, "events", 5_000_000, "events to journal into each store")
	flag.IntVar(&o.appenders, "appenders", 8, "goroutines appending at once")
	flag.IntVar(&o.batch, "batch", 100, "events per Append call")
	flag.DurationVar(&o.retention, "retention", 20*time.Second, "retention of the bounded store")
	flag.IntVar(&o.samples, "samples", 10, "memory samples per run")
	flag.StringVar(&o.dir, "dir", "", "directory for the stores (default: a temporary one, removed at the end)")
	flag.StringVar(&o.out, "out", "", "write the Markdown report to this file (default: stdout)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "journalbench:", err)
		os.Exit(1)
	}
}

// sample is the memory at one point of a run.
type sample struct {
	events      int
	rssMiB      float64
	heapMiB     float64
	ids         int
	segments    int
	firstSeq    uint64
	journalsMiB float64
}

type result struct {
	name     string
	took     time.Duration
	samples  []sample
	reopen   time.Duration
	reopened sample
}

func run(o options) error {
	dir := o.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "journalbench-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(d) }()
		dir = d
	}
	runs := []struct {
		name      string
		retention time.Duration
		opts      []store.Option
	}{
		{"unbounded (no retention, every id kept)", 0, []store.Option{store.WithRetention(0), store.WithDedupeWindow(1000*time.Hour, 0)}},
		{fmt.Sprintf("bounded (retention %s, 1,000,000 ids)", o.retention), o.retention, []store.Option{store.WithRetention(o.retention), store.WithCompactInterval(time.Second)}},
	}
	var results []result
	for i, r := range runs {
		path := filepath.Join(dir, strconv.Itoa(i), "flotilla.db")
		res, err := measure(o, r.name, path, r.retention, r.opts)
		if err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		results = append(results, res)
		if err := os.RemoveAll(filepath.Dir(path)); err != nil {
			return err
		}
	}
	report := render(o, results)
	if o.out == "" {
		fmt.Print(report)
		return nil
	}
	return os.WriteFile(o.out, []byte(report), 0o644)
}

// measure feeds one store and samples it, then reopens it.
func measure(o options, name, path string, retention time.Duration, opts []store.Option) (result, error) {
	res := result{name: name}
	ctx := context.Background()
	s, err := store.Open(path, opts...)
	if err != nil {
		return res, err
	}
	payload := strings.Repeat("x", 300) // an image push's size, with the attributes
	var next atomic.Int64
	var done atomic.Int64
	every := o.events / o.samples
	sampled := make(chan int, o.samples)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, o.appenders)
	for range o.appenders {
		wg.Go(func() {
			for {
				from := int(next.Add(int64(o.batch))) - o.batch
				if from >= o.events {
					return
				}
				evs := make([]cloudevents.Event, 0, o.batch)
				for i := from; i < min(from+o.batch, o.events); i++ {
					evs = append(evs, newEvent(i, payload))
				}
				if _, err := s.Append(ctx, evs...); err != nil {
					errs <- err
					return
				}
				n := int(done.Add(int64(len(evs))))
				if n/every != (n-len(evs))/every {
					sampled <- n
				}
			}
		})
	}
	// The consumer: its cursor follows the journal, as the dispatcher's does.
	stop := make(chan struct{})
	var consumer sync.WaitGroup
	consumer.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				_ = s.SetCursor(ctx, "functions", s.LastSeq())
			}
		}
	})
	go func() { wg.Wait(); close(sampled) }()
	for n := range sampled {
		res.samples = append(res.samples, snapshot(s, path, n))
	}
	close(stop)
	consumer.Wait()
	select {
	case err := <-errs:
		_ = s.Close()
		return res, err
	default:
	}
	res.took = time.Since(start)
	if err := s.SetCursor(ctx, "functions", s.LastSeq()); err != nil {
		return res, err
	}
	// Let retention catch up with the end: the last segments age past it.
	time.Sleep(retention + 2*time.Second)
	if _, err := s.Compact(ctx); err != nil {
		return res, err
	}
	res.samples = append(res.samples, snapshot(s, path, o.events))
	if err := s.Close(); err != nil {
		return res, err
	}
	runtime.GC()
	debug.FreeOSMemory()
	t0 := time.Now()
	s, err = store.Open(path, opts...)
	if err != nil {
		return res, err
	}
	res.reopen = time.Since(t0)
	res.reopened = snapshot(s, path, o.events)
	return res, s.Close()
}

func newEvent(i int, payload string) cloudevents.Event {
	e := cloudevents.NewEvent()
	e.SetID(fmt.Sprintf("distribution/registry/%08d-5d2a8c1e-41f7-4b0e-9f3a", i))
	e.SetSource("/hooks/registry")
	e.SetType("dev.flotilla.image.pushed.v1")
	e.SetTime(time.Unix(1_790_000_000, 0).UTC())
	_ = e.SetData(cloudevents.ApplicationJSON, map[string]string{
		"registry": "registry.example.com", "repository": "shop/api", "tag": "1.2." + strconv.Itoa(i),
		"digest": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "pad": payload,
	})
	return e
}

// snapshot measures the process and the store after a GC, as a steady
// state would show them.
func snapshot(s *store.Store, path string, events int) sample {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	size, _ := s.Size()
	segs, _ := filepath.Glob(filepath.Join(store.JournalDir(path), "*.log"))
	return sample{
		events:      events,
		rssMiB:      float64(rss()) / (1 << 20),
		heapMiB:     float64(ms.HeapAlloc) / (1 << 20),
		ids:         s.DedupeIDs(),
		segments:    len(segs),
		firstSeq:    s.FirstSeq(),
		journalsMiB: float64(size) / (1 << 20),
	}
}

// rss is the process's resident set size in bytes (Linux).
func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func render(o options, results []result) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("%s events per store, ~600 bytes each, %d appenders x %d events per Append, a consumer cursor following; %s, GOMAXPROCS %d.\n\n",
		fmtInt(o.events), o.appenders, o.batch, runtime.Version(), runtime.GOMAXPROCS(0))
	for _, r := range results {
		p("**%s**: %s journaled in %s (%s events/s); restart (Open) %s.\n\n", r.name, fmtInt(o.events), r.took.Round(time.Second),
			fmtInt(int(float64(o.events)/r.took.Seconds())), r.reopen.Round(time.Millisecond))
		p("| events | RSS MiB | Go heap MiB | ids indexed | segments | first seq kept | store MiB |\n|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, s := range r.samples {
			p("| %s | %.0f | %.0f | %s | %d | %s | %.0f |\n", fmtInt(s.events), s.rssMiB, s.heapMiB, fmtInt(s.ids), s.segments, fmtInt(int(s.firstSeq)), s.journalsMiB)
		}
		s := r.reopened
		p("| after restart | %.0f | %.0f | %s | %d | %s | %.0f |\n\n", s.rssMiB, s.heapMiB, fmtInt(s.ids), s.segments, fmtInt(int(s.firstSeq)), s.journalsMiB)
	}
	if len(results) == 2 && len(results[0].samples) > 1 {
		first, last := results[0].samples[0], results[0].samples[len(results[0].samples)-1]
		if d := last.ids - first.ids; d > 0 {
			p("Memory per event, unbounded: %.0f bytes of Go heap per journaled event (dedupe index and segment offsets).\n",
				(last.heapMiB-first.heapMiB)*(1<<20)/float64(d))
		}
	}
	return b.String()
}

// fmtInt writes n with thousands separators.
func fmtInt(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
