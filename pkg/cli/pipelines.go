package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pkg/kube"
)

func newPipelinesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pipelines",
		Short: "Show or install flotilla's Tekton Pipeline and Tasks",
		Long: `flotilla's Tekton Pipeline (` + pipelines.PipelineName + `) and Tasks (` + pipelines.TaskBumpImage + `,
` + pipelines.TaskApplyCanary + `) are embedded in the binary. Their steps run
flotilla's own task commands in flotilla's image, so Tekton and the embedded
executor run the same code.`,
	}
	cmd.AddCommand(newPipelinesPrintCmd(), newPipelinesInstallCmd())
	return cmd
}

func newPipelinesPrintCmd() *cobra.Command {
	var image string
	cmd := &cobra.Command{
		Use:   "print",
		Short: "Print the Tasks and the Pipeline as YAML",
		Example: `  flotilla pipelines print | kubectl apply -n flotilla -f -
  flotilla pipelines print --image registry.example.com/flotilla:v1.2.3`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := pipelines.Manifests(image)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	cmd.Flags().StringVar(&image, "image", "", "image the steps run (default "+pipelines.DefaultImage()+")")
	return cmd
}

func newPipelinesInstallCmd() *cobra.Command {
	var kubeconfig, kubeContext, namespace, image string
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Apply the Tasks and the Pipeline to the cluster that runs Tekton (server-side apply, idempotent)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if namespace == "" {
				return usageError{fmt.Errorf("--namespace must not be empty")}
			}
			cfg, err := kube.RESTConfig(kubeconfig, kubeContext)
			if err != nil {
				return err
			}
			objs, err := pipelines.Objects(image, namespace)
			if err != nil {
				return err
			}
			a, err := kube.NewApplier(cfg, "flotilla")
			if err != nil {
				return err
			}
			ns := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": namespace},
			}}
			if err := a.Apply(cmd.Context(), ns); err != nil {
				return err
			}
			for _, o := range objs {
				if err := a.Apply(cmd.Context(), o); err != nil {
					if meta.IsNoMatchError(err) {
						return fmt.Errorf("%w (is Tekton Pipelines installed in the cluster?)", err)
					}
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s/%s applied\n", o.GetKind(), namespace, o.GetName())
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster that runs Tekton")
	f.StringVar(&kubeContext, "context", "", "context of the kubeconfig (default: current)")
	f.StringVarP(&namespace, "namespace", "n", "flotilla", "namespace to install into (created when missing)")
	f.StringVar(&image, "image", "", "image the steps run (default "+pipelines.DefaultImage()+")")
	return cmd
}
