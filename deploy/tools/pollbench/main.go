// Command pollbench measures what flotilla's poll behind the webhooks
// (pkg/poll) costs and how soon it catches a push whose webhook was
// dropped, with the applications of a large fleet:
//
//   - every application's repository in go-containerregistry's in-process
//     registry on 127.0.0.1, counting the requests it answers by kind;
//   - the embedded store and state as `flotilla serve` opens them, each
//     application deployed at its newest tag (a steady state: polls find
//     nothing);
//   - pkg/poll's Poller running every application's loop at -interval (a
//     short one, so that a minute holds many polls: the cost of a poll does
//     not depend on the interval), while a version is pushed without its
//     webhook to one application after another, timing each until the
//     poll has journaled it.
//
// From the requests and CPU per poll it derives the cost at flotilla's
// default interval (five minutes).
//
//	go run ./deploy/tools/pollbench -apps 500 -out poll.md
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-cd/flotilla/deploy/tools/internal/mdsection"
	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/poll"
	"github.com/flotilla-cd/flotilla/pkg/registry"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

type options struct {
	apps     int
	tags     int
	interval time.Duration
	duration time.Duration
	drops    int
	out      string
	update   string
}

func main() {
	var o options
	flag.IntVar(&o.apps, "apps", 500, "applications, each with its own repository")
	flag.IntVar(&o.tags, "tags", 20, "tags in each repository")
	flag.DurationVar(&o.interval, "interval", 10*time.Second, "poll interval of the run (the default in flotilla is 5m: the report scales to it)")
	flag.DurationVar(&o.duration, "duration", 2*time.Minute, "how long the steady state is measured")
	flag.IntVar(&o.drops, "drops", 20, "versions pushed without a webhook during the run, each to another application")
	flag.StringVar(&o.out, "out", "", "write the Markdown report to this file (default: stdout)")
	flag.StringVar(&o.update, "update", "", "replace the poll's section of this BENCHMARKS.md with the report (the rest of the file is kept)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "pollbench:", err)
		os.Exit(1)
	}
}

// counter counts the registry's requests by kind.
type counter struct {
	tags, manifests, other atomic.Int64
}

func (c *counter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/tags/list"):
			c.tags.Add(1)
		case strings.Contains(r.URL.Path, "/manifests/"):
			c.manifests.Add(1)
		default:
			c.other.Add(1)
		}
		h.ServeHTTP(w, r)
	})
}

func (c *counter) snapshot() [3]int64 {
	return [3]int64{c.tags.Load(), c.manifests.Load(), c.other.Load()}
}

// journal adapts the store to the Poller's Journal, and tells the run when
// a poll journals a push.
type journal struct {
	s     *store.Store
	found func(image, tag string)
}

func (j journal) Append(ctx context.Context, evs ...cloudevents.Event) (int, error) {
	recs, err := j.s.Append(ctx, evs...)
	for _, r := range recs {
		if p, err := events.Decode[events.ImagePushed](r.Event); err == nil {
			j.found(p.Registry+"/"+p.Repository, p.Tag)
		}
	}
	return len(recs), err
}

func run(o options) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "pollbench")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()

	var reqs counter
	srv := httptest.NewServer(reqs.wrap(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	s, err := store.Open(filepath.Join(dir, "db"))
	if err != nil {
		return err
	}
	defer func() { _ = s.Close() }()
	repo := embedded.NewRepo(s, nil)

	setupStart := time.Now()
	img, err := random.Image(256, 1)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	cfg := &config.Config{Fleet: config.Fleet{Poll: config.Poll{Interval: &config.Duration{Duration: o.interval}}}}
	for i := range o.apps {
		app := config.Application{Name: fmt.Sprintf("app%04d", i), Image: fmt.Sprintf("%s/team/app%04d", host, i), Track: config.TrackMinorVersion}
		newest, err := pushTags(app.Image, img, o.tags)
		if err != nil {
			return err
		}
		if err := repo.UpdateApp(ctx, app.Name, func(st *rollout.AppState) error {
			st.DeployedTag, st.DeployedDigest, st.LatestTag = newest, digest.String(), newest
			return nil
		}); err != nil {
			return err
		}
		cfg.Applications = append(cfg.Applications, app)
	}
	setup := time.Since(setupStart)

	var mu sync.Mutex
	pushed := map[string]time.Time{} // image:tag -> when pushed without a webhook
	var caught []time.Duration
	j := journal{s: s, found: func(image, tag string) {
		mu.Lock()
		defer mu.Unlock()
		if at, ok := pushed[image+":"+tag]; ok {
			caught = append(caught, time.Since(at))
			delete(pushed, image+":"+tag)
			// As plan would on starting its rollout: later polls find
			// nothing newer.
			app := image[strings.LastIndex(image, "/")+1:]
			_ = repo.UpdateApp(context.WithoutCancel(ctx), app, func(st *rollout.AppState) error { st.LatestTag = tag; return nil })
		}
	}}
	reg := prometheus.NewRegistry()
	p, err := poll.New(cfg, registry.NewRemote(registry.WithKeychain(authn.NewMultiKeychain())), repo, j, poll.Options{Metrics: reg})
	if err != nil {
		return err
	}

	runtime.GC()
	before := memory()
	cpu0 := cpuTime()
	reqs0 := reqs.snapshot()
	start := time.Now()
	runCtx, stop := context.WithTimeout(ctx, o.duration)
	defer stop()
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(runCtx) }()

	// Drop webhooks: one application after another gets a new version
	// the poll must find. Its pushes' requests are the bench's, not the
	// poll's: counted apart.
	var pushReqs [3]int64
	every := o.duration / time.Duration(o.drops+1)
	var during memStats
	for k := range o.drops {
		select {
		case <-runCtx.Done():
		case <-time.After(every):
		}
		if runCtx.Err() != nil {
			break
		}
		app := cfg.Applications[rand.IntN(len(cfg.Applications))]
		tag := fmt.Sprintf("1.%d.0", 100+k)
		b := reqs.snapshot()
		next, err := random.Image(256, 1)
		if err != nil {
			return err
		}
		if err := push(app.Image, tag, next); err != nil {
			return err
		}
		a := reqs.snapshot()
		for i := range pushReqs {
			pushReqs[i] += a[i] - b[i]
		}
		mu.Lock()
		pushed[app.Image+":"+tag] = time.Now()
		mu.Unlock()
		if k == o.drops/2 {
			during = memory()
		}
	}
	<-done
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	reqs1 := reqs.snapshot()
	polls := counterSum(reg, "flotilla_polls_total")
	var pollReqs [3]int64
	for i := range pollReqs {
		pollReqs[i] = reqs1[i] - reqs0[i] - pushReqs[i]
	}
	mu.Lock()
	missed := len(pushed)
	lat := slices.Clone(caught)
	mu.Unlock()
	slices.Sort(lat)

	var b strings.Builder
	if err := report(&b, o, reportInput{
		setup: setup, elapsed: elapsed, cpu: cpu, polls: polls, reqs: pollReqs,
		before: before, during: during, caught: lat, missed: missed,
	}); err != nil {
		return err
	}
	fmt.Print(b.String())
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	if o.update != "" {
		return mdsection.Replace(o.update, heading, b.String(), "## Reproduce")
	}
	return nil
}

// pushTags pushes img to image at tags 1.0.0 .. 1.0.<n-1> and returns the
// newest.
func pushTags(image string, img v1.Image, n int) (string, error) {
	newest := ""
	for k := range n {
		newest = fmt.Sprintf("1.0.%d", k)
		if err := push(image, newest, img); err != nil {
			return "", err
		}
	}
	return newest, nil
}

func push(image, tag string, img v1.Image) error {
	ref, err := name.NewTag(image + ":" + tag)
	if err != nil {
		return err
	}
	if err := remote.Write(ref, img); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}

// cpuTime is the CPU this process has used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type memStats struct {
	rssMiB, heapMiB float64
	goroutines      int
}

func memory() memStats {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memStats{rssMiB: rssMiB(), heapMiB: float64(m.HeapInuse) / (1 << 20), goroutines: runtime.NumGoroutine()}
}

// rssMiB reads VmRSS from /proc/self/status.
func rssMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb float64
			if _, err := fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb); err == nil {
				return kb / 1024
			}
		}
	}
	return 0
}

// counterSum sums a counter's series in reg.
func counterSum(reg *prometheus.Registry, metric string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}
