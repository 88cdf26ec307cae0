package cmdline

import (
	"context"
	"errors"
	"flag"
	"testing"
)

// The flags are parsed before run is called, run's error is returned, and
// run is not called on a command line the flags refuse.
func TestParseAndRun(t *testing.T) {
	var n int
	define := func(fs *flag.FlagSet) { fs.IntVar(&n, "n", 1, "a number") }
	failed := errors.New("run failed")
	var ran int
	run := func(ctx context.Context) error {
		ran = n
		if ctx.Err() != nil {
			t.Error("run's context has ended already")
		}
		return failed
	}
	if err := parseAndRun("tool", []string{"-n", "3"}, define, run); !errors.Is(err, failed) || ran != 3 {
		t.Errorf("parseAndRun = %v with -n %d; want run's error, run with -n 3", err, ran)
	}
	ran = 0
	if err := parseAndRun("tool", []string{"-m", "3"}, define, run); err == nil || ran != 0 {
		t.Errorf("parseAndRun of an unknown flag = %v, run with -n %d; want the flags' error, run not called", err, ran)
	}
}
