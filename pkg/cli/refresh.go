package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// refreshResponse is pkg/api.RefreshResponse.
type refreshResponse struct {
	Application string `json:"application"`
	Image       string `json:"image"`
	Tags        int    `json:"tags"`
	Newest      string `json:"newest"`
	Digest      string `json:"digest"`
	Started     bool   `json:"started"`
	EventID     string `json:"eventId"`
	Reason      string `json:"reason"`
	By          string `json:"by"`
	// Members: a release set of image members' (each one's poll).
	Members []refreshResponse `json:"members"`
}

func newRefreshCmd() *cobra.Command {
	var server, token, reason string
	cmd := &cobra.Command{
		Use:   "refresh APPLICATION",
		Short: "Poll an application's registry now, for a version no webhook brought",
		Long: `Refresh lists the tags of an application's image repository now, as the
periodic poll behind the webhooks does (fleet.poll), and picks with its
version policy the newest version it would roll out that no rollout was
started for. That version is fed in as a push, marked source: poll: it is
verified and planned as a webhook's push (flotilla get rollouts shows its
rollout). A version a webhook brought already changes nothing. Refresh
prints how many tags the registry listed, the version found and whether it
was fed in, or why nothing was. A release set of image members is refreshed
as one: each member's repository, with the member's own version policy
against its version in the set, a member's newest fed in as its push (the
set's rollout); Refresh prints what it found of each member.` + tokenHelp,
		Example:           `  flotilla refresh podinfo`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(&server, &token, kindApplication),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := jsonBody(controlRequest{Reason: reason, By: whoami()})
			if err != nil {
				return err
			}
			var res refreshResponse
			if err := (apiClient{base: server, token: token}).do(cmd.Context(), "POST", "/api/v1/applications/"+args[0]+"/refresh", body, &res); err != nil {
				return err
			}
			printRefresh(cmd.OutOrStdout(), res)
			return nil
		},
	}
	cmd.Flags().StringVar(&server, "server", defaultServer(), "URL of the running flotilla (env FLOTILLA_SERVER)")
	tokenFlag(cmd.Flags(), &token)
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded in the audit")
	return cmd
}

// printRefresh says what a refresh found; of a release set of image
// members, what it found of each member.
func printRefresh(w io.Writer, r refreshResponse) {
	if len(r.Members) > 0 {
		fmt.Fprintf(w, "release set %s: %d tags in %d members' repositories\n", r.Application, r.Tags, len(r.Members))
		for _, m := range r.Members {
			printFound(w, "member "+m.Application, m)
		}
		return
	}
	printFound(w, "application "+r.Application, r)
}

// printFound says what the poll of one repository, who's, found.
func printFound(w io.Writer, who string, r refreshResponse) {
	fmt.Fprintf(w, "%s: %d tags in %s\n", who, r.Tags, r.Image)
	switch {
	case r.Started:
		fmt.Fprintf(w, "newest: %s (%s), fed in as a push (event %s): its rollout will say source: poll\n", r.Newest, r.Digest, r.EventID)
	case r.Newest != "":
		fmt.Fprintf(w, "newest: %s (%s), not started: %s\n", r.Newest, r.Digest, r.Reason)
	default:
		fmt.Fprintf(w, "nothing to start: %s\n", r.Reason)
	}
}
