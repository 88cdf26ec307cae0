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
	fs.DurationVar(&o.checkTimeout, "check-timeout", 2*time.Minute, "how long the engine may take to roll out a sentinel push and have nothing in flight (it works through the fuzz's backlog too)")
	fs.StringVar(&o.root, "root", ".", "a directory in the flotilla module (the one built and whose events/intake/testdata is fuzzed)")
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
		f.stop()
		return err
	}
	defer func() { _ = flog.close() }()
	z := &fuzzer{lab: l, f: f, seed: o.seed, workers: o.workers, tally: newTally(), log: flog, recent: newRecent(256)}
	start := time.Now()
	z.run(ctx, o.duration)
	s := summary{seed: o.seed, workers: o.workers, fuzzed: time.Since(start), z: z, logPath: logPath}
	if err := ctx.Err(); err != nil {
		z.f.stop()
		return err
	}
	if z.f.alive() && len(z.busy) > 0 {
		s.persistent = z.recheckBusy(ctx)
	}
	logf("fuzz over after %s; end checks", s.fuzzed.Round(time.Millisecond))
	s.checks = l.verify(ctx, z.f) // stops it
	s.logged = flog.count()
	if problems := s.print(out); len(problems) > 0 {
		return errors.New("FAILED: " + strings.Join(problems, "; "))
	}
	return nil
}
