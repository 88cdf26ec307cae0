package localfleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// loopbackToHost makes the host's loopback servers reachable at the
// node's address (RealNodeOptions.HostLoopback): route_localnet on the
// bridge, so the kernel routes a packet from a pod to 127.0.0.1 and
// answers it, and two DNAT rules, for the pods' packets (PREROUTING, from
// the bridge) and the host's (OUTPUT), leaving the kubelet's own port
// alone. The rules carry the bridge's name in a comment, by which cleanup
// (and the next run's, after a crash) removes them.
func (n *RealNode) loopbackToHost(ctx context.Context) error {
	sysctl := "/proc/sys/net/ipv4/conf/" + n.Bridge + "/route_localnet"
	if err := os.WriteFile(sysctl, []byte("1"), 0o644); err != nil {
		return fmt.Errorf("setting route_localnet on %s: %w", n.Bridge, err)
	}
	kubelet := strconv.Itoa(n.KubeletPort)
	for _, rule := range [][]string{
		{"PREROUTING", "-i", n.Bridge},
		{"OUTPUT"},
	} {
		args := append([]string{"-w", "-t", "nat", "-A"}, rule...)
		args = append(args, "-d", n.Gateway+"/32", "-p", "tcp", "!", "--dport", kubelet,
			"-m", "comment", "--comment", n.loopbackComment(), "-j", "DNAT", "--to-destination", "127.0.0.1")
		if b, err := exec.CommandContext(ctx, "iptables", args...).CombinedOutput(); err != nil {
			return errors.Join(fmt.Errorf("iptables %v: %w: %s", args, err, b), n.removeLoopbackRules(ctx))
		}
	}
	return nil
}

func (n *RealNode) loopbackComment() string { return "flotilla-host-loopback-" + n.Bridge }

// removeLoopbackRules deletes the nat rules loopbackToHost added, found by
// their comment (none is fine). route_localnet goes with the bridge.
func (n *RealNode) removeLoopbackRules(ctx context.Context) error {
	if n.Bridge == "" {
		return nil
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil // a host without iptables never had the rules
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "iptables", "-w", "-t", "nat", "-S").Output()
	if err != nil {
		return fmt.Errorf("listing nat rules: %w", err)
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, "-A ") || !strings.Contains(line, n.loopbackComment()) {
			continue
		}
		// -S prints a rule as the -A that made it; -D takes the same words.
		args := append([]string{"-w", "-t", "nat", "-D"}, strings.Fields(strings.TrimPrefix(line, "-A "))...)
		for i, a := range args {
			args[i] = strings.Trim(a, `"`)
		}
		if b, err := exec.CommandContext(ctx, "iptables", args...).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("iptables %v: %w: %s", args, err, b))
		}
	}
	return errors.Join(errs...)
}
