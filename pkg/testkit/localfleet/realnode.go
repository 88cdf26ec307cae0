package localfleet

import (
	"cmp"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Labels and taint of a real node. The taint keeps the fleet's ordinary
// workloads (meant for kwok's fake node) off it: a pod runs on a real node
// only when it tolerates RealNodeTaint, and selects RealNodeLabel to be sure
// to land there.
const (
	RealNodeLabel = "flotilla.dev/real-node"
	RealNodeTaint = "flotilla.dev/real-node"
)

//go:embed pause/main.go
var pauseSource []byte

// RealNodeOptions configures StartRealNode. The zero value is usable.
type RealNodeOptions struct {
	// Name is the node's name. Default "<cluster>-real".
	Name string
	// Registry is host:port of a plain-HTTP registry on loopback the node
	// pulls from; the node pushes its sandbox (pause) image there. Default: a
	// registry of the node's own (an in-memory one, a process of the fleet
	// like containerd), stopped with the node.
	Registry string
	// PodSubnet is the IPv4 subnet of the pods on the node's bridge.
	// Default the first 10.244.<n>.0/24 no interface of the host is in,
	// from an n derived from the fleet's directory and the node's name.
	PodSubnet string
	// KubeProxy also runs kube-proxy (iptables mode) for the node, so the
	// cluster's ClusterIP Services reach the node's pods, from the host too.
	// It writes the KUBE-* chains of the host's iptables, so only one node
	// of the host may run it at a time.
	KubeProxy bool
	// HostLoopback lets the node's pods reach the host's loopback servers
	// (the fleet's API servers, registries, a test's own servers) at the
	// node's address, Gateway, port for port, as pods reach their node:
	// TCP to Gateway from the bridge and from the host itself (but for the
	// kubelet's port) is DNATed to 127.0.0.1, with route_localnet on the
	// bridge only. So one address names those servers for pods and host
	// processes alike, and the pods keep a network of their own (no
	// hostNetwork) while the servers stay on loopback.
	HostLoopback bool
	// Logger receives progress. Default: the fleet's none.
	Logger *slog.Logger
}

// RealNode is a node of one cluster that runs pods for real: a kubelet on
// containerd and runc, with a bridge network for its pods. Stop it with
// Stop: its containers outlive containerd otherwise.
type RealNode struct {
	Name    string
	Cluster string
	// Dir holds the node's configuration, state and logs.
	Dir string
	// Registry is host:port of the registry the node pulls from.
	Registry string
	// Bridge is the host's bridge interface of the pods, and PodSubnet
	// their subnet; the host reaches the pods' IPs through it.
	Bridge    string
	PodSubnet string
	// Gateway is the bridge's address: the pods' gateway and the node's
	// InternalIP (and, with RealNodeOptions.HostLoopback, the host's
	// loopback servers).
	Gateway string
	// KubeletPort is the kubelet's HTTPS port on 127.0.0.1, which the API
	// server dials for logs, exec and port-forward.
	KubeletPort int
	// Processes are the node's registry (unless RealNodeOptions.Registry),
	// containerd, the kubelet and, with RealNodeOptions.KubeProxy,
	// kube-proxy.
	Processes []Process

	fleet      *Fleet
	cgroupRoot string
	kubeProxy  string
	// kubeFirewalls are the iptables commands whose KUBE-FIREWALL chain
	// kube-proxy created (see cleanupKubeProxy).
	kubeFirewalls []string
	// proxyLock is kubeProxyLock while this node runs kube-proxy.
	proxyLock *os.File
	log       *slog.Logger
}

// StartRealNode starts a real node for the named cluster of the fleet and
// waits until it is Ready. It needs root, cgroup v1, Debian's containerd,
// runc and containernetworking-plugins (make deps) and the kubelet
// (deploy/tools/local/build.sh).
func (f *Fleet) StartRealNode(ctx context.Context, cluster string, o RealNodeOptions) (*RealNode, error) {
	index := slices.IndexFunc(f.Clusters, func(c Cluster) bool { return c.Name == cluster })
	if index < 0 {
		return nil, fmt.Errorf("no cluster %q in the fleet", cluster)
	}
	bins := binaries{dir: cmp.Or(f.BinDir, BinDir())}
	if err := checkRealNodeHost(bins, o.KubeProxy); err != nil {
		return nil, err
	}
	n := &RealNode{
		Name:    cmp.Or(o.Name, cluster+"-real"),
		Cluster: cluster,
		fleet:   f,
		log:     cmp.Or(o.Logger, slog.New(slog.DiscardHandler)),
	}
	n.Dir = filepath.Join(f.Dir, n.Name)
	sum := sha256.Sum256([]byte(f.Dir + "/" + n.Name))
	// Interface names are at most 15 bytes; the hash keeps two fleets'
	// bridges apart.
	n.Bridge = "flt" + hex.EncodeToString(sum[:4])
	n.PodSubnet = o.PodSubnet
	if n.PodSubnet == "" {
		subnet, err := freeSubnet(sum[4])
		if err != nil {
			return nil, err
		}
		n.PodSubnet = subnet
	}
	n.cgroupRoot = "/flotilla-" + n.Name + "-" + hex.EncodeToString(sum[:4])
	if err := n.start(ctx, index, bins, o); err != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		return nil, errors.Join(err, n.Stop(stopCtx))
	}
	return n, nil
}

// checkRealNodeHost reports at once everything the host lacks for a real node.
func checkRealNodeHost(bins binaries, kubeProxy bool) error {
	var missing []string
	need := []string{bins.kubelet(), containerdBin, runcBin, filepath.Join(cniBinDir, "bridge"), filepath.Join(cniBinDir, "host-local"), filepath.Join(cniBinDir, "loopback")}
	commands := []string{"unshare", "mount", "ip"}
	if kubeProxy {
		need = append(need, bins.kubeProxy())
		commands = append(commands, "iptables", "iptables-restore", "iptables-save")
	}
	for _, p := range need {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	for _, c := range commands {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("a real node needs %v (make deps installs containerd, runc, containernetworking-plugins and iptables; deploy/tools/local/build.sh builds the kubelet and kube-proxy)", missing)
	}
	if os.Geteuid() != 0 {
		return errors.New("a real node needs root (containerd, runc and the kubelet mount and create cgroups)")
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return errors.New("a real node is only set up for cgroup v1 here (found cgroup v2)")
	}
	return nil
}

func (n *RealNode) start(ctx context.Context, index int, bins binaries, o RealNodeOptions) error {
	start := time.Now()
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return fmt.Errorf("creating node dir: %w", err)
	}
	// What crashed runs left behind.
	if err := reapNodes(ctx, ""); err != nil {
		n.log.Warn("cleaning up after earlier real nodes", "err", err)
	}
	if err := n.saveRecord(); err != nil {
		return err
	}
	n.Registry = o.Registry
	if n.Registry == "" {
		if err := n.startRegistry(ctx, index); err != nil {
			return err
		}
	}
	pauseBin := filepath.Join(n.Dir, "pause")
	if err := BuildStatic(ctx, pauseSource, pauseBin); err != nil {
		return fmt.Errorf("building the pause binary: %w", err)
	}
	pause, err := PushBinary(ctx, n.Registry+"/flotilla/pause", pauseBin)
	if err != nil {
		return fmt.Errorf("pushing the pause image: %w", err)
	}
	if err := n.createCgroupRoot(); err != nil {
		return err
	}
	gateway, err := n.createBridge(ctx)
	if err != nil {
		return err
	}
	n.Gateway = gateway
	c := n.fleet.Clusters[index]
	mirrors := map[string][]byte{}
	if c.Tekton {
		host, hosts, err := n.tektonImages(ctx, bins)
		if err != nil {
			return err
		}
		mirrors[host] = hosts
	}
	n.log.Info("starting containerd", "node", n.Name)
	ctrd, err := n.startContainerd(ctx, index, pause, gateway, mirrors)
	if err != nil {
		return err
	}
	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	if err := n.writeIdentities(ctx, cs, c); err != nil {
		return err
	}
	if err := n.saveRecord(); err != nil {
		return err
	}
	n.log.Info("starting kubelet", "node", n.Name, "cluster", c.Name)
	kubelet, err := n.startKubelet(ctx, index, bins, gateway)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, kubelet, 2*time.Minute, n.Name+" Ready", func(ctx context.Context) (bool, error) {
		if !ctrd.running() {
			return false, fmt.Errorf("containerd exited:\n%s", ctrd.Tail(15))
		}
		return realNodeReady(ctx, cs, n.Name), nil
	}); err != nil {
		return err
	}
	if o.KubeProxy {
		n.log.Info("waiting for the host's kube-proxy lock", "node", n.Name)
		if n.proxyLock, err = lockKubeProxy(ctx, true); err != nil {
			return err
		}
		n.log.Info("starting kube-proxy", "node", n.Name)
		if err := n.startKubeProxy(ctx, index, bins); err != nil {
			return err
		}
		if err := n.saveRecord(); err != nil {
			return err
		}
	}
	if o.HostLoopback {
		if err := n.loopbackToHost(ctx); err != nil {
			return err
		}
	}
	n.log.Info("real node ready", "node", n.Name, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// Process returns the node's process of that name ("registry",
// "containerd", "kubelet", "kube-proxy").
func (n *RealNode) Process(name string) (Process, bool) {
	i := slices.IndexFunc(n.Processes, func(p Process) bool { return p.Name == n.Name+"-"+name })
	if i < 0 {
		return Process{}, false
	}
	return n.Processes[i], true
}

func (n *RealNode) run(ctx context.Context, index int, name, bin string, wrapper, args []string, env ...string) (Process, error) {
	p, err := startWrappedProcess(ctx, n.fleet.Dir, n.Name+"-"+name, bin, wrapper, args, env, n.fleet.DieWithParent)
	if err != nil {
		return p, err
	}
	n.Processes = append(n.Processes, p)
	return p, n.fleet.record(index, p)
}

// createBridge creates the pods' bridge with the first address of the pod
// subnet, which is both the pods' gateway and the node's IP, and returns
// that address. The CNI bridge plugin would create it with the first pod;
// the kubelet needs its address before.
func (n *RealNode) createBridge(ctx context.Context) (string, error) {
	prefix, err := netip.ParsePrefix(n.PodSubnet)
	if err != nil || !prefix.Addr().Is4() {
		return "", fmt.Errorf("pod subnet %q is not an IPv4 prefix", n.PodSubnet)
	}
	gw := prefix.Masked().Addr().Next()
	for _, args := range [][]string{
		{"link", "add", "name", n.Bridge, "type", "bridge"},
		{"addr", "add", netip.PrefixFrom(gw, prefix.Bits()).String(), "dev", n.Bridge},
		{"link", "set", n.Bridge, "up"},
	} {
		if b, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("ip %v: %w: %s", args, err, b)
		}
	}
	return gw.String(), nil
}

// freeSubnet returns the first 10.244.<n>.0/24, from n = first, that no
// address of the host's interfaces is in: another node's bridge, say.
func freeSubnet(first byte) (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("listing the host's addresses: %w", err)
	}
	for i := range 256 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, first + byte(i), 0}), 24)
		if !slices.ContainsFunc(addrs, func(a net.Addr) bool {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				return false
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			return ok && p.Contains(ip.Unmap())
		}) {
			return p.String(), nil
		}
	}
	return "", errors.New("no free /24 in 10.244.0.0/16 for the pods")
}

// writeIdentities gives the kubelet and kube-proxy their own identities, as
// in a real cluster, with certificates of the fleet's client CA: the
// kubelet is system:node:<name> in system:nodes (the API server's Node
// authorizer limits it to its own node and pods) and kube-proxy is
// system:kube-proxy (bound to system:node-proxier by default). It also lets
// the API server's own client certificate, which the kubelet sees on
// logs and exec, use the kubelet's API.
func (n *RealNode) writeIdentities(ctx context.Context, cs kubernetes.Interface, c Cluster) error {
	ca, err := loadClientCA(n.fleet.Dir)
	if err != nil {
		return err
	}
	if err := ca.writeCertKubeconfig(n.kubeconfig("kubelet"), c.APIServer, "system:node:"+n.Name, "system:nodes"); err != nil {
		return err
	}
	if err := ca.writeCertKubeconfig(n.kubeconfig("kube-proxy"), c.APIServer, "system:kube-proxy"); err != nil {
		return err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "flotilla:" + kubeletClientU},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: kubeletClientU}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("letting the API server use the kubelet's API: %w", err)
	}
	return nil
}

func (n *RealNode) kubeconfig(component string) string {
	return filepath.Join(n.Dir, component+".kubeconfig")
}

func realNodeReady(ctx context.Context, cs kubernetes.Interface, name string) bool {
	node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady {
			return false
		}
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Stop stops the kubelet, kills the node's containers and their shims,
// stops containerd, kube-proxy (removing its iptables rules) and the
// registry, unmounts what they mounted, removes the node's cgroups and
// bridge and deletes the Node object. The node's directory (logs) stays.
func (n *RealNode) Stop(ctx context.Context) error {
	var errs []error
	// The kubelet first, or it restarts the containers killed next.
	if p, ok := n.Process("kubelet"); ok {
		errs = append(errs, p.stop(ctx, 10*time.Second))
	}
	errs = append(errs, killCgroup(n.cgroupRoot))
	for _, p := range slices.Backward(n.Processes) {
		errs = append(errs, p.stop(ctx, 10*time.Second))
	}
	err := errors.Join(n.cleanupKubeProxy(ctx), n.cleanup(ctx))
	if n.proxyLock != nil {
		_ = n.proxyLock.Close() // kube-proxy's rules are gone: another node may run one
		n.proxyLock = nil
	}
	if err != nil {
		errs = append(errs, err)
	} else if err := os.Remove(n.recordPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if i := slices.IndexFunc(n.fleet.Clusters, func(c Cluster) bool { return c.Name == n.Cluster }); i >= 0 {
		errs = append(errs, n.fleet.forget(i, n.Processes))
		if cfg, err := n.fleet.Clusters[i].RESTConfig(); err == nil {
			if cs, err := kubernetes.NewForConfig(cfg); err == nil {
				if err := cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("deleting node %s: %w", n.Name, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// cleanup removes what a node leaves on the host once its processes are
// gone: processes left in its cgroups, mounts under its directory, its
// cgroups and its bridge. It runs after ctx ended too (a test's cleanup).
func (n *RealNode) cleanup(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	errs := []error{killCgroup(n.cgroupRoot)}
	errs = append(errs, unmountUnder(n.Dir))
	errs = append(errs, removeCgroup(n.cgroupRoot))
	errs = append(errs, removeLinksInto("/var/log/containers", n.Dir), removeDeadSockets(ctx, "/run/containerd/s"))
	errs = append(errs, n.removeLoopbackRules(ctx))
	if _, err := net.InterfaceByName(n.Bridge); err == nil {
		if b, err := exec.CommandContext(ctx, "ip", "link", "delete", n.Bridge).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("deleting bridge %s: %w: %s", n.Bridge, err, b))
		}
	}
	return errors.Join(errs...)
}

// removeLinksInto removes the symbolic links in dir that point under
// target: the kubelet links every container's log in /var/log/containers (a
// path it does not let us change) and removes the link only when it removes
// the container, which a stopped node never does.
func removeLinksInto(dir, target string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if dest, err := os.Readlink(p); err == nil && strings.HasPrefix(dest, filepath.Clean(target)+"/") {
			errs = append(errs, os.Remove(p))
		}
	}
	return errors.Join(errs...)
}

// removeDeadSockets removes the sockets of dir nobody listens on: the
// containerd shims' sockets (named by a hash, under /run/containerd/s
// whatever containerd's state dir), which a killed shim leaves behind. A
// socket that refuses connections belongs to no live process, ours or not.
func removeDeadSockets(ctx context.Context, dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		if e.Type()&fs.ModeSocket == 0 {
			continue
		}
		p := filepath.Join(dir, e.Name())
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := (&net.Dialer{}).DialContext(dctx, "unix", p)
		cancel()
		if err == nil {
			_ = c.Close()
			continue
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			errs = append(errs, os.Remove(p))
		}
	}
	return errors.Join(errs...)
}
