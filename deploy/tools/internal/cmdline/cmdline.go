package cmdline

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Main runs a deploy tool: it parses the command line (os.Args[1:]) with
// the flags define sets on a flag set named name, then calls run with a
// context that ends on an interrupt or SIGTERM. An error, of the command
// line or of run, is printed as "<name>: <error>" and the tool exits 1.
func Main(name string, define func(*flag.FlagSet), run func(context.Context) error) {
	if err := parseAndRun(name, os.Args[1:], define, run); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// parseAndRun is Main but for printing the error and exiting.
func parseAndRun(name string, args []string, define func(*flag.FlagSet), run func(context.Context) error) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	define(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx)
}
