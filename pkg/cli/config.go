package cli

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spf13/cobra"

	configfiles "github.com/flotilla-cd/flotilla/config"
	"github.com/flotilla-cd/flotilla/pkg/cluster"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/kube"
)

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Work with flotilla's configuration file",
	}
	cmd.AddCommand(newConfigCheckCmd(), newConfigSchemaCmd())
	return cmd
}

func newConfigSchemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of the configuration file, for editors",
		Long: `schema prints the JSON Schema (draft 2020-12) of flotilla's configuration
file: every field by name with its doc comment, its type, and no unknown
field. Editors use it to complete and check a config as it is typed; with
the YAML language server (VS Code's YAML extension, Neovim's yamlls) a
modeline at the top of the file names it:

  # yaml-language-server: $schema=flotilla.schema.json

The schema gives each field's shape and requires nothing: what else a
config needs (required fields, references between fields, ranges) is what
'flotilla config check' says.`,
		Example: `  flotilla config schema > flotilla.schema.json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(configfiles.Schema)
			return err
		},
	}
}

func newConfigCheckCmd() *cobra.Command {
	var (
		path    string
		live    bool
		timeout time.Duration
		kcd     kubecdFlags
	)
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Validate a configuration without serving; with --live, reach every cluster",
		Long: `check loads the configuration as 'flotilla serve' would (schema, defaults,
secrets and kubeconfig files, every rule) and prints every problem with its
path, one per line; the exit code is 1 when there is one. A valid config
without an API token (every read and control would be refused) or with
server.anonymousRead (reads open to anyone) is warned about. With --live it also
reaches each cluster of the fleet (its kubeconfig, the API server's version)
and checks that it serves Flagger's Canary (flagger.app/v1beta1), each
cluster within --timeout. CI pipelines and the Helm chart's init container
run it. With --kubecd DIR instead of --config it checks KubeCD's files in DIR
(environments.yaml and the release files it names) as a config holding only
kubecd.dir would load them (docs/kubecd.md).`,
		Example: `  flotilla config check --config flotilla.yaml
  flotilla config check --kubecd deployments/ --kubeconfig ~/.kube/config
  flotilla config check --config flotilla.yaml --live --timeout 5s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" && kcd.dir == "" {
				return usageError{errors.New("--config (or --kubecd) is required")}
			}
			if timeout <= 0 {
				return usageError{errors.New("--timeout must be positive")}
			}
			out := cmd.OutOrStdout()
			cfg, err := kcd.load(&path)
			var verr *config.ValidationError
			if errors.As(err, &verr) {
				for _, p := range verr.Problems {
					fmt.Fprintln(out, p.String())
				}
				return exitError{1, fmt.Errorf("%s: %d problem(s)", path, len(verr.Problems))}
			}
			if err != nil {
				return exitError{1, err}
			}
			fmt.Fprintf(out, "%s: valid: %d receiver(s), %d cluster(s) in %d wave(s), %d application(s)\n",
				path, len(cfg.Receivers), len(cfg.Fleet.Clusters), len(cfg.Fleet.Waves), len(cfg.Applications))
			// Valid, but worth saying: no API token (every read and
			// control refused) or reads open to anyone.
			if n := cfg.Server.AuthNotice(); n != "" {
				fmt.Fprintf(out, "%s: warning: %s\n", path, n)
			}
			for _, n := range cfg.KubeCDNotices() {
				fmt.Fprintf(out, "%s: notice: %s\n", path, n)
			}
			// Valid, and open to every token: no projects, no rbac.
			if n := cfg.RBACNotice(); n != "" {
				fmt.Fprintf(out, "%s: notice: %s\n", path, n)
			}
			if !live {
				return nil
			}
			if bad := checkClusters(cmd.Context(), cfg, timeout, func(line string) { fmt.Fprintln(out, line) }); bad > 0 {
				return exitError{1, fmt.Errorf("%d cluster(s) not ready", bad)}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "", "configuration file to check")
	kcd.register(cmd)
	cmd.Flags().BoolVar(&live, "live", false, "also reach every cluster and check that it serves Flagger's Canary")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "how long each cluster may take to answer (with --live)")
	return cmd
}

// checkClusters reaches every cluster of cfg at once and prints a line
// each, in the fleet's order; it returns how many are not ready.
func checkClusters(ctx context.Context, cfg *config.Config, timeout time.Duration, println func(string)) int {
	lines := make([]string, len(cfg.Fleet.Clusters))
	bad := make([]bool, len(cfg.Fleet.Clusters))
	var wg sync.WaitGroup
	for i, c := range cfg.Fleet.Clusters {
		wg.Go(func() {
			lines[i], bad[i] = checkCluster(ctx, c, timeout)
		})
	}
	wg.Wait()
	n := 0
	for i, l := range lines {
		println(l)
		if bad[i] {
			n++
		}
	}
	return n
}

func checkCluster(ctx context.Context, c config.Cluster, timeout time.Duration) (string, bool) {
	rc, err := kube.RESTConfig(c.Kubeconfig, c.Context)
	if err != nil {
		return fmt.Sprintf("cluster %s: %v", c.Name, err), true
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p, err := cluster.Reach(ctx, rc)
	switch {
	case err != nil:
		return fmt.Sprintf("cluster %s: unreachable at %s: %v", c.Name, rc.Host, err), true
	case !p.Flagger:
		return fmt.Sprintf("cluster %s: reachable (Kubernetes %s), but Flagger's Canary (%s) is not served: install Flagger (flotilla fleet bootstrap)",
			c.Name, p.Version, cluster.FlaggerGroupVersion), true
	}
	return fmt.Sprintf("cluster %s: ready (Kubernetes %s, Flagger's Canary served)", c.Name, p.Version), false
}
