package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

// kubecdFlags are config check's flags for KubeCD's files.
type kubecdFlags struct{ dir, kubeconfig string }

func (k *kubecdFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&k.dir, "kubecd", "", "check KubeCD's files in this directory (environments.yaml and its release files) instead of --config")
	cmd.Flags().StringVar(&k.kubeconfig, "kubeconfig", "", "with --kubecd: the kubeconfig of the clusters the environments name (default: environments.yaml's kubeConfig, $KUBECONFIG, ~/.kube/config)")
}

// load loads --config, or with --kubecd the KubeCD files (path becomes
// the directory, for messages).
func (k *kubecdFlags) load(path *string) (*config.Config, error) {
	switch {
	case k.dir != "" && *path != "":
		return nil, usageError{errors.New("--config and --kubecd exclude each other: put kubecd.dir in the config")}
	case k.dir == "" && k.kubeconfig != "":
		return nil, usageError{errors.New("--kubeconfig is for --kubecd")}
	case k.dir != "":
		*path = k.dir
		return config.LoadKubeCD(k.dir, k.kubeconfig)
	}
	return config.Load(*path)
}
