package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-cd/flotilla/pkg/simulate"
)

func newSimulateCmd() *cobra.Command {
	var (
		path, format, tags string
		quiet              bool
	)
	cmd := &cobra.Command{
		Use:   "simulate --config FILE FEATURE...",
		Short: "Run Gherkin scenarios of a fleet config offline, in virtual time",
		Long: `simulate runs Gherkin scenarios (features, or directories of them) against
the config's fleet, waves and applications, offline: the real engine (the same
functions, dispatcher, wave rules and embedded state, in a temporary
directory) with a simulated fleet (an executor that applies instantly, a
simulated Flagger whose outcome per version, cluster or wave the scenario
decides) and a virtual clock that jumps to the next timer while the engine is
idle, so a two-hour bake runs in milliseconds. Secrets the config names need
not be set and kubeconfigs need not exist: no cluster, registry or sender is
reached. An approval is held to the API's rule of who may approve
(approvals.from, separation of duties, automation tokens); catch-up, drift and
the registry poll are not simulated. A release set plays as one application: a member's
push is the set's, every member runs what the set runs, and the report lists
the set's members. A set of image members is played member by member: a
member's push rolls out the set with that member at the pushed tag and the
others at what the fleet runs ('the fleet runs "2.0.0" of "shop-frontend"'),
decided by the member's policy; the report names each member's version.
A set of git and image members is played member by member too: a commit
pushed naming the set or a git member moves every git member, a member's
image that member, the members applied in dependsOn order in each cluster.

After each scenario a report goes to stderr (--quiet: none): the rollout's
timeline in virtual time after the push, the rollback order and a waves x
clusters table of the version each cluster runs. --format is godog's: pretty
(the default), progress, cucumber, junit, events; "junit:FILE" writes JUnit XML
to FILE, several comma-separated. The exit code is 0 when every scenario
passed, 1 when one failed, 2 for a usage or config error.

Steps (docs/simulate.md has examples):
` + stepList(),
		Example: `  flotilla simulate --config flotilla.yaml what-if/*.feature
  flotilla simulate --config flotilla.yaml --format junit:report.xml,progress what-if/`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, paths []string) error {
			if path == "" {
				return usageError{errors.New("--config is required")}
			}
			if len(paths) == 0 {
				return usageError{errors.New("name at least one feature file or directory")}
			}
			o := simulate.Options{Config: path, Paths: paths, Format: format, Tags: tags, Output: cmd.OutOrStdout()}
			if !quiet {
				o.Report = cmd.ErrOrStderr()
			}
			start := time.Now()
			status, err := simulate.Run(cmd.Context(), o)
			if err != nil {
				return exitError{2, err}
			}
			if !quiet {
				fmt.Fprintf(cmd.ErrOrStderr(), "\nsimulated in %s of wall time\n", time.Since(start).Round(time.Millisecond))
			}
			if status != 0 {
				return exitError{status, fmt.Errorf("simulate: scenarios failed (status %d)", status)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "config", "", "the fleet config (as flotilla serve reads it)")
	cmd.Flags().StringVar(&format, "format", "pretty", "godog's formatters: pretty, progress, cucumber, junit, events; NAME:FILE writes to FILE; comma-separated")
	cmd.Flags().StringVar(&tags, "tags", "", "run only the scenarios this godog tag expression selects")
	cmd.Flags().BoolVar(&quiet, "quiet", false, "print no report")
	return cmd
}

// stepList lists the step library's examples, one a line.
func stepList() string {
	var b strings.Builder
	for _, s := range simulate.Steps() {
		for i, line := range strings.Split(s.Example, "\n") {
			if i > 0 {
				b.WriteString("    ")
			}
			b.WriteString("  " + line + "\n")
		}
	}
	return b.String()
}
