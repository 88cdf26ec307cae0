package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
)

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
