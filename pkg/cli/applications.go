package cli

import (
	"fmt"
	"io"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// newGetApplicationsCmd is `flotilla get applications [NAME]`; server
// and token are the get command's --server and --token.
func newGetApplicationsCmd(server, token *string) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:     "applications [NAME]",
		Aliases: []string{"application", "app", "apps"},
		Short:   "List the applications: deployed, last seen (webhook or poll), last skipped and why, webhook silent",
		Long: `List the configured applications and what flotilla knows of each: the
version the fleet runs (and a newer one rolling out), the last push seen
and what brought it (webhook or poll), the last push that started no
rollout and why (skipped: the version policy, a tag filter, a quarantine;
rejected: unsigned, a tag the registry does not resolve...), and whether
the application's webhook is silent (a poll found a version no webhook
announced; it clears when a webhook of the application arrives again).
With a NAME, that application only.` + readTokenHelp,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeNames(server, token, kindApplication),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := apiClient{base: *server, token: *token}
			var v any
			var apps []api.ApplicationView
			if len(args) == 1 {
				var a api.ApplicationView
				if err := c.get(cmd.Context(), "/api/v1/applications/"+url.PathEscape(args[0]), &a); err != nil {
					return err
				}
				v, apps = a, []api.ApplicationView{a}
			} else {
				if err := c.get(cmd.Context(), "/api/v1/applications", &apps); err != nil {
					return err
				}
				v = apps
			}
			now := time.Now()
			return out.print(cmd.OutOrStdout(), v, func(w io.Writer, wide bool) { printApplications(w, apps, now, wide) },
				func() []string { return applicationNames(apps) })
		},
	}
	out = addOutput(cmd, "table", formatJSON, formatYAML, formatWide, formatName)
	return cmd
}

// applicationNames are the applications as -o name prints them.
func applicationNames(apps []api.ApplicationView) []string {
	out := make([]string, 0, len(apps))
	for _, a := range apps {
		out = append(out, kindApplication+"/"+a.Name)
	}
	return out
}

// newDescribeApplicationCmd is `flotilla describe application APP`.
func newDescribeApplicationCmd(server, token *string) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:     "application APP",
		Aliases: []string{"applications", "app"},
		Short:   "Show what flotilla knows of an application: deployed, seen, skipped and why, its webhook",
		Long: `Show what flotilla knows of an application: the version the fleet runs,
the last push seen, the last skipped and why, whether its webhook is silent.` + readTokenHelp,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(server, token, kindApplication),
		RunE: func(cmd *cobra.Command, args []string) error {
			var a api.ApplicationView
			if err := (apiClient{base: *server, token: *token}).get(cmd.Context(), "/api/v1/applications/"+url.PathEscape(args[0]), &a); err != nil {
				return err
			}
			return out.print(cmd.OutOrStdout(), a, func(w io.Writer, _ bool) { DescribeApplication(w, a, time.Now()) }, nil)
		},
	}
	out = addOutput(cmd, "text", formatJSON, formatYAML)
	return cmd
}

// PrintApplications prints the applications as a table, ages from now.
func PrintApplications(w io.Writer, apps []api.ApplicationView, now time.Time) {
	printApplications(w, apps, now, false)
}

// printApplications prints the applications as a table; wide adds each
// one's kind, repository, digest deployed and the rollout in flight.
func printApplications(w io.Writer, apps []api.ApplicationView, now time.Time, wide bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// WHY last and whole: the reason is what the table is read for, and
	// often long (a signature's verdict names the image).
	head := "APPLICATION\tDEPLOYED\tROLLING OUT\tLAST SEEN\tSOURCE\tSEEN\tWEBHOOK\tLAST SKIPPED"
	if wide {
		head += "\tKIND\tREPOSITORY\tDIGEST\tROLLOUT"
	}
	fmt.Fprintln(tw, head+"\tWHY")
	for _, a := range apps {
		deployed, rolling := "-", "-"
		if a.Deployed != nil {
			deployed = a.Deployed.Tag
		}
		if l := a.Latest; l != nil && inFlight(l.Phase) {
			rolling = l.Tag
		}
		seen, source, seenAge := "-", "-", "-"
		if s := a.LastSeen; s != nil {
			seen, source, seenAge = s.Tag, s.Source, ago(s.At, now)
		}
		skipped, why := "-", "-"
		if k := a.LastSkipped; k != nil {
			skipped, why = k.Tag+" ("+k.Outcome+")", k.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t", a.Name, deployed, rolling, seen, source, seenAge, webhook(a), skipped)
		if wide {
			digest, ro := "-", "-"
			if d := a.Deployed; d != nil {
				digest = dash(d.Digest)
			}
			if l := a.Latest; l != nil && inFlight(l.Phase) {
				ro = dash(l.Rollout)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t", dash(a.Kind), dash(a.Repository), digest, ro)
		}
		fmt.Fprintln(tw, why)
	}
	_ = tw.Flush()
}

// inFlight tells whether a rollout in phase has not ended.
func inFlight(phase string) bool {
	switch rollout.Phase(phase) {
	case rollout.Progressing, rollout.Queued, rollout.Failed, rollout.RollbackFailed:
		return true
	}
	return false
}

// webhook says whether an application's webhook is silent.
func webhook(a api.ApplicationView) string {
	if a.Silence != nil {
		return "silent: missed " + a.Silence.Tag
	}
	if a.WebhookSilent {
		return "silent"
	}
	return "ok"
}

// DescribeApplication prints one application in detail, times from now.
func DescribeApplication(w io.Writer, a api.ApplicationView, now time.Time) {
	fmt.Fprintf(w, "Application:  %s\nKind:         %s\nRepository:   %s\n", a.Name, a.Kind, a.Repository)
	if a.Branch != "" {
		fmt.Fprintf(w, "Branch:       %s\n", a.Branch)
	}
	fmt.Fprintf(w, "Polled:       %s\n", dash(a.PollInterval))
	if d := a.Deployed; d != nil {
		fmt.Fprintf(w, "Deployed:     %s %s (rollout %s, %s)\n", d.Tag, short(d.Digest), dash(d.Rollout), when(d.At, now))
	} else {
		fmt.Fprintln(w, "Deployed:     -")
	}
	if l := a.Latest; l != nil {
		fmt.Fprintf(w, "Latest:       %s (rollout %s, %s)\n", l.Tag, dash(l.Rollout), dash(l.Phase))
	}
	if a.Queued != "" {
		fmt.Fprintf(w, "Queued:       %s\n", a.Queued)
	}
	fmt.Fprintf(w, "Last seen:    %s\n", seenLine(a.LastSeen, now))
	fmt.Fprintf(w, "Last webhook: %s\n", seenLine(a.LastWebhook, now))
	if s := a.LastSeen; s != nil && s.Error != "" {
		fmt.Fprintf(w, "Not verified: %s\n", s.Error)
	}
	if k := a.LastSkipped; k != nil {
		fmt.Fprintf(w, "Last skipped: %s %s (%s, %s, %s): %s\n", k.Tag, short(k.Digest), k.Outcome, k.Source, when(k.At, now), k.Reason)
	} else {
		fmt.Fprintln(w, "Last skipped: -")
	}
	if s := a.Silence; s != nil {
		last := "no webhook of it was ever seen"
		if lw := s.LastWebhook; lw != nil {
			last = fmt.Sprintf("the last webhook brought %s %s", lw.Tag, when(lw.At, now))
		}
		fmt.Fprintf(w, "Webhook:      SILENT: a poll found %s %s (%s) that no webhook announced; %s\n", s.Tag, short(s.Digest), when(s.Found, now), last)
	} else {
		fmt.Fprintln(w, "Webhook:      ok")
	}
	if len(a.Quarantined) > 0 {
		fmt.Fprintln(w, "\nQuarantined:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TAG\tDIGEST\tBY\tAT\tREASON")
		for _, q := range a.Quarantined {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", dash(q.Tag), dash(short(q.Digest)), q.By, q.At.Format(time.RFC3339), q.Reason)
		}
		_ = tw.Flush()
	}
}

func seenLine(s *rollout.Seen, now time.Time) string {
	if s == nil {
		return "-"
	}
	return fmt.Sprintf("%s %s (%s, %s)", s.Tag, short(s.Digest), s.Source, when(s.At, now))
}

// ago is how long before now t was ("-" for no time).
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return now.Sub(t).Round(time.Second).String()
}

// when is t and how long before now it was.
func when(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339) + ", " + ago(t, now) + " ago"
}
