package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/fault"
)

func newTaskCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "task",
		Short: "Run one pipeline task (the steps of flotilla's Tekton Tasks run these)",
		Long: `Run one pipeline task. The steps of flotilla's Tekton Tasks run these
commands, and the embedded executor calls the same code in process.

Each flag but --kubeconfig, --context and --git-credentials is a param of the
Task of the same name; --result-<name> writes a result to a file, as Tekton's
$(results.<name>.path). Without any --result-* flag the results are printed
as a JSON object. A failed task writes its error to --result-error and exits
1, or 3 when retrying cannot help.`,
	}
	for _, def := range tasks.Defs() {
		cmd.AddCommand(newTaskDefCmd(def))
	}
	return cmd
}

// exitError ends the command with a given exit code.
type exitError struct {
	code int
	error
}

func (e exitError) Unwrap() error { return e.error }

// newTaskDefCmd is `flotilla task <name>`, its flags the task's params.
func newTaskDefCmd(def tasks.Def) *cobra.Command {
	cmd := &cobra.Command{
		Use:   def.Name,
		Short: def.Short,
		Args:  cobra.NoArgs,
	}
	in := def.Bind(cmd.Flags())
	// apply-canary keeps the conveniences it had before it was a Task.
	var canaryFile, resultFile string
	if def.Name == "apply-canary" {
		cmd.Flags().StringVar(&canaryFile, "canary-file", "", "read --canary from this file (YAML or JSON)")
		cmd.Flags().StringVar(&resultFile, "result-file", "", `also write the results as one JSON object {"previousImage","changed"}`)
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if canaryFile != "" {
			if in.Changed(tasks.ParamCanary) {
				return usageError{fmt.Errorf("--canary and --canary-file: give one")}
			}
			b, err := os.ReadFile(canaryFile)
			if err != nil {
				return usageError{fmt.Errorf("--canary-file: %w", err)}
			}
			if err := in.Set(tasks.ParamCanary, string(b)); err != nil {
				return usageError{err}
			}
		}
		if _, err := in.Params(); err != nil {
			return usageError{err}
		}
		paths := in.ResultPaths()
		res, err := in.Run(cmd.Context(), in.Env())
		if err != nil {
			if p, ok := paths[tasks.ResultError]; ok {
				_ = tasks.WriteResults(tasks.Results{tasks.ResultError: tasks.ErrorResult(err)}, map[string]string{tasks.ResultError: p})
			}
			if fault.IsPermanent(err) {
				return exitError{tasks.ExitPermanent, err}
			}
			return err
		}
		if err := tasks.WriteResults(res, paths); err != nil {
			return err
		}
		if resultFile != "" {
			if err := writeApplyCanaryResult(resultFile, res); err != nil {
				return err
			}
		}
		if len(paths) == 0 {
			out, err := json.Marshal(res)
			if err != nil {
				return fmt.Errorf("encoding results: %w", err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), string(out))
		}
		return nil
	}
	return cmd
}

// writeApplyCanaryResult writes apply-canary's results as one JSON object.
func writeApplyCanaryResult(path string, res tasks.Results) error {
	changed, _ := strconv.ParseBool(res[tasks.ResultChanged])
	out, err := json.Marshal(tasks.ApplyCanaryResult{PreviousImage: res[tasks.ResultPreviousImage], Changed: changed})
	if err != nil {
		return fmt.Errorf("encoding result: %w", err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return fmt.Errorf("writing result: %w", err)
	}
	return nil
}
