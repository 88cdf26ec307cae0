package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// whoamiResponse is pkg/api.Whoami.
type whoamiResponse struct {
	Name         string              `json:"name"`
	Username     string              `json:"username,omitempty"`
	Via          string              `json:"via"`
	Groups       []string            `json:"groups,omitempty"`
	Permissions  map[string][]string `json:"permissions"`
	Applications map[string]string   `json:"applications"`
}

func newWhoamiCmd() *cobra.Command {
	var server, token string
	var out *output
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Say who flotilla takes you for, your groups and what you may do per project",
		Long: `whoami asks the flotilla at --server who its calls come from (GET
/api/v1/whoami): the API token's name, or the person of a flotilla login --sso
(the ID token's e-mail, and their username at the provider) and the groups the provider gave them, and what the
projects' roles let them do, per project. Without --token it sends the
login's ID token, refreshed first when it expires.` + readTokenHelp,
		Example: `  flotilla whoami
  flotilla whoami -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var w whoamiResponse
			if err := (apiClient{base: server, token: token}).get(cmd.Context(), "/api/v1/whoami", &w); err != nil {
				return err
			}
			return out.print(cmd.OutOrStdout(), w, func(wr io.Writer, _ bool) { printWhoami(wr, w) }, nil)
		},
	}
	cmd.Flags().StringVar(&server, "server", defaultServer(), "URL of the running flotilla (env FLOTILLA_SERVER)")
	tokenFlag(cmd.Flags(), &token)
	out = addOutput(cmd, "text", formatJSON, formatYAML)
	return cmd
}

// printWhoami writes who, how, the groups and the permissions per project.
func printWhoami(w io.Writer, r whoamiResponse) {
	fmt.Fprintf(w, "name:   %s\n", r.Name)
	if r.Username != "" {
		fmt.Fprintf(w, "username: %s\n", r.Username)
	}
	fmt.Fprintf(w, "via:    %s\n", r.Via)
	groups := "(none)"
	if len(r.Groups) > 0 {
		groups = strings.Join(r.Groups, ", ")
	}
	fmt.Fprintf(w, "groups: %s\n", groups)
	if len(r.Permissions) == 0 {
		fmt.Fprintln(w, "permissions: none in any project")
		return
	}
	fmt.Fprintln(w, "permissions:")
	for _, p := range slices.Sorted(maps.Keys(r.Permissions)) {
		fmt.Fprintf(w, "  %s: %s\n", p, strings.Join(r.Permissions[p], ", "))
	}
}
