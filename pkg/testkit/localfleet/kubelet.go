package localfleet

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// kubeletSysctls are the kernel settings the kubelet insists on
// (setupKernelTunables in pkg/kubelet/cm): it sets them when they differ,
// or fails with protectKernelDefaults. They are the host's, not the node's:
// kernel.panic_on_oops=1 would make a kernel oops reboot the whole machine.
var kubeletSysctls = map[string]int{
	"vm/overcommit_memory":      1,
	"vm/panic_on_oom":           0,
	"kernel/panic":              10,
	"kernel/panic_on_oops":      1,
	"kernel/keys/root_maxkeys":  1000000,
	"kernel/keys/root_maxbytes": 25000000,
}

// kubeletWrapper runs the kubelet in a mount namespace of its own where
// every setting of kubeletSysctls that differs on the host is a file with
// the value it wants, bind-mounted over /proc/sys: the kubelet (with
// protectKernelDefaults, so it never writes) is satisfied and the host's
// kernel is left alone. /proc is a private mount, so those bind mounts stay
// in the kubelet's namespace; the kubelet's root directory is made a shared
// mount first, so the volumes it mounts there reach containerd, which runs
// in the host's namespace.
func (n *RealNode) kubeletWrapper() ([]string, error) {
	dir := filepath.Join(n.Dir, "sysctl")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating sysctl dir: %w", err)
	}
	var script []string
	for key, want := range kubeletSysctls {
		path := filepath.Join("/proc/sys", key)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		if got, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && got == want {
			continue
		}
		fake := filepath.Join(dir, strings.ReplaceAll(key, "/", "."))
		if err := os.WriteFile(fake, []byte(strconv.Itoa(want)+"\n"), 0o644); err != nil {
			return nil, fmt.Errorf("writing %s: %w", fake, err)
		}
		script = append(script, fmt.Sprintf("mount --bind %s %s", fake, path))
	}
	script = append(script, `exec "$@"`)
	return []string{"unshare", "--mount", "--propagation", "unchanged", "--", "sh", "-ec", strings.Join(script, "\n"), "kubelet"}, nil
}

// makeSharedMount bind-mounts dir on itself and makes it shared, so mounts
// under it made in another mount namespace show in this one.
func makeSharedMount(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting %s: %w", dir, err)
	}
	if err := syscall.Mount("", dir, "", syscall.MS_SHARED, ""); err != nil {
		return fmt.Errorf("making %s a shared mount: %w", dir, err)
	}
	return nil
}

// kubeletConfig is the node's KubeletConfiguration. Why the settings that
// are not the defaults:
//   - address and port: the kubelet's server on the node's IP (the bridge's
//     address; the kubelet refuses a loopback node IP), where the API server
//     dials it for logs and exec. The pods can reach that address too, so
//     nothing anonymous is allowed: the API server presents a certificate
//     of the fleet's client CA and the kubelet asks it (webhook) whether
//     that user may.
//   - cgroupRoot: the node's own cgroup, so two nodes do not share
//     /kubepods and Stop finds every container.
//   - maxOpenFiles: the kubelet raises its RLIMIT_NOFILE to it (default
//     1000000); without CAP_SYS_RESOURCE it may not go above the hard limit.
//   - oomScoreAdj 0: the kubelet lowers its own score to -999 by default,
//     which needs CAP_SYS_RESOURCE.
//   - failCgroupV1 false: this host has cgroup v1 only.
//   - protectKernelDefaults: see kubeletWrapper.
//   - makeIPTablesUtilChains false: otherwise the kubelet adds chains to
//     the host's iptables (KUBE-FIREWALL in INPUT and OUTPUT, a canary and
//     a hint chain) and nothing removes them; they serve kube-proxy setups
//     with route_localnet, which this node's kube-proxy does not set.
//   - evictionHard, image GC at 100%: a shared test machine's disk and
//     memory are not the node's to defend; the node must not evict or taint
//     itself because other work fills the disk.
func (n *RealNode) kubeletConfig(nodeIP string, port int, hardNoFile uint64) ([]byte, error) {
	cfg := map[string]any{
		"apiVersion":   "kubelet.config.k8s.io/v1beta1",
		"kind":         "KubeletConfiguration",
		"address":      nodeIP,
		"port":         port,
		"readOnlyPort": 0,
		"healthzPort":  0,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": filepath.Join(n.fleet.Dir, clientCAFile)},
		},
		"authorization":               map[string]any{"mode": "Webhook"},
		"cgroupDriver":                "cgroupfs",
		"cgroupRoot":                  n.cgroupRoot,
		"containerRuntimeEndpoint":    "unix://" + n.socket(),
		"failSwapOn":                  false,
		"failCgroupV1":                false,
		"maxOpenFiles":                hardNoFile,
		"oomScoreAdj":                 0,
		"protectKernelDefaults":       true,
		"makeIPTablesUtilChains":      false,
		"podLogsDir":                  filepath.Join(n.Dir, "pod-logs"),
		"volumePluginDir":             filepath.Join(n.Dir, "volume-plugins"),
		"serializeImagePulls":         false,
		"maxPods":                     30,
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard":                map[string]string{"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
		"registerWithTaints":          []map[string]string{{"key": RealNodeTaint, "value": "true", "effect": "NoSchedule"}},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding kubelet config: %w", err)
	}
	return b, nil
}

func (n *RealNode) startKubelet(ctx context.Context, index int, bins binaries, nodeIP string) (Process, error) {
	ports, err := freePorts(ctx, 1)
	if err != nil {
		return Process{}, err
	}
	n.KubeletPort = ports[0]
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return Process{}, fmt.Errorf("reading RLIMIT_NOFILE: %w", err)
	}
	cfg, err := n.kubeletConfig(nodeIP, n.KubeletPort, lim.Max)
	if err != nil {
		return Process{}, err
	}
	cfgPath := filepath.Join(n.Dir, "kubelet.json")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		return Process{}, fmt.Errorf("writing kubelet config: %w", err)
	}
	root := filepath.Join(n.Dir, "kubelet")
	if err := makeSharedMount(root); err != nil {
		return Process{}, err
	}
	wrapper, err := n.kubeletWrapper()
	if err != nil {
		return Process{}, err
	}
	args := []string{
		"--config=" + cfgPath,
		"--kubeconfig=" + n.kubeconfig("kubelet"),
		"--root-dir=" + root,
		"--cert-dir=" + filepath.Join(n.Dir, "pki"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + nodeIP,
		"--node-labels=" + RealNodeLabel + "=true",
		"--v=2",
	}
	return n.run(ctx, index, "kubelet", bins.kubelet(), wrapper, args)
}
