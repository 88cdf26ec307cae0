package localfleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The Debian packages' paths (make deps installs them).
const (
	containerdBin = "/usr/bin/containerd"
	runcBin       = "/usr/sbin/runc"
	cniBinDir     = "/usr/lib/cni"
)

func (n *RealNode) socket() string { return filepath.Join(n.Dir, "containerd.sock") }

// containerdConfig is containerd 1.6's configuration for the node: all its
// state under the node's directory, runc with cgroupfs (cgroup v1 here, no
// systemd), the shims in the node's cgroup (so Stop can kill what outlives
// containerd), network namespaces under its state directory rather than
// /run/netns, and plain HTTP to the loopback registry (certs.d).
//
// restrict_oom_score_adj: containerd runs without CAP_SYS_RESOURCE here, so
// it cannot give a container an oom_score_adj lower than its own (the
// kubelet asks -998 for the pause container and -997 for Guaranteed pods);
// with it, such requests are raised to containerd's own score instead of
// failing the container. Only the OOM killer's order changes.
func (n *RealNode) containerdConfig(pauseImage string) string {
	d := n.Dir
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return fmt.Sprintf(`version = 2
root = %[1]s
state = %[2]s
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]s

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = %[4]s
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = %[5]s
    restrict_oom_score_adj = true
    disable_apparmor = true
    netns_mounts_under_state_dir = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = %[6]s
      conf_dir = %[7]s
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          BinaryName = %[8]s
          Root = %[9]s
          ShimCgroup = %[10]s
          SystemdCgroup = false
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = %[11]s
`, q(filepath.Join(d, "root")), q(filepath.Join(d, "state")), q(n.socket()), q(filepath.Join(d, "opt")),
		q(pauseImage), q(cniBinDir), q(filepath.Join(d, "cni")), q(runcBin), q(filepath.Join(d, "runc")),
		q(n.cgroupRoot+"/shims"), q(filepath.Join(d, "certs.d")))
}

// cniConfig puts the pods on the node's bridge, whose address is the
// pods' gateway and the node's IP. No masquerading: the pods need no way
// out, only to be reached from the host.
func (n *RealNode) cniConfig(gateway string) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "flotilla",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      n.Bridge,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": n.PodSubnet, "gateway": gateway}}},
					"dataDir": filepath.Join(n.Dir, "cni-ipam"),
				},
			},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding CNI config: %w", err)
	}
	return b, nil
}

// startContainerd starts containerd with the node's configuration;
// mirrors are more registries' hosts.toml (by registry host), besides the
// node's own registry.
func (n *RealNode) startContainerd(ctx context.Context, index int, pauseImage, gateway string, mirrors map[string][]byte) (Process, error) {
	cni, err := n.cniConfig(gateway)
	if err != nil {
		return Process{}, err
	}
	files := map[string][]byte{
		filepath.Join(n.Dir, "containerd.toml"):                   []byte(n.containerdConfig(pauseImage)),
		filepath.Join(n.Dir, "cni", "10-flotilla.conflist"):       cni,
		filepath.Join(n.Dir, "certs.d", n.Registry, "hosts.toml"): registryHosts("http://" + n.Registry),
	}
	for host, b := range mirrors {
		files[filepath.Join(n.Dir, "certs.d", host, "hosts.toml")] = b
	}
	for path, b := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return Process{}, fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return Process{}, fmt.Errorf("writing %s: %w", path, err)
		}
	}
	p, err := n.run(ctx, index, "containerd", containerdBin, nil, []string{"--config", filepath.Join(n.Dir, "containerd.toml")})
	if err != nil {
		return p, err
	}
	return p, waitFor(ctx, p, 30*time.Second, n.Name+" containerd serving", func(ctx context.Context) (bool, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "unix", n.socket())
		if err != nil {
			return false, nil
		}
		_ = c.Close()
		return true, nil
	})
}
