package cli

import (
	"encoding/json"
	"fmt"
	"os"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/kube"
)

func newTaskCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "task",
		Short: "Run one pipeline task (the steps of flotilla's Tekton Tasks run these)",
	}
	cmd.AddCommand(newApplyCanaryCmd())
	return cmd
}

func newApplyCanaryCmd() *cobra.Command {
	var (
		p                                               tasks.ApplyCanaryParams
		kubeconfig, kubeContext, canaryFile, resultFile string
	)
	cmd := &cobra.Command{
		Use:   "apply-canary",
		Short: "Apply a Flagger Canary and set the workload's image in one cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := os.ReadFile(canaryFile)
			if err != nil {
				return usageError{fmt.Errorf("--canary-file: %w", err)}
			}
			var c flaggerv1.Canary
			if err := yaml.UnmarshalStrict(b, &c); err != nil {
				return usageError{fmt.Errorf("--canary-file %s: %w", canaryFile, err)}
			}
			if c.Namespace == "" {
				c.Namespace = p.Namespace
			}
			p.Canary = &c
			cfg, err := kube.RESTConfig(kubeconfig, kubeContext)
			if err != nil {
				return err
			}
			res, err := tasks.ApplyCanary(cmd.Context(), cfg, p)
			if err != nil {
				return err
			}
			out, err := json.Marshal(res)
			if err != nil {
				return fmt.Errorf("encoding result: %w", err)
			}
			if resultFile != "" {
				if err := os.WriteFile(resultFile, out, 0o644); err != nil {
					return fmt.Errorf("writing result: %w", err)
				}
			}
			fmt.Fprintln(cmd.OutOrStdout(), string(out))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the target cluster")
	f.StringVar(&kubeContext, "context", "", "context of the kubeconfig (default: current)")
	f.StringVar(&p.Rollout, "rollout", "", "rollout id")
	f.StringVar(&p.Namespace, "namespace", "default", "namespace of the workload")
	f.StringVar(&p.Workload, "workload", "", "name of the Deployment")
	f.StringVar(&p.Container, "container", "", "container to set the image of (default: the first)")
	f.StringVar(&p.Image, "image", "", "image to set, repo@digest")
	f.StringVar(&canaryFile, "canary-file", "", "Flagger Canary (YAML or JSON)")
	f.StringVar(&resultFile, "result-file", "", "also write the JSON result here (a Tekton result path)")
	for _, name := range []string{"rollout", "workload", "image", "canary-file"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}
