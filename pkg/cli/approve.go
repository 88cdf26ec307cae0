package cli

import (
	"fmt"
	"net/url"
	"os"
	"os/user"

	"github.com/spf13/cobra"
)

// approvalRequest is the body of POST /api/v1/rollouts/{id}/approval
// (pkg/api.ApprovalRequest).
type approvalRequest struct {
	Status  string `json:"status"`
	Cluster string `json:"cluster,omitempty"`
	By      string `json:"by,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

func newApproveCmd() *cobra.Command {
	var server, token, cluster, reason, wave string
	var reject bool
	cmd := &cobra.Command{
		Use:   "approve ROLLOUT",
		Short: "Approve (or --reject) a rollout held by a manual validation, or approve a wave",
		Long: `Approve records a manual verdict on a rollout whose application has a manual
validation: flotilla then opens the canaries' confirm-promotion gate, and Flagger
promotes them. --reject makes the rollback gate roll them back instead. Without
--cluster the verdict applies to every cluster of the rollout. Promoting a
cluster of a wave that asks for approvals is approving that wave: it is
refused (403, why) unless your approval of the wave would count (not an
automation token, among its approvals.from, not the version's pusher under
separationOfDuties); --reject is not held to that.

With --wave W (a number from 1, or the wave's name) it approves that wave
instead, for a wave policy that asks for approvals: its clusters start once
as many distinct approvers (API token names) as it needs have approved it.

The call needs an API token of the running flotilla (server.apiToken or
server.apiTokens in its config): --token, or the environment variable
FLOTILLA_TOKEN. It is recorded under the token's name.`,
		Example: `  flotilla approve r-20260102-api-7f3c
  flotilla approve r-20260102-api-7f3c --cluster eu-1 --reject --reason "p99 latency regressed"`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(&server, &token, kindRollout),
		RunE: func(cmd *cobra.Command, args []string) error {
			if wave != "" {
				if cluster != "" || reject {
					return fmt.Errorf("--wave approves a wave: it takes neither --cluster nor --reject")
				}
				body, err := jsonBody(controlRequest{Reason: reason, By: whoami()})
				if err != nil {
					return err
				}
				var res controlResponse
				if err := (apiClient{base: server, token: token}).do(cmd.Context(), "POST", "/api/v1/rollouts/"+args[0]+"/waves/"+url.PathEscape(wave)+"/approval", body, &res); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "rollout %s: wave %s approved by %s\n", args[0], wave, res.By)
				return nil
			}
			req := approvalRequest{Status: "valid", Cluster: cluster, By: whoami(), Reason: reason}
			if reject {
				req.Status = "invalid"
			}
			c := apiClient{base: server, token: token}
			if err := c.post(cmd.Context(), "/api/v1/rollouts/"+args[0]+"/approval", req); err != nil {
				return err
			}
			verb, where := "approved", "every cluster"
			if reject {
				verb = "rejected"
			}
			if cluster != "" {
				where = "cluster " + cluster
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rollout %s %s for %s\n", args[0], verb, where)
			return nil
		},
	}
	cmd.Flags().StringVar(&server, "server", defaultServer(), "URL of the running flotilla (env FLOTILLA_SERVER)")
	tokenFlag(cmd.Flags(), &token)
	cmd.Flags().StringVar(&cluster, "cluster", "", "limit the verdict to one cluster")
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the record")
	cmd.Flags().BoolVar(&reject, "reject", false, "reject: roll the canaries back")
	cmd.Flags().StringVar(&wave, "wave", "", "approve this wave (number from 1, or name) of the rollout instead")
	return cmd
}

// whoami names the approver for the record.
func whoami() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}
