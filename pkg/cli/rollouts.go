package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

func newGetCmd() *cobra.Command {
	var server, output string
	var watch bool
	var interval time.Duration
	cmd := &cobra.Command{Use: "get", Short: "List resources of a running flotilla"}
	rollouts := &cobra.Command{
		Use:     "rollouts",
		Aliases: []string{"rollout", "ro"},
		Short:   "List rollouts, newest first (--watch: live, waves x clusters)",
		Long: `List rollouts, newest first: those in flight, then the latest finished.

With --watch the list is redrawn every --interval until interrupted, each
rollout in flight with its waves x clusters and what it waits for (bake,
approvals, a freeze window, a pause, a stopped fleet).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if watch {
				return watchRollouts(cmd, apiClient{base: server}, interval)
			}
			var ros []rollout.Rollout
			if err := (apiClient{base: server}).get(cmd.Context(), "/api/v1/rollouts", &ros); err != nil {
				return err
			}
			if output == "json" {
				return writeJSONOut(cmd.OutOrStdout(), ros)
			}
			printRollouts(cmd.OutOrStdout(), ros)
			return nil
		},
	}
	rollouts.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	rollouts.Flags().BoolVarP(&watch, "watch", "w", false, "redraw the list live, with waves x clusters, until interrupted")
	rollouts.Flags().DurationVar(&interval, "interval", time.Second, "how often --watch redraws")
	cmd.PersistentFlags().StringVar(&server, "server", defaultServer(), "URL of the running flotilla (env FLOTILLA_SERVER)")
	cmd.AddCommand(rollouts)
	return cmd
}

func newDescribeCmd() *cobra.Command {
	var server, output string
	cmd := &cobra.Command{Use: "describe", Short: "Show one resource of a running flotilla in detail"}
	ro := &cobra.Command{
		Use:     "rollout ID",
		Aliases: []string{"ro"},
		Short:   "Show a rollout: waves x clusters with their state",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r rollout.Rollout
			if err := (apiClient{base: server}).get(cmd.Context(), "/api/v1/rollouts/"+args[0], &r); err != nil {
				return err
			}
			if output == "json" {
				return writeJSONOut(cmd.OutOrStdout(), r)
			}
			DescribeRollout(cmd.OutOrStdout(), r)
			return nil
		},
	}
	ro.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.PersistentFlags().StringVar(&server, "server", defaultServer(), "URL of the running flotilla (env FLOTILLA_SERVER)")
	cmd.AddCommand(ro)
	return cmd
}

func writeJSONOut(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printRollouts(w io.Writer, ros []rollout.Rollout) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAPPLICATION\tTAG\tDIGEST\tPHASE\tWAVE\tCLUSTERS\tAGE\tWAITING")
	for _, r := range ros {
		done, total := 0, 0
		for _, w := range r.Waves {
			for _, c := range w.Clusters {
				total++
				if c.Phase == rollout.ClusterSucceeded || c.Phase == rollout.ClusterReverted {
					done++
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%d/%d\t%s\t%s\n", r.ID, r.Application, r.Tag, short(r.Digest),
			r.Phase, r.Wave+1, len(r.Waves), done, total, age(r.Created), dash(truncate(waitingFor(r), 60)))
	}
	_ = tw.Flush()
}

// DescribeRollout prints a rollout as waves x clusters.
func DescribeRollout(w io.Writer, r rollout.Rollout) {
	fmt.Fprintf(w, "Rollout:      %s\nApplication:  %s\nImage:        %s:%s\nDigest:       %s\nPhase:        %s\n",
		r.ID, r.Application, r.Image, r.Tag, r.Digest, r.Phase)
	if r.Reason != "" {
		fmt.Fprintf(w, "Reason:       %s\n", r.Reason)
	}
	if why := waitingFor(r); why != "" {
		fmt.Fprintf(w, "Waiting:      %s\n", why)
	}
	fmt.Fprintf(w, "Created:      %s (%s ago)\n\n", r.Created.Format(time.RFC3339), age(r.Created))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WAVE\tCLUSTER\tSTATE\tCANARY\tWEIGHT\tPREVIOUS\tDEADLINE\tMESSAGE")
	for i, wave := range r.Waves {
		marker := " "
		if i == r.Wave && !r.Phase.Done() {
			marker = "*"
		}
		for _, c := range wave.Clusters {
			deadline := "-"
			if !c.Deadline.IsZero() && (c.Run != "" || c.Phase == rollout.ClusterApplying || c.Phase == rollout.ClusterProgressing || c.Phase == rollout.ClusterReverting) {
				deadline = c.Deadline.Local().Format(time.TimeOnly)
			}
			fmt.Fprintf(tw, "%s%d %s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", marker, i+1, wave.Name, c.Name, c.Phase,
				dash(c.CanaryPhase), c.CanaryWeight, dash(shortRef(c.PreviousImage)), deadline, dash(truncate(c.Message, 60)))
		}
	}
	_ = tw.Flush()
	pullRequests(w, r)
	if len(r.Failures) > 0 {
		fmt.Fprintln(w, "\nFailures (flotilla retry ROLLOUT replays those not retried):")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "AT\tFUNCTION\tEVENT\tCLUSTER\tRETRIED\tERROR")
		for _, f := range r.Failures {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%s\n", f.At.Local().Format(time.TimeOnly), f.Function, f.EventType,
				dash(f.Cluster), f.Retried, truncate(f.Error, 80))
		}
		_ = tw.Flush()
	}
}

// pullRequests lists the waves' pull requests (gitops mode pullRequest).
func pullRequests(w io.Writer, r rollout.Rollout) {
	var lines []string
	for i, wave := range r.Waves {
		for _, pr := range []struct {
			what string
			pr   *rollout.PullRequest
		}{{"", wave.PullRequest}, {"revert ", wave.RevertPullRequest}} {
			if pr.pr == nil {
				continue
			}
			line := fmt.Sprintf("%d %s\t%s%s\t#%d\t%s\t%s", i+1, wave.Name, pr.what, pr.pr.State, pr.pr.Number, dash(pr.pr.URL), dash(pr.pr.AutoMerge))
			if pr.pr.Message != "" {
				line += "\t" + truncate(pr.pr.Message, 60)
			}
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\nPull requests:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WAVE\tSTATE\tNUMBER\tURL\tAUTO-MERGE\tMESSAGE")
	for _, l := range lines {
		fmt.Fprintln(tw, l)
	}
	_ = tw.Flush()
}

func short(d string) string {
	if _, hex, ok := strings.Cut(d, ":"); ok && len(hex) > 12 {
		return d[:len(d)-len(hex)] + hex[:12]
	}
	return d
}

func shortRef(ref string) string {
	if img, d, ok := strings.Cut(ref, "@"); ok {
		return img[strings.LastIndex(img, "/")+1:] + "@" + short(d)
	}
	return ref[strings.LastIndex(ref, "/")+1:]
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String()
}

// waitingFor says what a rollout in flight waits for, "" if nothing: what
// launch recorded (a pause, the stopped line, approvals, a freeze window),
// or its current wave's bake.
func waitingFor(r rollout.Rollout) string {
	if r.Phase.Done() || r.Wave >= len(r.Waves) {
		return ""
	}
	if r.Paused != "" {
		return "paused by " + r.Paused
	}
	if r.Waiting != "" {
		return r.Waiting
	}
	if r.Baking(r.Wave) {
		w := r.Waves[r.Wave]
		return fmt.Sprintf("wave %d (%s) bakes until %s", r.Wave+1, w.Name, w.BakingUntil.Local().Format(time.TimeOnly))
	}
	return ""
}

// watchRollouts redraws the rollouts every interval until the command's
// context ends: the list, then each rollout in flight as waves x clusters.
func watchRollouts(cmd *cobra.Command, c apiClient, interval time.Duration) error {
	out := cmd.OutOrStdout()
	tty := false
	if f, ok := out.(interface{ Stat() (os.FileInfo, error) }); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	t := time.NewTicker(max(interval, 100*time.Millisecond))
	defer t.Stop()
	for {
		var ros []rollout.Rollout
		if err := c.get(cmd.Context(), "/api/v1/rollouts", &ros); err != nil {
			if cmd.Context().Err() != nil {
				return nil
			}
			return err
		}
		if tty {
			fmt.Fprint(out, "\x1b[H\x1b[2J") // home, clear
		} else {
			fmt.Fprintf(out, "--- %s\n", time.Now().Format(time.TimeOnly))
		}
		printRollouts(out, ros)
		for _, r := range ros {
			if !r.Phase.Done() {
				printWaves(out, r)
			}
		}
		select {
		case <-cmd.Context().Done():
			return nil
		case <-t.C:
		}
	}
}

// printWaves prints a rollout in flight as one line per wave: its clusters
// and their state.
func printWaves(w io.Writer, r rollout.Rollout) {
	fmt.Fprintf(w, "\n%s (%s %s): %s\n", r.ID, r.Application, r.Tag, r.Phase)
	for i, wave := range r.Waves {
		marker := " "
		if i == r.Wave {
			marker = "*"
		}
		var cs []string
		for _, c := range wave.Clusters {
			s := c.Name + " " + string(c.Phase)
			if c.CanaryWeight > 0 && c.Phase == rollout.ClusterProgressing {
				s += fmt.Sprintf(" %d%%", c.CanaryWeight)
			}
			cs = append(cs, s)
		}
		fmt.Fprintf(w, " %s wave %d %-12s %s\n", marker, i+1, wave.Name, strings.Join(cs, ", "))
	}
	if why := waitingFor(r); why != "" {
		fmt.Fprintf(w, "   waiting: %s\n", why)
	}
}
