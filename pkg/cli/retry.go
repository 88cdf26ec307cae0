package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// retryRequest is the body of POST /api/v1/rollouts/{id}/retry
// (pkg/api.RetryRequest).
type retryRequest struct {
	Cluster string `json:"cluster,omitempty"`
	By      string `json:"by,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// retryResponse is pkg/api.RetryResponse.
type retryResponse struct {
	EventID  string `json:"eventId"`
	Attempt  int    `json:"attempt"`
	Retrying string `json:"retrying"`
}

func newRetryCmd() *cobra.Command {
	var server, token, cluster, reason string
	cmd := &cobra.Command{
		Use:   "retry ROLLOUT",
		Short: "Try again what failed in a rollout: failed clusters, the reverts of a failed rollback, a pull request's merge, steps flotilla gave up on",
		Long: `Retry asks flotilla to do again what failed in a rollout:

  - a rollout in progress gets its failed clusters (those its waves' failure
    budgets let pass: maxFailures) applied again: the same image, with a
    restart token on the pod template (annotation flotilla.dev/restart), so
    Flagger analyses it anew. A cluster of the current wave starts as the
    wave's maxParallel allows (and the wave's bake starts again after it);
    one of a wave that has passed starts at once, and the rollout does not
    end before it does. Its result counts for the cluster: a wave that
    passed stays passed. A paused rollout, a stopped fleet or a freeze
    window holds it like any start;
  - a rollout in RollbackFailed gets the clusters whose revert failed (their
    pipeline failed, or they were not back on their previous image by their
    deadline) reverted again, each with a new deadline; when every one is
    back, the rollout is RolledBack;
  - a wave whose pull request the git host failed to merge (autoMerge: it
    answered errors for 5 minutes, or refused for good; describe shows its
    last answer) gets the host asked again;
  - the events a function gave up on (see 'flotilla describe ROLLOUT',
    "failures") are handled again.

With --cluster only that cluster's are. The retry is journaled as an event
(dev.flotilla.rollout.retry.requested.v1) naming who asked. Nothing to retry
is an error (409).

The call needs an API token of the running flotilla (server.apiToken or
server.apiTokens in its config): --token, or the environment variable
FLOTILLA_TOKEN. It is recorded under the token's name, with --reason, in
the audit ('flotilla get audit').`,
		Example: `  flotilla retry r-20260102-api-7f3c
  flotilla retry r-20260102-api-7f3c --cluster eu-1`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(&server, &token, kindRollout),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := apiClient{base: server, token: token}
			var res retryResponse
			body, err := jsonBody(retryRequest{Cluster: cluster, By: whoami(), Reason: reason})
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), "POST", "/api/v1/rollouts/"+args[0]+"/retry", body, &res); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rollout %s: retry %d requested: %s\n", args[0], res.Attempt, res.Retrying)
			return nil
		},
	}
	cmd.Flags().StringVar(&server, "server", defaultServer(), "URL of the running flotilla (env FLOTILLA_SERVER)")
	tokenFlag(cmd.Flags(), &token)
	cmd.Flags().StringVar(&cluster, "cluster", "", "retry only this cluster's failures")
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded in the audit")
	return cmd
}
