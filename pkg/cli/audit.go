package cli

import (
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-cd/flotilla/pkg/api"
)

// newGetAuditCmd is `flotilla get audit`.
func newGetAuditCmd(server, token *string) *cobra.Command {
	var application, rolloutID, since string
	var limit int
	var out *output
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "List the controls sent to flotilla, newest first: who, what, why, from where, allowed or refused",
		Long: `List the audit records, newest first: every control sent through the API
or the web UI (approve, retry, pause, resume, abort, override, rollback,
quarantine, refresh, fleet stop and start), with who sent it (the token's
or person's name, how they proved it), when, from where (the client's
address: the first X-Forwarded-For hop when flotilla's server.trustedProxies
lists the proxy it came through), the action (the permission it needs), the
application, rollout and wave, the reason given, and whether it was
allowed or refused, and why. The records live in the journal (in either
mode every replica reads the same); --since and --limit bound the list.` + readTokenHelp,
		Example: `  flotilla get audit
  flotilla get audit --application podinfo --since 1h
  flotilla get audit --since 2026-11-29T06:00:00Z -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			for k, v := range map[string]string{"application": application, "rollout": rolloutID, "since": since} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if limit != 0 {
				q.Set("limit", strconv.Itoa(limit))
			}
			path := "/api/v1/audit"
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			var page api.AuditPage
			if err := (apiClient{base: *server, token: *token}).get(cmd.Context(), path, &page); err != nil {
				return err
			}
			return out.print(cmd.OutOrStdout(), page, func(w io.Writer, _ bool) { PrintAudit(w, page) }, nil)
		},
	}
	out = addOutput(cmd, "table", formatJSON, formatYAML)
	cmd.Flags().StringVar(&application, "application", "", "only the records of this application")
	cmd.Flags().StringVar(&rolloutID, "rollout", "", "only the records of this rollout")
	cmd.Flags().StringVar(&since, "since", "", "only the records since a duration ago (such as 1h) or an RFC 3339 time")
	cmd.Flags().IntVar(&limit, "limit", 0, fmt.Sprintf("at most this many records (the server's default: %d; at most %d)", api.DefaultAuditLimit, api.MaxAuditLimit))
	return cmd
}

// PrintAudit prints audit records as a table.
func PrintAudit(w io.Writer, page api.AuditPage) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// REASON and WHY last: free text, often long.
	fmt.Fprintln(tw, "TIME\tNAME\tVIA\tACTION\tAPPLICATION\tROLLOUT\tWAVE\tDECISION\tFROM\tREASON\tWHY")
	for _, r := range page.Records {
		action := r.Action
		if d := strings.TrimSpace(r.Detail + " " + r.Cluster); d != "" {
			action += " (" + d + ")"
		}
		wave := r.WaveName
		if r.WaveNumber > 0 {
			wave = strconv.Itoa(r.WaveNumber)
			if r.WaveName != "" {
				wave += " " + r.WaveName
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Time.UTC().Format(time.RFC3339), dash(r.Principal.Name),
			dash(r.Principal.Via), action, dash(r.Application), dash(r.RolloutID), dash(wave), r.Decision, dash(r.RemoteAddr),
			dash(r.Reason), dash(r.Why))
	}
	_ = tw.Flush()
	if page.Truncated {
		fmt.Fprintln(w, "(more records may match: narrow with --since or --application; the journal's retention may have removed older ones)")
	}
	if len(page.Records) == 0 {
		fmt.Fprintln(w, "no audit records")
	}
}
