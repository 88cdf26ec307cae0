// Command bench measures flotilla's reaction latencies on a real local fleet:
//
//   - A: registry notification POSTed -> wave 1's first apply request;
//   - B: wave 1's last "Promotion completed!" event POSTed -> every canary of
//     wave 2 applied (the last wave-2 apply request started, and returned);
//   - C (-rollbacks): a wave-2 canary's "Canary failed!" event POSTed -> every
//     wave-2 cluster's revert applied (started, and returned).
//
// It starts its own fleet (pkg/testkit/localfleet, no Tekton), an in-process registry
// and flotilla's whole main job in process (pkg/app) with the embedded
// executor wrapped by a recorder that timestamps every ApplyCanary call. Wave
// 1 is completed without waiting for Flagger's analysis: the bench does what
// Flagger does at promotion (the primary runs the new image, the canary's
// status says Succeeded) and POSTs the event Flagger would send.
//
//	go run ./deploy/tools/bench -runs 100 -wave2 8,50 -out BENCHMARKS.md
//
// Build the fleet's binaries first (make fleet-build); `make bench` does both.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/deploy/tools/internal/cmdline"
)

type options struct {
	runs       int
	warmup     int
	clusters   int
	wave1      int
	wave2      []int
	wave2Flag  string // -wave2, parsed into wave2
	interval   time.Duration
	settle     time.Duration
	out        string
	storeFile  string
	launchFile string
	verifyFile string
	whatifFile string
	intake     string
	journal    string
	keep       bool
	verbose    bool
	trace      bool
	cpuprofile string
	bprofile   string
	btrace     string
	section    string
	raw        string
	inflight   int
	watchers   int
	rollbacks  int
	fleetNice  int
	// fleetShares is the fleet's CPU cgroup weight (0: no cgroup).
	fleetShares int
	large       int
	largeRuns   int
	scaleOut    int
	// pod runs flotilla from its image by its chart on a real node and
	// measures its memory (pod.go) instead of the latencies.
	pod      bool
	chart    string
	podEvery time.Duration
	podIdle  time.Duration
}

// flags defines the command line's flags into o.
func (o *options) flags(fs *flag.FlagSet) {
	fs.IntVar(&o.runs, "runs", 100, "measured rollouts per scenario")
	fs.IntVar(&o.warmup, "warmup", 2, "unmeasured rollouts per scenario before the measured ones (the first waits for Flagger's initialization)")
	fs.IntVar(&o.clusters, "clusters", 9, "real clusters to start: c1 serves wave 1, c2..cN serve wave 2")
	fs.IntVar(&o.wave1, "wave1", 1, "named clusters in wave 1 (spread over c1)")
	fs.StringVar(&o.wave2Flag, "wave2", "8,50", "comma-separated scenarios: named clusters in wave 2 (spread over c2..cN)")
	fs.DurationVar(&o.interval, "analysis-interval", time.Minute, "Flagger analysis interval of the canaries (10 iterations of it: Flagger never promotes on its own during a run)")
	fs.DurationVar(&o.settle, "settle", 500*time.Millisecond, "pause between runs once every Deployment has rolled out")
	fs.StringVar(&o.out, "out", "", "write the report to this markdown file (BENCHMARKS.md)")
	fs.StringVar(&o.storeFile, "store-results", "", "output of `go test -bench . ./pkg/store` to include in the report")
	fs.StringVar(&o.launchFile, "launch-results", "", "output of `go test -bench BenchmarkLaunchWave ./functions/launch` to include in the report")
	fs.StringVar(&o.verifyFile, "verify-results", "", "output of `go test -bench BenchmarkVerify ./pkg/signature` to include in the report")
	fs.StringVar(&o.whatifFile, "whatif-results", "", "output of `go test -bench BenchmarkSimulate1000Clusters5Waves ./pkg/simulate` to include in the report")
	fs.StringVar(&o.intake, "intake-results", "", "Markdown written by `go run ./deploy/tools/loadtest -out` to include in the report")
	fs.StringVar(&o.journal, "journal-results", "", "Markdown written by `go run ./deploy/tools/journalbench -out` to include in the report")
	fs.BoolVar(&o.keep, "keep", false, "keep the fleet's directory (logs) after the run")
	fs.BoolVar(&o.verbose, "v", false, "log every run's numbers")
	fs.StringVar(&o.raw, "raw", "", "also write every measured run as CSV to this file")
	fs.BoolVar(&o.trace, "trace", false, "print when each wave-2 apply started and how long it took")
	fs.IntVar(&o.inflight, "inflight", 0, "also run the last -wave2 scenario with this many rollouts of other applications (one each) held in flight (0: not)")
	fs.IntVar(&o.watchers, "watchers", 0, "also run the first -wave2 scenario with this many watchers of the watch stream (GET /api/v1/watch: web UI pages, --watch) open (0: not)")
	fs.IntVar(&o.rollbacks, "rollbacks", 0, "after the measured rollouts, this many more whose wave 2 fails: measures C (a canary's failure -> every wave-2 revert applied)")
	fs.IntVar(&o.large, "large", 0, "also run a scenario with this many named clusters in wave 2 (1000: DESIGN's one wave of 1,000 clusters), measured -large-runs times (0: not)")
	fs.IntVar(&o.largeRuns, "large-runs", 5, "measured rollouts of the -large scenario (each applies every one of its clusters twice: its runs take minutes)")
	fs.IntVar(&o.scaleOut, "scale-out", 0, "also run each -wave2 scenario in scale-out mode with this many replicas (in process, on a three-node NATS JetStream cluster, requests spread over them), right after its embedded run (0: not)")
	fs.IntVar(&o.fleetNice, "fleet-nice", 10, "nice value of the fleet's processes (API servers, etcd, controllers, Flagger): they stand in for clusters on other machines, so flotilla's process gets the CPU first (0: share it equally)")
	fs.IntVar(&o.fleetShares, "fleet-cpu-shares", 2, "put the fleet's processes in a CPU cgroup of this weight (cgroup v1 cpu.shares, 2 to 262144; flotilla's process has 1024): nice weighs each thread, so a thousand clusters' threads outweigh flotilla's few however nice; a group of weight 2 is weighed as one, and gets the cores when flotilla leaves them (needs root; 0: no cgroup, as before 2026-12-04)")
	fs.BoolVar(&o.pod, "pod", false, "instead of the latencies: install flotilla from its image by its chart on a real node of c1 (needs root), roll -runs versions out through the first -wave2 scenario from the pod, and report the pod's memory idle before, during and after (-raw: every sample)")
	fs.StringVar(&o.chart, "chart", "deploy/chart/flotilla", "the chart's directory, for -pod")
	fs.DurationVar(&o.podEvery, "pod-every", 250*time.Millisecond, "how often -pod samples the pod's memory")
	fs.DurationVar(&o.podIdle, "pod-idle", 30*time.Second, "how long -pod samples the idle pod before the first rollout and after the last")
	fs.StringVar(&o.section, "section", "", "write only the reaction tables, as the dated section \"## <section> (<date>)\" of -out, replacing that section of an earlier run and keeping the rest of the file (make bench-large)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the bench's process (flotilla included) over the scenarios to this file")
	fs.StringVar(&o.btrace, "btrace", "", "write an execution trace (runtime/trace: what each goroutine waited on) of the bench's process over each rollout's B window to <this>-<scenario>-<version>.trace; read it with `go tool trace` (-pprof=sync|sched|syscall|net)")
	fs.StringVar(&o.bprofile, "bprofile", "", "write a CPU profile of the bench's process over each rollout's B window (the last wave-1 canary succeeded -> every wave-2 apply requested) to <this>-<scenario>-<version>.pprof (not with -cpuprofile)")
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == proxyHostCommand {
		cert, err := tls.LoadX509KeyPair(os.Args[2], os.Args[3])
		if err == nil {
			err = serveProxies(context.Background(), os.Stdin, os.Stdout, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench proxy-host:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	cmdline.Main("bench", o.flags, func(ctx context.Context) error { return run(ctx, o) })
}

func run(ctx context.Context, o options) error {
	for _, s := range strings.Split(o.wave2Flag, ",") {
		if strings.TrimSpace(s) == "" && o.wave2Flag == s {
			break // -wave2 "": only the -large scenario
		}
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-wave2: %q is not a positive number", s)
		}
		o.wave2 = append(o.wave2, n)
	}
	if o.clusters < 2 || o.wave1 < 1 || o.runs < 1 || o.inflight < 0 || o.watchers < 0 || o.rollbacks < 0 || o.fleetNice < 0 || o.fleetNice > 19 ||
		(o.fleetShares != 0 && (o.fleetShares < 2 || o.fleetShares > 262144)) || o.large < 0 || o.largeRuns < 1 || o.scaleOut < 0 {
		return fmt.Errorf("need -clusters >= 2, -wave1 >= 1, -runs >= 1, -inflight >= 0, -watchers >= 0, -rollbacks >= 0, 0 <= -fleet-nice <= 19, -fleet-cpu-shares 0 or 2 to 262144, -large >= 0, -large-runs >= 1")
	}
	if len(o.wave2) == 0 && o.large == 0 {
		return fmt.Errorf("-wave2 \"\" needs -large: there would be nothing to measure")
	}
	if o.cpuprofile != "" && o.bprofile != "" {
		return fmt.Errorf("-cpuprofile and -bprofile cannot both be given: a process has one CPU profile at a time")
	}
	if o.section != "" && o.out == "" {
		return fmt.Errorf("-section needs -out: the file whose section it rewrites")
	}
	if o.pod && (len(o.wave2) != 1 || o.out != "" || o.podEvery <= 0 || o.podIdle < 0) {
		return fmt.Errorf("-pod needs one -wave2 scenario, no -out (it prints its rows), -pod-every > 0 and -pod-idle >= 0")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if o.pod {
		return runPod(ctx, o, log)
	}

	env := captureMachine()
	b, err := newBench(ctx, o, log)
	if err != nil {
		return err
	}
	defer b.close()
	env.fleetRSS = b.fleetRSS()
	if err := b.confine(); err != nil {
		return err
	}

	if o.cpuprofile != "" {
		stop, err := startCPUProfile(o.cpuprofile)
		if err != nil {
			return err
		}
		defer stop()
	}
	inputs, err := readInputs(o)
	if err != nil {
		return err
	}
	var results []scenarioResult
	type plan struct{ wave2, inflight, watchers, runs, rollbacks, replicas int }
	var plans []plan
	for _, n := range o.wave2 {
		plans = append(plans, plan{n, 0, 0, o.runs, o.rollbacks, 0})
		if o.scaleOut > 0 {
			plans = append(plans, plan{n, 0, 0, o.runs, o.rollbacks, o.scaleOut})
		}
	}
	if o.watchers > 0 && len(o.wave2) > 0 {
		plans = append(plans, plan{o.wave2[0], 0, o.watchers, o.runs, 0, 0})
	}
	if o.inflight > 0 && len(o.wave2) > 0 {
		plans = append(plans, plan{o.wave2[len(o.wave2)-1], o.inflight, 0, o.runs, 0, 0})
	}
	if o.large > 0 {
		plans = append(plans, plan{o.large, 0, 0, o.largeRuns, 0, 0})
	}
	for i, pl := range plans {
		n := pl.wave2
		sc, err := b.newScenario(ctx, i, n, pl.inflight, pl.watchers, pl.replicas)
		if err == nil {
			sc.runs, sc.rollbacks = pl.runs, pl.rollbacks
		}
		if err != nil {
			return fmt.Errorf("scenario wave2=%d: %w", n, err)
		}
		res, err := sc.run(ctx)
		sc.close()
		if err != nil {
			return fmt.Errorf("scenario wave2=%d: %w", n, err)
		}
		results = append(results, res)
		fmt.Fprintln(os.Stderr, res.summary())
		if i < len(plans)-1 {
			// Every finished scenario is written at once: a run of
			// hours that is interrupted keeps what it measured.
			env.loadAfter = loadAvg() + " (partial: " + strconv.Itoa(i+1) + " of " + strconv.Itoa(len(plans)) + " scenarios)"
			if err := writeOutputs(o, env, results, inputs, false); err != nil {
				return err
			}
		}
	}
	env.loadAfter = loadAvg()
	return writeOutputs(o, env, results, inputs, true)
}

// inputs are the other benchmarks' results the report includes.
type inputs struct {
	store, launch, verify, whatif []storeResult
	intake, journal               string
}

func readInputs(o options) (inputs, error) {
	var in inputs
	var err error
	for _, f := range []struct {
		path string
		dst  *[]storeResult
	}{{o.storeFile, &in.store}, {o.launchFile, &in.launch}, {o.verifyFile, &in.verify}, {o.whatifFile, &in.whatif}} {
		if f.path == "" {
			continue
		}
		if *f.dst, err = parseStoreBench(f.path); err != nil {
			return in, err
		}
	}
	for _, f := range []struct {
		path, what string
		dst        *string
	}{{o.intake, "intake", &in.intake}, {o.journal, "journal", &in.journal}} {
		if f.path == "" {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			return in, fmt.Errorf("reading %s results: %w", f.what, err)
		}
		*f.dst = string(b)
	}
	return in, nil
}

// writeOutputs writes the raw CSV and the report; final also prints it.
func writeOutputs(o options, env machine, results []scenarioResult, in inputs, final bool) error {
	if o.raw != "" {
		if err := writeRaw(o.raw, results); err != nil {
			return err
		}
	}
	report := renderReport(o, env, results, in)
	if o.section != "" {
		old, err := os.ReadFile(o.out)
		if err != nil {
			return fmt.Errorf("reading %s for its section: %w", o.out, err)
		}
		section := "## " + o.section + " (" + env.started.Format("2006-01-02") + ")\n\n" +
			"`make bench-large` (`go run ./deploy/tools/bench -section ...`), measured apart from `make bench` because its setup alone takes about 25 minutes.\n\n" +
			reactionTables(report)
		if final {
			fmt.Print(section)
		}
		if err := os.WriteFile(o.out, []byte(replaceSection(string(old), "## "+o.section+" (", section)), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", o.out, err)
		}
		fmt.Fprintln(os.Stderr, "section written to", o.out)
		return nil
	}
	if o.out != "" {
		// Sections measured on their own, dated in their headings
		// ("## ... (2026-11-27)"), are kept until a run supersedes them.
		if old, err := os.ReadFile(o.out); err == nil {
			report = keepDated(report, string(old))
		}
	}
	if final {
		fmt.Print(report)
	}
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(report), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", o.out, err)
		}
		fmt.Fprintln(os.Stderr, "report written to", o.out)
	}
	return nil
}

// startCPUProfile profiles the process into path until the returned stop.
func startCPUProfile(path string) (func(), error) {
	return startInto(path, "the CPU profile", pprof.StartCPUProfile, pprof.StopCPUProfile)
}

// startTrace traces the process's execution into path until the
// returned stop.
func startTrace(path string) (func(), error) {
	return startInto(path, "the execution trace", trace.Start, trace.Stop)
}

// startInto creates path and has start write what into it until the
// returned func stops it and closes the file.
func startInto(path, what string, start func(io.Writer) error, stop func()) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", what, err)
	}
	if err := start(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("starting %s: %w", what, err)
	}
	return func() {
		stop()
		_ = f.Close()
	}, nil
}

// reactionTables is the body of a report's reaction section: its tables
// and notes, without the heading and the description of the setup.
func reactionTables(report string) string {
	const start, end = "## Reaction latency on a real local fleet\n\n", "\n### What is real and what is simulated"
	if i := strings.Index(report, start); i >= 0 {
		report = report[i+len(start):]
	}
	if j := strings.Index(report, end); j >= 0 {
		report = report[:j]
	}
	return strings.TrimRight(report, "\n") + "\n"
}

// replaceSection puts section in doc in place of the sections whose heading
// starts with prefix (a dated heading: the date changes run to run), or
// before "## Reproduce" when there is none.
func replaceSection(doc, prefix, section string) string {
	section = strings.TrimRight(section, "\n") + "\n\n"
	lines := strings.SplitAfter(doc, "\n")
	var out strings.Builder
	placed := false
	for i := 0; i < len(lines); i++ {
		switch {
		case strings.HasPrefix(lines[i], prefix):
			if !placed {
				out.WriteString(section)
				placed = true
			}
			for i+1 < len(lines) && !strings.HasPrefix(lines[i+1], "## ") {
				i++
			}
		case !placed && lines[i] == "## Reproduce\n":
			out.WriteString(section)
			placed = true
			out.WriteString(lines[i])
		default:
			out.WriteString(lines[i])
		}
	}
	if !placed {
		out.WriteString("\n" + section)
	}
	return out.String()
}

// datedHeading matches a section heading with a date: a measurement made
// apart from make bench, which the report keeps.
var datedHeading = regexp.MustCompile(`^## .*\(\d{4}-\d{2}-\d{2}[^)]*\)\s*$`)

// keepDated inserts the dated "## " sections of old into report, before
// its "## Reproduce" section, unless report has a section of that heading.
func keepDated(report, old string) string {
	var kept []string
	lines := strings.Split(old, "\n")
	for i := 0; i < len(lines); i++ {
		if !datedHeading.MatchString(lines[i]) || strings.Contains(report, "\n"+lines[i]+"\n") {
			continue
		}
		j := i + 1
		for j < len(lines) && !strings.HasPrefix(lines[j], "## ") {
			j++
		}
		kept = append(kept, strings.TrimRight(strings.Join(lines[i:j], "\n"), "\n"))
		i = j - 1
	}
	if len(kept) == 0 {
		return report
	}
	const repro = "\n## Reproduce\n"
	k := strings.Index(report, repro)
	if k < 0 {
		return report + "\n" + strings.Join(kept, "\n\n") + "\n"
	}
	return report[:k] + "\n" + strings.Join(kept, "\n\n") + "\n" + report[k:]
}
