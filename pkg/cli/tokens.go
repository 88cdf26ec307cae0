package cli

import (
	"fmt"
	"io"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-cd/flotilla/pkg/api"
)

// newTokenCmd is `flotilla token`: the API tokens created at run time
// (#31 item 4), which need the fleet-wide admin role.
func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke API tokens (admin)",
		Long: `Token manages the API tokens created at run time: each grants a role in a
project, is kept by flotilla as the SHA-256 of its secret (the secret is
printed once, when it is made), and can be revoked: every replica refuses it
at once. 'token revoke' also revokes a token of the config
(server.apiTokens) until the config gives it another secret. These commands
need a token whose roles hold the fleet-wide admin role.` + tokenHelp,
	}
	cmd.AddCommand(newTokenCreateCmd(), newTokenListCmd(), newTokenRevokeCmd())
	return cmd
}

func newTokenCreateCmd() *cobra.Command {
	var server, token, project, role, expires, reason string
	var automation bool
	cmd := &cobra.Command{
		Use:   "create NAME --project P --role R [--expires 30d] [--automation]",
		Short: "Create an API token granting a role in a project; its secret is printed once",
		Example: `  flotilla token create ci-deployer --project payments --role operator --expires 30d
  flotilla token create release-bot --project '*' --role approver`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := jsonBody(api.TokenRequest{Name: args[0], Project: project, Role: role, Expires: expires, Automation: automation, Reason: reason})
			if err != nil {
				return err
			}
			var res api.TokenCreated
			if err := (apiClient{base: server, token: token}).do(cmd.Context(), "POST", "/api/v1/tokens", body, &res); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			grants := grantsText(res.Token.Grants)
			if res.Token.Automation {
				grants += " (automation: its approvals never count)"
			}
			fmt.Fprintf(w, "token %s created by %s: %s, expires %s\n", res.Token.Name, res.Token.CreatedBy, grants, expiresText(res.Token.ExpiresAt))
			fmt.Fprintf(w, "secret (shown only now): %s\n", res.Secret)
			return nil
		},
	}
	cmd.Flags().StringVar(&server, "server", defaultServer(), "URL of the running flotilla (env FLOTILLA_SERVER)")
	tokenFlag(cmd.Flags(), &token)
	cmd.Flags().StringVar(&project, "project", "", "the project the role is granted in (* for every project)")
	cmd.Flags().StringVar(&role, "role", "", "the role: viewer, operator, approver, admin or one of the project's")
	cmd.Flags().StringVar(&expires, "expires", "", "how long the token lasts: days (30d) or a duration (12h); none: never")
	cmd.Flags().BoolVar(&automation, "automation", false, "a token a machine uses (CI, a bot): its approvals never count")
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded in the audit")
	_ = cmd.MarkFlagRequired("project")
	_ = cmd.MarkFlagRequired("role")
	return cmd
}

func newTokenListCmd() *cobra.Command {
	var server, token string
	var out *output
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the created API tokens and the revoked ones of the config (never a secret)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res struct {
				Tokens []api.TokenInfo `json:"tokens"`
			}
			if err := (apiClient{base: server, token: token}).get(cmd.Context(), "/api/v1/tokens", &res); err != nil {
				return err
			}
			return out.print(cmd.OutOrStdout(), res.Tokens, func(w io.Writer, _ bool) { printTokens(w, res.Tokens) }, func() []string {
				names := make([]string, 0, len(res.Tokens))
				for _, t := range res.Tokens {
					names = append(names, "token/"+t.Name)
				}
				return names
			})
		},
	}
	cmd.Flags().StringVar(&server, "server", defaultServer(), "URL of the running flotilla (env FLOTILLA_SERVER)")
	tokenFlag(cmd.Flags(), &token)
	out = addOutput(cmd, "table", formatJSON, formatYAML, formatName)
	return cmd
}

func newTokenRevokeCmd() *cobra.Command {
	var server, token, reason string
	cmd := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke an API token: every replica refuses it at once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := jsonBody(controlRequest{Reason: reason})
			if err != nil {
				return err
			}
			var res api.TokenInfo
			if err := (apiClient{base: server, token: token}).do(cmd.Context(), "POST", "/api/v1/tokens/"+url.PathEscape(args[0])+"/revoke", body, &res); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "token %s revoked by %s at %s\n", res.Name, res.RevokedBy, expiresText(res.RevokedAt))
			return nil
		},
	}
	cmd.Flags().StringVar(&server, "server", defaultServer(), "URL of the running flotilla (env FLOTILLA_SERVER)")
	tokenFlag(cmd.Flags(), &token)
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded in the audit")
	return cmd
}

// printTokens prints the tokens' table.
func printTokens(w io.Writer, ts []api.TokenInfo) {
	if len(ts) == 0 {
		fmt.Fprintln(w, "no API tokens created or revoked")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tGRANTS\tCREATED BY\tCREATED\tEXPIRES\tREVOKED")
	for _, t := range ts {
		grants, by := grantsText(t.Grants), t.CreatedBy
		if t.Config {
			grants, by = "(config)", "-"
		}
		if t.Automation {
			grants += " (automation)"
		}
		revoked := "-"
		if t.RevokedAt != nil {
			revoked = t.RevokedAt.Format(time.RFC3339) + " by " + t.RevokedBy
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, grants, by, t.CreatedAt.Format(time.RFC3339), expiresText(t.ExpiresAt), revoked)
	}
	_ = tw.Flush()
}

func grantsText(gs []api.TokenGrant) string {
	out := ""
	for i, g := range gs {
		if i > 0 {
			out += ", "
		}
		out += g.Role + " in " + g.Project
	}
	if out == "" {
		return "-"
	}
	return out
}

func expiresText(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Format(time.RFC3339)
}
