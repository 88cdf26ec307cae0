package cli

import (
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/rolloutview"
)

func newGetCmd() *cobra.Command {
	var server, token string
	cmd := &cobra.Command{
		Use:   "get KIND [NAME]",
		Short: "List resources of a running flotilla: rollouts, applications, clusters, audit",
		Long: `List resources of a running flotilla, as kubectl does: a table, or with
-o json, yaml, wide (more columns) or name (KIND/NAME, one per line); with a
NAME, that one only.` + readTokenHelp,
		Example: `  flotilla get rollouts
  flotilla get rollouts -o yaml
  flotilla get clusters -o wide
  flotilla get application podinfo -o json`,
	}
	ros := newGetRolloutsCmd(&server, &token)
	cmd.PersistentFlags().StringVar(&server, "server", defaultServer(), "URL of the running flotilla (env FLOTILLA_SERVER)")
	tokenFlag(cmd.PersistentFlags(), &token)
	cmd.AddCommand(ros, newGetApplicationsCmd(&server, &token), newGetClustersCmd(&server, &token), newGetAuditCmd(&server, &token))
	return cmd
}

// newGetRolloutsCmd is `flotilla get rollouts [ID]`.
func newGetRolloutsCmd(server, token *string) *cobra.Command {
	var watch bool
	var interval time.Duration
	var out *output
	cmd := &cobra.Command{
		Use:     "rollouts [ID]",
		Aliases: []string{"rollout", "ro"},
		Short:   "List rollouts, newest first (--watch: live, waves x clusters)",
		Long: `List rollouts, newest first: those in flight, then the latest finished;
with an ID, that rollout only.

With --watch the list is redrawn live (on the server's watch stream, and
every --interval) until interrupted, each rollout in flight with its
waves x clusters and what it waits for (bake, approvals, a freeze window,
a pause, a stopped fleet).` + readTokenHelp,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeNames(server, token, kindRollout),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := apiClient{base: *server, token: *token}
			if watch {
				if out.format != "" || len(args) > 0 {
					return usageError{fmt.Errorf("--watch redraws the table of every rollout: it takes no ID and no -o")}
				}
				return watchRollouts(cmd, c, interval)
			}
			var v any
			var ros []rollout.Rollout
			if len(args) == 1 {
				var r rollout.Rollout
				if err := c.get(cmd.Context(), "/api/v1/rollouts/"+url.PathEscape(args[0]), &r); err != nil {
					return err
				}
				v, ros = r, []rollout.Rollout{r}
			} else {
				if err := c.get(cmd.Context(), "/api/v1/rollouts", &ros); err != nil {
					return err
				}
				v = ros
			}
			return out.print(cmd.OutOrStdout(), v, func(w io.Writer, wide bool) { printRollouts(w, ros, wide) },
				func() []string { return rolloutNames(ros) })
		},
	}
	out = addOutput(cmd, "table", formatJSON, formatYAML, formatWide, formatName)
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "redraw the list live, with waves x clusters, until interrupted")
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "with --watch, how often to read the list again besides its live changes")
	return cmd
}

// rolloutNames are the rollouts as -o name prints them.
func rolloutNames(ros []rollout.Rollout) []string {
	out := make([]string, 0, len(ros))
	for _, r := range ros {
		out = append(out, kindRollout+"/"+r.ID)
	}
	return out
}

// Exit codes of `describe rollout --watch` besides 0 (it succeeded), 1
// (an error: flotilla unreachable, the rollout unknown...) and 2 (usage).
const (
	// exitRolloutFailed: the rollout ended other than Succeeded (rolled
	// back, failed, aborted...).
	exitRolloutFailed = 4
	// exitTimeout: --timeout passed before the rollout ended.
	exitTimeout = 5
)

func newDescribeCmd() *cobra.Command {
	var server, token string
	var watch bool
	var interval, timeout time.Duration
	var out *output
	cmd := &cobra.Command{Use: "describe KIND NAME", Short: "Show one resource of a running flotilla in detail: a rollout, an application",
		Long: `Show one resource of a running flotilla in detail.` + readTokenHelp}
	ro := &cobra.Command{
		Use:     "rollout ID",
		Aliases: []string{"rollouts", "ro"},
		Short:   "Show a rollout: waves x clusters with their state (--watch: live, until it ends)",
		Long: `Show a rollout: waves x clusters with their state. With --watch it is
redrawn live (on the server's watch stream, and every --interval) until it
ends, or until --timeout. The exit code of --watch says how it ended:
0 it succeeded, 4 it ended otherwise (rolled back, failed, aborted),
5 --timeout passed first, 1 an error (flotilla unreachable, no such
rollout).` + readTokenHelp,
		Example: `  flotilla describe rollout podinfo-3f2a9c1d7e
  flotilla describe rollout podinfo-3f2a9c1d7e --watch --timeout 30m && echo rolled out`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(&server, &token, kindRollout),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := apiClient{base: server, token: token}
			if timeout != 0 && !watch {
				return usageError{fmt.Errorf("--timeout bounds --watch: give --watch too")}
			}
			if watch {
				if out.format != "" {
					return usageError{fmt.Errorf("--watch redraws the description: it takes no -o")}
				}
				return watchRollout(cmd, c, args[0], interval, timeout)
			}
			var r rollout.Rollout
			if err := c.get(cmd.Context(), "/api/v1/rollouts/"+url.PathEscape(args[0]), &r); err != nil {
				return err
			}
			return out.print(cmd.OutOrStdout(), r, func(w io.Writer, _ bool) { DescribeRollout(w, r) }, nil)
		},
	}
	out = addOutput(ro, "text", formatJSON, formatYAML)
	ro.Flags().BoolVarP(&watch, "watch", "w", false, "redraw the rollout live until it ends; exit 0 if it succeeded, 4 if not, 5 at --timeout")
	ro.Flags().DurationVar(&interval, "interval", 2*time.Second, "with --watch, how often to read the rollout again besides its live changes")
	ro.Flags().DurationVar(&timeout, "timeout", 0, "with --watch, how long to wait for the rollout to end (exit 5 then); 0: no limit")
	cmd.PersistentFlags().StringVar(&server, "server", defaultServer(), "URL of the running flotilla (env FLOTILLA_SERVER)")
	tokenFlag(cmd.PersistentFlags(), &token)
	cmd.AddCommand(ro, newDescribeApplicationCmd(&server, &token))
	return cmd
}

// readTokenHelp ends the help of the commands that read flotilla.
const readTokenHelp = `

Reading flotilla needs an API token of the running flotilla (server.apiToken
or server.apiTokens in its config), unless its server.anonymousRead opens
the reads: --token, or the environment variable FLOTILLA_TOKEN. It is sent
with every read and the --watch stream; without it flotilla answers 401.`

// printRollouts prints rollouts as a table; wide adds the image, the
// whole digest, the source, who pushed it, when it was created and why it
// ended.
func printRollouts(w io.Writer, ros []rollout.Rollout, wide bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "ID\tAPPLICATION\tKIND\tTAG\tDIGEST\tPHASE\tWAVE\tCLUSTERS\tAGE\tWAITING"
	if wide {
		head += "\tIMAGE\tSOURCE\tPUSHED BY\tCREATED\tREASON"
	}
	fmt.Fprintln(tw, head)
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
		digest := short(r.Digest)
		if wide {
			digest = r.Digest
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%d/%d\t%s\t%s", r.ID, r.Application, kindOf(r), r.Tag, dash(digest),
			r.Phase, r.Wave+1, len(r.Waves), done, total, age(r.Created), dash(truncate(waitingFor(r), 60)))
		if wide {
			created := "-"
			if !r.Created.IsZero() {
				created = r.Created.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s\t%s", dash(r.Image), dash(r.Source), dash(r.PushedBy), created, dash(r.Reason))
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
}

// Kinds of rollouts as `get rollouts` shows them besides rollout.Kind's.
const (
	kindPush     = "push"     // a version's, which a webhook or a poll brought
	kindRollback = "rollback" // `flotilla rollback`'s
)

// kindOf is what started r: a version pushed, a rollback, or what the
// domain names (rollout.KindCatchUp, rollout.KindDriftRevert).
func kindOf(r rollout.Rollout) string {
	switch {
	case r.Kind != "":
		return r.Kind
	case r.RollbackOf != "":
		return kindRollback
	default:
		return kindPush
	}
}

// DescribeRollout prints a rollout as waves x clusters.
func DescribeRollout(w io.Writer, r rollout.Rollout) { describeRollout(w, r, false) }

func describeRollout(w io.Writer, r rollout.Rollout, color bool) {
	phase := string(r.Phase)
	if color {
		phase = rolloutview.Paint(phase, rolloutview.PhaseColor(phase))
	}
	fmt.Fprintf(w, "Rollout:      %s\nApplication:  %s\nImage:        %s:%s\nDigest:       %s\nPhase:        %s\n",
		r.ID, r.Application, r.Image, r.Tag, r.Digest, phase)
	if r.Source != "" {
		fmt.Fprintf(w, "Source:       %s\n", r.Source)
	}
	if by := pushedBy(r); by != "" {
		fmt.Fprintf(w, "Pushed by:    %s\n", by)
	}
	if r.Kind != "" {
		fmt.Fprintf(w, "Kind:         %s\n", r.Kind)
	}
	if len(r.Members) > 0 {
		// A release set: its members in the order each cluster applies them.
		fmt.Fprintf(w, "Members:      %s\n", strings.Join(r.Members, " -> "))
	}
	if len(r.Versions) > 0 {
		// A release set of image members: its version is one per member.
		fmt.Fprintf(w, "Versions:     %s\n", memberVersions(r.Versions))
		fmt.Fprintf(w, "Previous:     %s\n", dash(memberVersions(r.PreviousVersions)))
	}
	signatures(w, r)
	if r.Reason != "" {
		fmt.Fprintf(w, "Reason:       %s\n", r.Reason)
	}
	if why := waitingFor(r); why != "" {
		fmt.Fprintf(w, "Waiting:      %s\n", why)
	}
	fmt.Fprintf(w, "Created:      %s (%s ago)\n\n", r.Created.Format(time.RFC3339), age(r.Created))
	columns := []rolloutview.Column{
		{Header: "PREVIOUS", Cell: func(c rollout.Cluster) string { return shortRef(c.PreviousImage) }},
		{Header: "DEADLINE", Cell: deadline},
		{Header: "MESSAGE", Cell: func(c rollout.Cluster) string { return truncate(c.Message, 60) }},
	}
	if hasJobs(r) {
		// A release set's Job members: each Job's state.
		columns = slices.Insert(columns, 0, rolloutview.Column{Header: "JOBS", Cell: jobs})
	}
	if hasWorkloads(r) {
		// A git release of several workloads: each canary's phase.
		columns = slices.Insert(columns, 0, rolloutview.Column{Header: "WORKLOADS", Cell: workloads})
	}
	rolloutview.Table(w, r, rolloutview.Options{Color: color, Columns: columns})
	pullRequests(w, r)
	if len(r.Failures) > 0 {
		fmt.Fprintln(w, "\nFailures (flotilla retry ROLLOUT replays those not retried):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "AT\tFUNCTION\tEVENT\tCLUSTER\tRETRIED\tERROR")
		for _, f := range r.Failures {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%s\n", f.At.Local().Format(time.TimeOnly), f.Function, f.EventType,
				dash(f.Cluster), f.Retried, truncate(f.Error, 80))
		}
		_ = tw.Flush()
	}
}

// signatures prints what verify found of r's version: for a release set
// of image members each entry's signer or why it is unsigned (when a
// member verifies signatures), for an application its signer or why it
// is unsigned; then the wave an unsigned rollout stops before.
func signatures(w io.Writer, r rollout.Rollout) {
	if len(r.Versions) > 0 {
		if verified(r.Versions) {
			for i, m := range r.Versions {
				label := "Signatures:"
				if i > 0 {
					label = ""
				}
				fmt.Fprintf(w, "%-14s%s %s: %s\n", label, m.Application, m.Tag, m.Signature())
			}
		}
	} else {
		if r.SignedBy != "" {
			fmt.Fprintf(w, "Signed by:    %s\n", r.SignedBy)
		}
		if r.Unsigned != "" {
			fmt.Fprintf(w, "Unsigned:     %s\n", r.Unsigned)
		}
	}
	if r.StopsBefore != "" {
		fmt.Fprintf(w, "Stops before: %s (the first wave requiring a signature)\n", r.StopsBefore)
	}
}

// verified tells whether a member's verify judged an entry of v.
func verified(v rollout.SetVersion) bool {
	return slices.ContainsFunc(v, func(m rollout.MemberVersion) bool { return m.SignedBy != "" || m.Unsigned != "" })
}

// pushedBy says who pushed a push's version, as its sender named them, or
// that it is unknown; "" for a rollout no push started.
func pushedBy(r rollout.Rollout) string {
	switch {
	case r.PushedBy != "":
		return r.PushedBy
	case r.Source != "" && r.Kind == "":
		return "unknown (the sender named no one: separation of duties refuses no approver)"
	}
	return ""
}

// deadline is when a cluster's step in flight must be done.
func deadline(c rollout.Cluster) string {
	if !c.Deadline.IsZero() && (c.Run != "" || c.Phase == rollout.ClusterApplying || c.Phase == rollout.ClusterProgressing || c.Phase == rollout.ClusterReverting) {
		return c.Deadline.Local().Format(time.TimeOnly)
	}
	return ""
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
			if msg := pr.pr.Message; msg != "" || pr.pr.MergeError != "" {
				if msg == "" {
					msg = pr.pr.MergeError
				}
				line += "\t" + truncate(msg, 60)
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

// memberVersions prints a release set's version: each member's tag and
// short digest, in the set's order.
func memberVersions(v rollout.SetVersion) string { return v.Describe() }

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

// watchRollouts redraws the rollouts until the command's context ends: the
// list, then each rollout in flight as waves x clusters. It redraws at
// once when the server's watch stream reports a change, and every
// interval (ages, and what changed while the stream was down).
func watchRollouts(cmd *cobra.Command, c apiClient, interval time.Duration) error {
	ctx := cmd.Context()
	scr := newScreen(cmd.OutOrStdout())
	changes := c.changes(ctx, "")
	t := time.NewTicker(max(interval, 100*time.Millisecond))
	defer t.Stop()
	var ros []rollout.Rollout
	refresh := true
	for {
		if refresh {
			if err := c.get(ctx, "/api/v1/rollouts", &ros); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		scr.draw(func(w io.Writer, color bool) {
			printRollouts(w, ros, false)
			for _, r := range ros {
				if !r.Phase.Done() {
					printWaves(w, r, color)
				}
			}
		})
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			refresh = true
		case r, ok := <-changes:
			if !ok {
				return nil
			}
			ros, refresh = upsert(ros, r), false
		}
	}
}

// upsert puts r in place of the rollout of its id, or first.
func upsert(ros []rollout.Rollout, r rollout.Rollout) []rollout.Rollout {
	for i := range ros {
		if ros[i].ID == r.ID {
			ros[i] = r
			return ros
		}
	}
	return append([]rollout.Rollout{r}, ros...)
}

// printWaves prints a rollout in flight as waves x clusters and what it
// waits for.
func printWaves(w io.Writer, r rollout.Rollout, color bool) {
	fmt.Fprintf(w, "\n%s (%s %s): %s\n", r.ID, r.Application, r.Tag, r.Phase)
	rolloutview.Table(w, r, rolloutview.Options{Color: color})
	if why := waitingFor(r); why != "" {
		fmt.Fprintf(w, "waiting: %s\n", why)
	}
}

// watchRollout redraws one rollout (describe --watch) until it ends: at
// once when the watch stream reports a change, and every interval. It
// fails with exitRolloutFailed when the rollout ends other than
// Succeeded, and with exitTimeout when timeout (0: none) passes first.
func watchRollout(cmd *cobra.Command, c apiClient, id string, interval, timeout time.Duration) error {
	ctx := cmd.Context()
	var expired <-chan time.Time
	if timeout > 0 {
		tm := time.NewTimer(timeout)
		defer tm.Stop()
		expired = tm.C
	}
	scr := newScreen(cmd.OutOrStdout())
	changes := c.changes(ctx, id)
	t := time.NewTicker(max(interval, 100*time.Millisecond))
	defer t.Stop()
	var r rollout.Rollout
	refresh := true
	for {
		if refresh {
			if err := c.get(ctx, "/api/v1/rollouts/"+url.PathEscape(id), &r); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		scr.draw(func(w io.Writer, color bool) { describeRollout(w, r, color) })
		if r.Phase.Done() {
			if r.Phase != rollout.Succeeded {
				return exitError{exitRolloutFailed, fmt.Errorf("rollout %s ended %s: %s", r.ID, r.Phase, r.Reason)}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-expired:
			return exitError{exitTimeout, fmt.Errorf("rollout %s has not ended after --timeout %s: %s, wave %d of %d", r.ID, timeout, r.Phase, r.Wave+1, len(r.Waves))}
		case <-t.C:
			refresh = true
		case got, ok := <-changes:
			if !ok {
				return nil
			}
			r, refresh = got, false
		}
	}
}

// hasWorkloads reports whether a cluster of r records the canaries of a
// release of several workloads.
func hasWorkloads(r rollout.Rollout) bool {
	for _, wv := range r.Waves {
		for _, c := range wv.Clusters {
			if len(c.Workloads) > 0 {
				return true
			}
		}
	}
	return false
}

// hasJobs reports whether a cluster of r records a release set's Jobs.
func hasJobs(r rollout.Rollout) bool {
	for _, wv := range r.Waves {
		for _, c := range wv.Clusters {
			if len(c.Jobs) > 0 {
				return true
			}
		}
	}
	return false
}

// jobs is a cluster's Jobs and their states, "name=state,..." by name (a
// failed Job with its reason).
func jobs(c rollout.Cluster) string {
	parts := make([]string, 0, len(c.Jobs))
	for _, n := range c.JobNames() {
		parts = append(parts, n+"="+c.Jobs[n])
	}
	return strings.Join(parts, ",")
}

// workloads is a cluster's canaries and their Flagger phases,
// "name=Phase,..." by name.
func workloads(c rollout.Cluster) string {
	parts := make([]string, 0, len(c.Workloads))
	for _, n := range slices.Sorted(maps.Keys(c.Workloads)) {
		parts = append(parts, n+"="+c.Workloads[n])
	}
	return strings.Join(parts, ",")
}
