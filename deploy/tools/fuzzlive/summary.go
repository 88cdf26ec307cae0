package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// summary is what a fuzz run found.
type summary struct {
	seed    int64
	workers int
	fuzzed  time.Duration
	z       *fuzzer
	// persistent are the busy 503s that came again when re-posted.
	persistent []string
	checks     []check
	logPath    string
	logged     int // requests in the failure log
}

// print writes the report: requests per receiver by status, crashes,
// failures, the slowest requests, /healthz, the end checks, and what was
// logged. It returns the problems found; none is a PASS.
func (s summary) print(out io.Writer) []string {
	z := s.z
	fmt.Fprintf(out, "\nfuzz-live: seed %d, %s, %d workers, %d requests (%.0f/s)\n\n", s.seed, s.fuzzed.Round(time.Millisecond),
		s.workers, z.requests.Load(), float64(z.requests.Load())/s.fuzzed.Seconds())
	printTally(out, z.tally)
	fmt.Fprintln(out)
	problems := s.printCrashes(out)
	problems = append(problems, s.printFailures(out)...)
	s.printSlowest(out)
	fmt.Fprintf(out, "/healthz other than 200 during the fuzz: %d\n", len(z.health))
	for _, h := range z.health {
		fmt.Fprintf(out, "  %s\n", h)
	}
	if len(z.health) > 0 {
		problems = append(problems, "/healthz answered other than 200 during the fuzz")
	}
	fmt.Fprintf(out, "end checks:\n")
	printChecks(out, s.checks)
	if failed(s.checks) {
		problems = append(problems, "end checks failed")
	}
	if s.logged > 0 {
		if recs, err := readRecords(s.logPath); err == nil {
			printExamples(out, recs)
		}
		fmt.Fprintf(out, "\n%d requests logged to %s; replay them (signed anew) against a fresh flotilla with\n  go run ./deploy/tools/fuzzlive -replay %s   # -crash N: only crash N's suspects\n",
			s.logged, s.logPath, s.logPath)
	}
	if len(problems) > 0 {
		fmt.Fprintf(out, "\nFAIL (seed %d)\n", s.seed)
	} else {
		fmt.Fprintf(out, "\nPASS: flotilla took every delivery and is up, healthy and processing after kill -9 and a restart (seed %d)\n", s.seed)
	}
	return problems
}

func (s summary) printCrashes(out io.Writer) []string {
	var problems []string
	fmt.Fprintf(out, "crashes: %d\n", len(s.z.crashes))
	for i, c := range s.z.crashes {
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
	return problems
}

func (s summary) printFailures(out io.Writer) []string {
	var problems []string
	z := s.z
	if n := z.failures.Load(); n > 0 {
		problems = append(problems, fmt.Sprintf("%d requests got a 5xx or no answer", n))
	}
	fmt.Fprintf(out, "5xx or no answer: %d (besides %d requests in flight when flotilla died); busy (documented 503): %d, still refused when re-posted: %d\n",
		z.failures.Load(), z.orphans.Load(), len(z.busy), len(s.persistent))
	for _, p := range s.persistent {
		fmt.Fprintf(out, "  still 503: %s\n", p)
	}
	if len(s.persistent) > 0 {
		problems = append(problems, fmt.Sprintf("%d documented-busy 503s are no such thing: re-posted to the idle flotilla, they are refused again", len(s.persistent)))
	}
	return problems
}

func (s summary) printSlowest(out io.Writer) {
	fmt.Fprintf(out, "slowest requests (over %s are logged, not failures):\n", slowRequest)
	for _, r := range s.z.slowest {
		fmt.Fprintf(out, "  %s: %s %s from %s: %s\n", r.Took.Round(time.Millisecond), r.Request.Receiver, r.Request.Fixture,
			truncate(strings.Join(r.Request.Mutations, "; "), 300), truncate(statusText(r), 100))
	}
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
