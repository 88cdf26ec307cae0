package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// controlRequest is pkg/api.ControlRequest.
type controlRequest struct {
	Reason string `json:"reason,omitempty"`
	By     string `json:"by,omitempty"`
}

// controlResponse is pkg/api.ControlResponse.
type controlResponse struct {
	EventID string `json:"eventId"`
	By      string `json:"by"`
}

// fleetState is pkg/rollout.FleetState.
type fleetState struct {
	Stopped bool   `json:"stopped"`
	By      string `json:"by"`
	Reason  string `json:"reason"`
	At      string `json:"at"`
}

const tokenHelp = `

The call needs an API token of the running flotilla (server.apiToken or
server.apiTokens in its config): --token, or the environment variable
FLOTILLA_TOKEN. It is journaled as an event naming the token's name (and
your user name) and the reason, and recorded in the audit ('flotilla get
audit': who, from where, why).`

// controlCmd is a command that POSTs a control to path(args) and prints
// done(args, by).
func controlCmd(use, short, long, example string, args cobra.PositionalArgs, path func([]string) string, done func([]string, string) string) *cobra.Command {
	var server, token, reason string
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long + tokenHelp, Example: example, Args: args,
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := jsonBody(controlRequest{Reason: reason, By: whoami()})
			if err != nil {
				return err
			}
			var res controlResponse
			if err := (apiClient{base: server, token: token}).do(cmd.Context(), "POST", path(args), body, &res); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), done(args, res.By))
			return nil
		},
	}
	if strings.Contains(use, "ROLLOUT") {
		cmd.ValidArgsFunction = completeNames(&server, &token, kindRollout)
	}
	cmd.Flags().StringVar(&server, "server", defaultServer(), "URL of the running flotilla (env FLOTILLA_SERVER)")
	tokenFlag(cmd.Flags(), &token)
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded with the control")
	return cmd
}

func rolloutPath(action string) func([]string) string {
	return func(args []string) string { return "/api/v1/rollouts/" + args[0] + "/" + action }
}

func newPauseCmd() *cobra.Command {
	return controlCmd("pause ROLLOUT", "Pause a rollout: no cluster starts until it is resumed",
		`Pause holds a rollout: no cluster of it starts (nor does its next wave)
until 'flotilla resume'. Clusters already rolling out finish, and a failure
still fails the rollout and rolls it back. A rollout that is not in
progress (or queued) answers 409.`,
		`  flotilla pause podinfo-3f2a9c1d7e --reason "incident 42"`,
		cobra.ExactArgs(1), rolloutPath("pause"),
		func(args []string, by string) string {
			return fmt.Sprintf("rollout %s: pause requested by %s", args[0], by)
		})
}

func newResumeCmd() *cobra.Command {
	return controlCmd("resume ROLLOUT", "Resume a paused rollout",
		`Resume lets a paused rollout go on: the clusters it held start, or its
next wave if the current one ended meanwhile. A rollout that is not
paused answers 409.`,
		`  flotilla resume podinfo-3f2a9c1d7e`,
		cobra.ExactArgs(1), rolloutPath("resume"),
		func(args []string, by string) string {
			return fmt.Sprintf("rollout %s: resume requested by %s", args[0], by)
		})
}

func newAbortCmd() *cobra.Command {
	return controlCmd("abort ROLLOUT", "Abort a rollout and roll back what it touched",
		`Abort stops a rollout and fails it: every cluster that took its version
is reverted to the image its primary ran before, newest wave first,
without analysis (the rollout ends RolledBack). A queued rollout just
ends. A rollout that has finished answers 409.`,
		`  flotilla abort podinfo-3f2a9c1d7e --reason "bad config"`,
		cobra.ExactArgs(1), rolloutPath("abort"),
		func(args []string, by string) string {
			return fmt.Sprintf("rollout %s: abort requested by %s", args[0], by)
		})
}

func newOverrideCmd() *cobra.Command {
	return controlCmd("override ROLLOUT --reason REASON", "Let a rollout's wave start inside a freeze window",
		`Override lets the current wave of a rollout held by a freeze window start
now. A reason is required; it is recorded with who overrode the window.
A rollout not held by a freeze window answers 409.`,
		`  flotilla override podinfo-3f2a9c1d7e --reason "security fix, CAB-1234"`,
		cobra.ExactArgs(1), rolloutPath("override"),
		func(args []string, by string) string {
			return fmt.Sprintf("rollout %s: override requested by %s", args[0], by)
		})
}

func newQuarantineCmd() *cobra.Command {
	var server, token, reason, digest string
	cmd := &cobra.Command{
		Use:   "quarantine APPLICATION [TAG]",
		Short: "Mark a version of an application bad: never rolled out again, rollouts of it aborted",
		Long: `Quarantine marks a version of an application bad: a tag (every digest of
it), or with --digest one digest. flotilla refuses it from now on (a push of
it is skipped, saying so), and aborts the rollouts in flight that carry it
(their clusters are rolled back). A reason is required.` + tokenHelp,
		Example: `  flotilla quarantine podinfo 1.2.0 --reason "CVE-2026-1234"
  flotilla quarantine podinfo --digest sha256:0123... --reason "bad build"`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeNames(&server, &token, kindApplication),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := map[string]string{"reason": reason, "by": whoami()}
			if len(args) == 2 {
				req["tag"] = args[1]
			}
			if digest != "" {
				req["digest"] = digest
			}
			body, err := jsonBody(req)
			if err != nil {
				return err
			}
			var res controlResponse
			if err := (apiClient{base: server, token: token}).do(cmd.Context(), "POST", "/api/v1/applications/"+args[0]+"/quarantine", body, &res); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "application %s: quarantine requested by %s\n", args[0], res.By)
			return nil
		},
	}
	cmd.Flags().StringVar(&server, "server", defaultServer(), "URL of the running flotilla (env FLOTILLA_SERVER)")
	tokenFlag(cmd.Flags(), &token)
	cmd.Flags().StringVar(&reason, "reason", "", "why (required)")
	cmd.Flags().StringVar(&digest, "digest", "", "quarantine this digest rather than a tag")
	return cmd
}

func newRollbackCmd() *cobra.Command {
	return controlCmd("rollback ROLLOUT", "Roll the whole fleet back from a succeeded rollout to the version before it",
		`Rollback takes every cluster a succeeded rollout changed back to the image
its primary ran before, newest wave first, without analysis: a rollout of
its own, rollback-ROLLOUT, which ends RolledBack (or RollbackFailed, see
'flotilla retry'). The version before is then the deployed one again. A
rollout that did not succeed answers 409 (abort one in progress).`,
		`  flotilla rollback podinfo-3f2a9c1d7e --reason "error rate up since 14:02"`,
		cobra.ExactArgs(1), rolloutPath("rollback"),
		func(args []string, by string) string {
			return fmt.Sprintf("rollout %s: rollback requested by %s", args[0], by)
		})
}

func newFleetCmd() *cobra.Command {
	var server, token string
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Show whether the fleet's line is stopped; stop or start it; bootstrap or check its clusters",
		Long: `Without a subcommand, fleet shows whether the line is stopped. 'fleet stop'
stops the line: no cluster of any application starts a rollout until 'fleet
start' (rollbacks still run; canaries already rolling out finish).
'fleet bootstrap' installs Flagger, flotilla's identity and pipelines into the
clusters of a config; 'fleet check' reports what is missing or outdated.` + readTokenHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st fleetState
			if err := (apiClient{base: server, token: token}).get(cmd.Context(), "/api/v1/fleet", &st); err != nil {
				return err
			}
			if !st.Stopped {
				fmt.Fprintln(cmd.OutOrStdout(), "the fleet is running")
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "the fleet is stopped since %s by %s: %s\n", st.At, st.By, st.Reason)
			return nil
		},
	}
	cmd.Flags().StringVar(&server, "server", defaultServer(), "URL of the running flotilla (env FLOTILLA_SERVER)")
	tokenFlag(cmd.Flags(), &token)
	cmd.AddCommand(
		controlCmd("stop", "Stop the line: no cluster starts a rollout until the fleet is started",
			`Stop holds every rollout of every application: no cluster starts one until
'flotilla fleet start'. Canaries already rolling out finish; rollbacks run.`,
			`  flotilla fleet stop --reason "black friday"`, cobra.NoArgs,
			func([]string) string { return "/api/v1/fleet/stop" },
			func(_ []string, by string) string { return "fleet: stop requested by " + by }),
		controlCmd("start", "Start the line again: the clusters the rollouts held start",
			`Start lets every rollout in flight go on: the clusters held while the line
was stopped start.`,
			`  flotilla fleet start`, cobra.NoArgs,
			func([]string) string { return "/api/v1/fleet/start" },
			func(_ []string, by string) string { return "fleet: start requested by " + by }),
		newFleetBootstrapCmd(), newFleetCheckCmd(),
	)
	return cmd
}
