package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes of every command (README, "The command line"); some commands
// add their own: `task` 3 (retrying cannot help), `describe rollout
// --watch` 4 (the rollout ended other than Succeeded) and 5 (--timeout).
const (
	exitOK      = 0
	exitFailure = 1 // the command failed: flotilla unreachable, refused, not found...
	exitUsage   = 2 // how it was called: an unknown command, kind, flag or -o format, a missing argument
)

// Main runs the flotilla command line with args and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(stderr, "Error:", err)
		return exitCode(err)
	}
	return exitOK
}

// exitCode is the exit code of a command's error.
func exitCode(err error) int {
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitFailure
}

// usageError marks an error in how the command was called (exit code 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "flotilla",
		Short: "Event-driven progressive delivery across fleets of Kubernetes clusters",
		Long: `flotilla turns registry and git pushes into CloudEvents, carries one verified
image digest through a fleet of Kubernetes clusters in waves of Flagger canaries,
and rolls the whole fleet back when a wave fails.

Exit codes: 0 done, 1 an error (flotilla unreachable, a refusal, not found),
2 a usage error (an unknown command, kind, flag or output format, a missing
argument); 'task' adds 3, 'describe rollout --watch' 4 and 5 (see its help).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newVersionCmd(), newServeCmd(), newGetCmd(), newDescribeCmd(), newApproveCmd(), newRetryCmd(),
		newPauseCmd(), newResumeCmd(), newAbortCmd(), newOverrideCmd(), newFleetCmd(), newQuarantineCmd(), newRefreshCmd(), newRollbackCmd(), newTaskCmd(), newPipelinesCmd(), newStoreCmd(), newConfigCmd(), newTokenCmd(), newLoginCmd(), newLogoutCmd(), newWhoamiCmd())
	root.AddCommand(newSimulateCmd())
	root.InitDefaultCompletionCmd()
	strictUsage(root)
	return root
}

// strictUsage makes every way of calling a command wrongly a usage error
// (exit 2), as kubectl: a command of subcommands (get, describe, token...)
// given an unknown one or none fails naming them (cobra would print the
// help and exit 0), and a wrong number of arguments or a required flag
// missing is refused as such (cobra's errors exit 1).
func strictUsage(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		strictUsage(c)
	}
	if cmd.HasSubCommands() && !cmd.Runnable() {
		cmd.Annotations = map[string]string{annotationGroup: "true"}
		cmd.Args = cobra.ArbitraryArgs
		cmd.RunE = func(c *cobra.Command, args []string) error {
			if !c.HasParent() && len(args) == 0 {
				return c.Help() // flotilla alone: its help
			}
			return usageError{unknownSubcommand(c, args)}
		}
	}
	args := cmd.Args
	if args == nil {
		args = cobra.ArbitraryArgs
	}
	cmd.Args = func(c *cobra.Command, a []string) error {
		if err := args(c, a); err != nil {
			return usageError{err}
		}
		if err := c.ValidateRequiredFlags(); err != nil {
			return usageError{err}
		}
		if err := c.ValidateFlagGroups(); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// annotationGroup marks a command that only groups others (get,
// describe, token...): it does nothing itself.
const annotationGroup = "flotilla/group"

// unknownSubcommand says that args name none of cmd's subcommands, and
// which there are.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	what := "command"
	if cmd.Name() == "get" || cmd.Name() == "describe" {
		what = "kind"
	}
	if len(args) == 0 {
		return fmt.Errorf("%s needs a %s: %s", cmd.CommandPath(), what, strings.Join(names, ", "))
	}
	msg := fmt.Sprintf("unknown %s %q for %q: want %s", what, args[0], cmd.CommandPath(), strings.Join(names, ", "))
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return errors.New(msg)
}
