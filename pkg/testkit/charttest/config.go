package charttest

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// PodConfig turns cfg, a config written for flotilla on the host, into the
// chart's, in place: the chart sets server.listen and server.dataDir, so
// they go; every cluster's kubeconfig becomes a file of the kubeconfigs'
// Secret (mounted at KubeconfigsDir), its loopback API servers named by
// hostAlias (AliasedKubeconfig); every file under dir the config names
// (`file:` of a secret or a key) becomes one of the chart's secrets
// (mounted at SecretsDir). It returns the secrets' and the kubeconfigs'
// contents by file name.
func PodConfig(cfg map[string]any, dir, hostAlias string) (secrets, kubeconfigs map[string]string, err error) {
	if server, ok := cfg["server"].(map[string]any); ok {
		delete(server, "listen")
		delete(server, "dataDir")
	}
	kubeconfigs = map[string]string{}
	if fleet, ok := cfg["fleet"].(map[string]any); ok {
		clusters, _ := fleet["clusters"].([]any)
		for _, c := range clusters {
			m, _ := c.(map[string]any)
			name, _ := m["name"].(string)
			kc, _ := m["kubeconfig"].(string)
			b, err := AliasedKubeconfig(kc, hostAlias)
			if err != nil {
				return nil, nil, fmt.Errorf("cluster %s: %w", name, err)
			}
			kubeconfigs[name+".kubeconfig"] = string(b)
			m["kubeconfig"] = KubeconfigsDir + name + ".kubeconfig"
		}
	}
	secrets = map[string]string{}
	return secrets, kubeconfigs, secretFiles(cfg, dir, secrets)
}

// secretFiles moves every file under dir that v names (a map's "file")
// into secrets, by its base name, and names it under SecretsDir instead.
func secretFiles(v any, dir string, secrets map[string]string) error {
	switch v := v.(type) {
	case map[string]any:
		if f, ok := v["file"].(string); ok && strings.HasPrefix(f, dir+"/") {
			b, err := os.ReadFile(f)
			if err != nil {
				return fmt.Errorf("reading secret file: %w", err)
			}
			key := filepath.Base(f)
			secrets[key] = string(b)
			v["file"] = SecretsDir + key
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if err := secretFiles(v[k], dir, secrets); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := secretFiles(e, dir, secrets); err != nil {
				return err
			}
		}
	}
	return nil
}
