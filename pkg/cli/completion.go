package cli

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// The kinds of `flotilla get`, as -o name and completion name them.
const (
	kindRollout     = "rollout"
	kindApplication = "application"
	kindCluster     = "cluster"
)

// completeTimeout bounds the API call a completion makes: a shell waits
// for it at every TAB.
const completeTimeout = 3 * time.Second

// completeNames completes the first argument with the names of kind the
// running flotilla at *server lists (--server and --token as given on the
// line so far), each with a description; nothing when it cannot be read.
func completeNames(server, token *string, kind string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completeTimeout)
		defer cancel()
		names, err := listNames(ctx, apiClient{base: *server, token: *token, http: &http.Client{Timeout: completeTimeout}}, kind)
		if err != nil {
			cobra.CompDebugln("completing "+kind+": "+err.Error(), true)
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, n := range names {
			if strings.HasPrefix(n[0], toComplete) {
				out = append(out, cobra.CompletionWithDesc(n[0], n[1]))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// listNames reads the names of kind, each with a description.
func listNames(ctx context.Context, c apiClient, kind string) ([][2]string, error) {
	var out [][2]string
	switch kind {
	case kindRollout:
		var ros []rollout.Rollout
		if err := c.do(ctx, http.MethodGet, "/api/v1/rollouts", nil, &ros); err != nil {
			return nil, err
		}
		for _, r := range ros {
			out = append(out, [2]string{r.ID, r.Application + " " + r.Tag + " " + string(r.Phase)})
		}
	case kindApplication:
		var apps []api.ApplicationView
		if err := c.do(ctx, http.MethodGet, "/api/v1/applications", nil, &apps); err != nil {
			return nil, err
		}
		for _, a := range apps {
			out = append(out, [2]string{a.Name, a.Kind + " " + a.Repository})
		}
	case kindCluster:
		var cs []api.ClusterView
		if err := c.do(ctx, http.MethodGet, "/api/v1/clusters", nil, &cs); err != nil {
			return nil, err
		}
		for _, cl := range cs {
			out = append(out, [2]string{cl.Name, strings.TrimSpace("wave " + dash(cl.Wave) + " " + labelsText(cl.Labels))})
		}
	}
	return out, nil
}
