package localfleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// TektonRegistry is the registry host in the names of Tekton's own images
// that the fleet's Tekton controllers put in their TaskRuns' pods
// (TektonImage). No such host exists: kwok runs no container, and a real
// node in a cluster with Tekton pulls it from its own registry
// (tektonImages), where it pushed the images.
const TektonRegistry = "registry.local"

// tektonImageNames are the images of Tekton's pods a real node serves,
// built from Tekton's module (deploy/tools/local/build.sh): the
// entrypoint, copied into every step by the "prepare" init container; nop,
// which replaces a stopped sidecar's image; and the working directories'
// initializer. (sidecarlogresults and the shell image serve features
// flotilla's pipelines do not use: results from sidecar logs, scripts.)
var tektonImageNames = []string{"entrypoint", "nop", "workingdirinit"}

// TektonImage is the image the fleet's Tekton controllers run for name
// (entrypoint, nop, ...), as its -<name>-image flag.
func TektonImage(name string) string {
	return TektonRegistry + "/tekton/" + name + ":v" + TektonVersion
}

// tektonImages pushes Tekton's images to the node's registry, each binary
// where Tekton's pods expect it (/ko-app/<name>, as ko lays it out), and
// returns the containerd hosts file that has the node pull TektonRegistry's
// images from there.
func (n *RealNode) tektonImages(ctx context.Context, bins binaries) (hostsDir string, hosts []byte, err error) {
	for _, name := range tektonImageNames {
		bin := filepath.Join(bins.tektonImages(), name)
		if _, err := os.Stat(bin); err != nil {
			return "", nil, fmt.Errorf("the binary of Tekton's %s image (deploy/tools/local/build.sh tekton builds it): %w", name, err)
		}
		ref := n.Registry + "/tekton/" + name + ":v" + TektonVersion
		if _, err := pushBinaryAt(ctx, ref, bin, "/ko-app/"+name); err != nil {
			return "", nil, fmt.Errorf("pushing Tekton's %s image: %w", name, err)
		}
	}
	return TektonRegistry, registryHosts("http://" + n.Registry), nil
}

// registryHosts is containerd's hosts.toml that pulls a registry's images
// from server, over plain HTTP.
func registryHosts(server string) []byte {
	return fmt.Appendf(nil, "server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", server, server)
}
