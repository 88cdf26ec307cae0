package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/flotilla-cd/flotilla/pkg/api"
)

// newGetClustersCmd is `flotilla get clusters [NAME]`: the fleet's
// clusters (GET /api/v1/clusters), their wave, labels, what they run and
// their health.
func newGetClustersCmd(server, token *string) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:     "clusters [NAME]",
		Aliases: []string{"cluster"},
		Short:   "List the fleet's clusters: their wave, labels, what they run, their health",
		Long: `List the fleet's clusters: the wave each is in, its labels, what it runs of
each application (and a version rolling out to it), and its health when
flotilla reads it (its API server reachable, Flagger ready). With a NAME,
that cluster only. Another project's applications are left out.` + readTokenHelp,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeNames(server, token, kindCluster),
		RunE: func(cmd *cobra.Command, args []string) error {
			var cs []api.ClusterView
			if err := (apiClient{base: *server, token: *token}).get(cmd.Context(), "/api/v1/clusters", &cs); err != nil {
				return err
			}
			var v any = cs
			if len(args) == 1 {
				i := slices.IndexFunc(cs, func(c api.ClusterView) bool { return c.Name == args[0] })
				if i < 0 {
					return fmt.Errorf("cluster %q not found: the fleet's are %s", args[0], strings.Join(clusterNames(cs, false), ", "))
				}
				cs = cs[i : i+1]
				v = cs[0]
			}
			return out.print(cmd.OutOrStdout(), v, func(w io.Writer, wide bool) { printClusters(w, cs, wide) },
				func() []string { return clusterNames(cs, true) })
		},
	}
	out = addOutput(cmd, "table", formatJSON, formatYAML, formatWide, formatName)
	return cmd
}

// clusterNames are the clusters' names, as -o name prints them when kind.
func clusterNames(cs []api.ClusterView, kind bool) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		if kind {
			out = append(out, kindCluster+"/"+c.Name)
		} else {
			out = append(out, c.Name)
		}
	}
	return out
}

// printClusters prints clusters as a table; wide adds their Kubernetes
// version, flotilla's canaries there, where the cluster comes from (the
// file, the discovery source: "argocd: Secret argocd/prod-eu",
// "clusterProfiles: ClusterProfile fleet/prod-eu", or a Cluster resource:
// "resources: Cluster platform/prod-eu") and
// what a failed read said.
func printClusters(w io.Writer, cs []api.ClusterView, wide bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "NAME\tWAVE\tHEALTH\tLABELS\tAPPLICATIONS"
	if wide {
		head += "\tKUBERNETES\tCANARIES\tSOURCE\tDETAIL"
	}
	fmt.Fprintln(tw, head)
	for _, c := range cs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s", c.Name, dash(c.Wave), clusterHealth(c.Health), dash(labelsText(c.Labels)), dash(runningText(c.Applications)))
		if wide {
			k8s, canaries, detail := "-", "-", "-"
			if h := c.Health; h != nil {
				k8s, canaries, detail = dash(h.Kubernetes), fmt.Sprint(h.Canaries), dash(h.Detail)
				if h.Waiting > 0 {
					canaries += fmt.Sprintf(" (%d waiting)", h.Waiting)
				}
			}
			fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s", k8s, canaries, sourceText(c.Source), detail)
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
}

// sourceText is where a cluster comes from, short: file, the discovery
// source ("argocd: Secret argocd/prod-eu") or the Cluster resource
// ("resources: Cluster platform/prod-eu").
func sourceText(source string) string {
	if source == "" {
		return "file"
	}
	return strings.TrimPrefix(strings.TrimPrefix(source, "fleet.discovery."), "server.")
}

// clusterHealth says in a word or two how a cluster answered.
func clusterHealth(h *api.ClusterHealth) string {
	switch {
	case h == nil:
		return "-"
	case !h.Reachable:
		return "unreachable"
	}
	return "flagger " + strings.ToLower(dash(h.Flagger))
}

// labelsText is labels as k=v,k=v, sorted.
func labelsText(labels map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

// runningText is what a cluster runs of each application, sorted:
// app=tag, and ->tag for a version rolling out to it.
func runningText(apps map[string]api.Running) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(apps)) {
		r := apps[name]
		p := name + "=" + dash(r.Tag)
		if r.Unknown != "" {
			p = name + "=?"
		}
		if r.RollingOut != "" {
			p += "->" + r.RollingOut
		}
		if r.Drift != nil {
			p += " (" + r.Drift.State + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ",")
}
