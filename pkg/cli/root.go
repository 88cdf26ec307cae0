package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Main runs the flotilla command line with args and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(stderr, "Error:", err)
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		var ee exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		return 1
	}
	return 0
}

// usageError marks an error in how the command was called (exit code 2).
type usageError struct{ error }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "flotilla",
		Short: "Event-driven progressive delivery across fleets of Kubernetes clusters",
		Long: `flotilla turns registry and git pushes into CloudEvents, carries one verified
image digest through a fleet of Kubernetes clusters in waves of Flagger canaries,
and rolls the whole fleet back when a wave fails.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newVersionCmd(), newServeCmd(), newGetCmd(), newDescribeCmd(), newApproveCmd(), newRetryCmd(),
		newPauseCmd(), newResumeCmd(), newAbortCmd(), newOverrideCmd(), newFleetCmd(), newQuarantineCmd(), newRefreshCmd(), newRollbackCmd(), newTaskCmd(), newPipelinesCmd(), newStoreCmd(), newConfigCmd(), newTokenCmd(), newLoginCmd(), newLogoutCmd())
	return root
}
