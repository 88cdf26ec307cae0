package localfleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// kubeProxyConfig is the node's KubeProxyConfiguration, in iptables mode.
// Why the settings that are not the defaults:
//   - servers on free loopback ports rather than :10256 and :10249 on every
//     interface;
//   - conntrack limits and timeouts 0: kube-proxy leaves the host's
//     net.netfilter sysctls alone (they are the machine's, not the node's);
//   - localhostNodePorts false: otherwise kube-proxy sets
//     net.ipv4.conf.all.route_localnet=1 on the host;
//   - oomScoreAdj 0: it lowers its own to -999 by default, which needs
//     CAP_SYS_RESOURCE;
//   - clusterCIDR the node's pod subnet, so traffic from the host to a
//     Service is masqueraded to the bridge's address and the pod's answer
//     comes back through the bridge.
func (n *RealNode) kubeProxyConfig(kubeconfig string, healthz, metrics int) ([]byte, error) {
	cfg := map[string]any{
		"apiVersion":         "kubeproxy.config.k8s.io/v1alpha1",
		"kind":               "KubeProxyConfiguration",
		"mode":               "iptables",
		"clientConnection":   map[string]any{"kubeconfig": kubeconfig},
		"hostnameOverride":   n.Name,
		"clusterCIDR":        n.PodSubnet,
		"healthzBindAddress": "127.0.0.1:" + strconv.Itoa(healthz),
		"metricsBindAddress": "127.0.0.1:" + strconv.Itoa(metrics),
		"oomScoreAdj":        0,
		"nodePortAddresses":  []string{n.PodSubnet},
		"iptables":           map[string]any{"localhostNodePorts": false, "syncPeriod": "30s", "minSyncPeriod": "0s"},
		"conntrack":          map[string]any{"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding kube-proxy config: %w", err)
	}
	return b, nil
}

func (n *RealNode) startKubeProxy(ctx context.Context, index int, bins binaries) error {
	ports, err := freePorts(ctx, 2)
	if err != nil {
		return err
	}
	cfg, err := n.kubeProxyConfig(n.kubeconfig("kube-proxy"), ports[0], ports[1])
	if err != nil {
		return err
	}
	path := filepath.Join(n.Dir, "kube-proxy.json")
	if err := os.WriteFile(path, cfg, 0o644); err != nil {
		return fmt.Errorf("writing kube-proxy config: %w", err)
	}
	for _, ipt := range []string{"iptables", "ip6tables"} {
		if exec.CommandContext(ctx, ipt, "-w", "-S", kubeFirewallChain).Run() != nil {
			n.kubeFirewalls = append(n.kubeFirewalls, ipt)
		}
	}
	p, err := n.run(ctx, index, "kube-proxy", bins.kubeProxy(), nil, []string{"--config=" + path, "--v=2"})
	if err != nil {
		return err
	}
	n.kubeProxy = bins.kubeProxy()
	return waitFor(ctx, p, 60*time.Second, n.Name+" kube-proxy healthy", func(ctx context.Context) (bool, error) {
		return httpOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[0]), ""), nil
	})
}

// kubeFirewallChain is the kubelet's anti-martian chain, which kube-proxy
// adds to the filter table's INPUT and OUTPUT too and, by design, never
// removes (pkg/proxy/iptables: "we create these on startup but do not
// delete them in CleanupLeftovers").
const kubeFirewallChain = "KUBE-FIREWALL"

// cleanupKubeProxy removes kube-proxy's chains and rules from the host's
// iptables once kube-proxy is stopped: kube-proxy --cleanup, then
// KUBE-FIREWALL where it did not exist before kube-proxy started.
func (n *RealNode) cleanupKubeProxy(ctx context.Context) error {
	if n.kubeProxy == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var errs []error
	if b, err := exec.CommandContext(ctx, n.kubeProxy, "--cleanup").CombinedOutput(); err != nil {
		errs = append(errs, fmt.Errorf("cleaning up kube-proxy's rules: %w: %s", err, b))
	}
	for _, ipt := range n.kubeFirewalls {
		for _, args := range [][]string{
			{"-D", "INPUT", "-j", kubeFirewallChain},
			{"-D", "OUTPUT", "-j", kubeFirewallChain},
			{"-F", kubeFirewallChain},
			{"-X", kubeFirewallChain},
		} {
			if b, err := exec.CommandContext(ctx, ipt, append([]string{"-w"}, args...)...).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("%s %v: %w: %s", ipt, args, err, b))
			}
		}
	}
	return errors.Join(errs...)
}

// kubeProxyLock is the host-wide lock of the node whose kube-proxy owns the
// host's KUBE-* chains: two kube-proxies would each rewrite them with their
// own cluster's Services. Held from before kube-proxy starts until its rules
// are cleaned up; the kernel drops it when its holder dies.
const kubeProxyLock = leftoversDir + "/kube-proxy.lock"

// lockKubeProxy takes kubeProxyLock, waiting while another node (of this
// process or another one, such as a parallel test package) holds it; wait
// false returns (nil, nil) instead of waiting.
func lockKubeProxy(ctx context.Context, wait bool) (*os.File, error) {
	if err := os.MkdirAll(leftoversDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", leftoversDir, err)
	}
	f, err := os.OpenFile(kubeProxyLock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", kubeProxyLock, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || !wait {
			_ = f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, nil
			}
			return nil, fmt.Errorf("locking %s: %w", kubeProxyLock, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for %s (another real node runs kube-proxy on this host): %w", kubeProxyLock, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
