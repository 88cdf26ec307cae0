package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

type options struct {
	duration     time.Duration
	workers      int
	seed         int64
	dir          string
	keep         bool
	replay       string
	crash        int
	bisect       bool
	logLevel     string
	checkTimeout time.Duration
	root         string
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "fuzz-live:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "fuzz-live: "+format+"\n", args...)
}

func run(args []string) error {
	var o options
	fs := flag.NewFlagSet("fuzzlive", flag.ContinueOnError)
	fs.DurationVar(&o.duration, "duration", 60*time.Second, "how long to fuzz")
	fs.IntVar(&o.workers, "workers", 8, "concurrent workers, each with its own keep-alive connection and math/rand (seeded seed+worker)")
	fs.Int64Var(&o.seed, "seed", 0, "seed of the workers' math/rand (default: from the clock; printed either way)")
	fs.StringVar(&o.dir, "dir", "", "directory for the run (config, data dirs, flotilla logs, failures.jsonl); default a new temporary one, removed after a clean run")
	fs.BoolVar(&o.keep, "keep", false, "keep the run's directory after a clean run too")
	fs.StringVar(&o.replay, "replay", "", "instead of fuzzing, post the requests of this failures.jsonl (signed anew) to a fresh flotilla and run the end checks")
	fs.IntVar(&o.crash, "crash", 0, "with -replay: only the suspects of this crash (1, 2, ...; the crash field of failures.jsonl)")
	fs.BoolVar(&o.bisect, "bisect", true, "with -replay: when the replay fails, narrow it down to the request to blame")
	fs.StringVar(&o.logLevel, "log-level", "error", "flotilla's --log-level (its log is in the run's directory)")
	fs.DurationVar(&o.checkTimeout, "check-timeout", 2*time.Minute, "how long the runtime may take to reach a sentinel push (it works through the fuzz's backlog first)")
	fs.StringVar(&o.root, "root", ".", "a directory in the flotilla module (the one built and whose events/testdata is fuzzed)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.seed == 0 {
		o.seed = time.Now().UnixNano()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir, cleanup, err := runDir(o)
	if err != nil {
		return err
	}
	l, err := newLab(ctx, o, dir)
	if err != nil {
		cleanup(false)
		return err
	}
	defer l.close()
	if o.replay != "" {
		err = replay(ctx, l, o)
	} else {
		err = fuzz(ctx, l, o, os.Stdout)
	}
	cleanup(err == nil)
	return err
}

// runDir returns the run's directory and what to do with it at the end: a
// temporary one is removed after a clean run, unless -keep.
func runDir(o options) (string, func(ok bool), error) {
	if o.dir != "" {
		if err := os.MkdirAll(o.dir, 0o755); err != nil {
			return "", nil, err
		}
		dir, err := os.MkdirTemp(o.dir, "run-")
		return dir, func(bool) {}, err
	}
	dir, err := os.MkdirTemp("", "flotilla-fuzzlive-")
	if err != nil {
		return "", nil, err
	}
	return dir, func(ok bool) {
		if ok && !o.keep {
			_ = os.RemoveAll(dir)
			return
		}
		logf("kept %s (config, flotilla logs, failures.jsonl)", dir)
	}, nil
}

// fuzz is the whole run: a flotilla with every receiver, the fuzz, the end
// checks, the summary. It fails when flotilla died, a request got a 5xx
// other than a documented 503 (busy; doc.go) or no answer, /healthz
// answered other than 200, or an end check failed.
func fuzz(ctx context.Context, l *lab, o options, out io.Writer) error {
	logf("seed %d, %s, %d workers, %d receivers (one per sender type); run directory %s", o.seed, o.duration, o.workers, len(l.targets), l.dir)
	f, err := l.startFlotilla(ctx)
	if err != nil {
		return fmt.Errorf("starting flotilla: %w", err)
	}
	logPath := filepath.Join(l.dir, "failures.jsonl")
	flog, err := openFailureLog(logPath)
	if err != nil {
		return err
	}
	defer func() { _ = flog.close() }()
	z := &fuzzer{lab: l, f: f, seed: o.seed, workers: o.workers, tally: newTally(), log: flog, recent: newRecent(256)}
	start := time.Now()
	z.run(ctx, o.duration)
	fuzzed := time.Since(start)
	if err := ctx.Err(); err != nil {
		z.f.stop()
		return err
	}
	var persistent []string
	if z.f.alive() && len(z.busy) > 0 {
		persistent = z.recheckBusy(ctx)
	}
	logf("fuzz over after %s; end checks", fuzzed.Round(time.Millisecond))
	checks := l.verify(ctx, z.f) // stops it

	fmt.Fprintf(out, "\nfuzz-live: seed %d, %s, %d workers, %d requests (%.0f/s)\n\n", o.seed, fuzzed.Round(time.Millisecond),
		o.workers, z.requests.Load(), float64(z.requests.Load())/fuzzed.Seconds())
	printTally(out, z.tally)
	var problems []string
	fmt.Fprintln(out)
	fmt.Fprintf(out, "crashes: %d\n", len(z.crashes))
	for i, c := range z.crashes {
		restart := "a restart on the same data dir came back up"
		if c.restart != "" {
			restart = "a restart on the same data dir FAILED: flotilla is down for good"
			problems = append(problems, fmt.Sprintf("crash %d: flotilla exited, and did not come back up on its data dir", i+1))
		} else {
			problems = append(problems, fmt.Sprintf("crash %d: flotilla exited", i+1))
		}
		fmt.Fprintf(out, "  crash %d, %s into the fuzz: %s; %s. Its last words:\n    %s\n",
			i+1, c.at.Round(time.Millisecond), c.exit, restart, strings.ReplaceAll(c.lastWords, "\n", "\n    "))
	}
	if n := z.failures.Load(); n > 0 {
		problems = append(problems, fmt.Sprintf("%d requests got a 5xx or no answer", n))
	}
	fmt.Fprintf(out, "5xx or no answer: %d (besides %d requests in flight when flotilla died); busy (documented 503): %d, still refused when re-posted: %d\n",
		z.failures.Load(), z.orphans.Load(), len(z.busy), len(persistent))
	for _, p := range persistent {
		fmt.Fprintf(out, "  still 503: %s\n", p)
	}
	if len(persistent) > 0 {
		problems = append(problems, fmt.Sprintf("%d documented-busy 503s are no such thing: re-posted to the idle flotilla, they are refused again", len(persistent)))
	}
	fmt.Fprintf(out, "slowest requests (over %s are logged, not failures):\n", slowRequest)
	for _, r := range z.slowest {
		fmt.Fprintf(out, "  %s: %s %s from %s: %s\n", r.Took.Round(time.Millisecond), r.Request.Receiver, r.Request.Fixture,
			truncate(strings.Join(r.Request.Mutations, "; "), 300), truncate(statusText(r), 100))
	}
	fmt.Fprintf(out, "/healthz other than 200 during the fuzz: %d\n", len(z.health))
	for _, h := range z.health {
		fmt.Fprintf(out, "  %s\n", h)
	}
	if len(z.health) > 0 {
		problems = append(problems, "/healthz answered other than 200 during the fuzz")
	}
	fmt.Fprintf(out, "end checks:\n")
	printChecks(out, checks)
	if failed(checks) {
		problems = append(problems, "end checks failed")
	}
	if flog.count() > 0 {
		recs, err := readRecords(logPath)
		if err == nil {
			printExamples(out, recs)
		}
		fmt.Fprintf(out, "\n%d requests logged to %s; replay them (signed anew) against a fresh flotilla with\n  go run ./deploy/fuzzlive -replay %s   # -crash N: only crash N's suspects\n",
			flog.count(), logPath, logPath)
	}
	if len(problems) > 0 {
		fmt.Fprintf(out, "\nFAIL (seed %d)\n", o.seed)
		return errors.New("FAILED: " + strings.Join(problems, "; "))
	}
	fmt.Fprintf(out, "\nPASS: flotilla took every delivery and is up, healthy and processing after kill -9 and a restart (seed %d)\n", o.seed)
	return nil
}

// printExamples prints the first failed requests of a log, or the last
// accepted ones before a crash.
func printExamples(out io.Writer, recs []record) {
	var failedRecs, before []record
	for _, r := range recs {
		switch r.Why {
		case whyBeforeCrash, whyOrphan:
			before = append(before, r)
		case whyFailed, whyBusy:
			failedRecs = append(failedRecs, r)
		}
	}
	if len(failedRecs) > 0 {
		fmt.Fprintf(out, "\nfirst of the %d requests that got a 5xx or no answer:\n", len(failedRecs))
		for _, r := range failedRecs[:min(3, len(failedRecs))] {
			printRequest(out, r)
		}
	}
	if len(before) > 0 {
		fmt.Fprintf(out, "\nthe %d requests accepted last or in flight before each crash are logged too, with their crash's number (the culprit may have been answered 202)\n", len(before))
	}
}

// replay posts the requests of a failures.jsonl to a fresh flotilla, runs
// the end checks, and, when they fail, bisects to the request to blame.
func replay(ctx context.Context, l *lab, o options) error {
	recs, err := readRecords(o.replay)
	if err != nil {
		return err
	}
	if o.crash > 0 {
		recs = slices.DeleteFunc(recs, func(r record) bool { return r.Crash != o.crash })
		if len(recs) == 0 {
			return fmt.Errorf("%s has no requests of crash %d", o.replay, o.crash)
		}
	}
	logf("replaying %d requests of %s; run directory %s", len(recs), o.replay, l.dir)
	checks, died, err := l.trial(ctx, recs)
	if err != nil {
		return err
	}
	fmt.Printf("\nreplay of %d requests:\n", len(recs))
	printChecks(os.Stdout, checks)
	if !failed(checks) {
		fmt.Println("\nflotilla survived the replay")
		return nil
	}
	if died >= 0 {
		fmt.Printf("flotilla was found dead right after request %d\n", died)
	}
	culprits := recs
	if o.bisect && len(recs) > 1 {
		if died >= 0 {
			recs = recs[:died+1]
		}
		if culprits, err = l.bisect(ctx, recs); err != nil {
			return err
		}
	}
	fmt.Printf("\n%d request(s) to blame:\n", len(culprits))
	for _, r := range culprits {
		printRequest(os.Stdout, r)
	}
	if len(culprits) == 1 {
		checks, _, err := l.trial(ctx, culprits)
		if err == nil {
			fmt.Println("\nthat request alone:")
			printChecks(os.Stdout, checks)
		}
	}
	return errors.New("FAILED: the replay takes flotilla down")
}
