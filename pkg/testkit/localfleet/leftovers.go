package localfleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// leftoversDir holds a record of every real node of this host (a file
// each, on tmpfs), so what a crashed run leaves behind is removed later:
// containers and their shims (which outlive containerd by design), mounts,
// cgroups, the bridge and kube-proxy's iptables rules. StartRealNode removes
// those of nodes whose owner and containerd are both gone, Fleet.Down those
// of its own nodes.
const leftoversDir = "/run/flotilla/realnodes"

type nodeRecord struct {
	Name          string   `json:"name"`
	Dir           string   `json:"dir"`
	Bridge        string   `json:"bridge"`
	CgroupRoot    string   `json:"cgroupRoot"`
	KubeProxy     string   `json:"kubeProxy,omitempty"`
	KubeFirewalls []string `json:"kubeFirewalls,omitempty"`
	// Owner is the process that started the node, Containerd its containerd.
	Owner      Process `json:"owner"`
	Containerd Process `json:"containerd"`
}

func (n *RealNode) recordPath() string {
	return filepath.Join(leftoversDir, strings.TrimPrefix(n.cgroupRoot, "/")+".json")
}

// saveRecord writes (or rewrites, as the node grows) the node's record.
func (n *RealNode) saveRecord() error {
	self, err := os.ReadFile("/proc/self/cmdline")
	if err != nil {
		return fmt.Errorf("reading own command line: %w", err)
	}
	argv0, _, _ := bytes.Cut(self, []byte{0})
	r := nodeRecord{
		Name: n.Name, Dir: n.Dir, Bridge: n.Bridge, CgroupRoot: n.cgroupRoot,
		KubeProxy: n.kubeProxy, KubeFirewalls: n.kubeFirewalls,
		Owner: Process{Name: "owner", Bin: string(argv0), PID: os.Getpid()},
	}
	for _, p := range n.Processes {
		if p.Name == n.Name+"-containerd" {
			r.Containerd = p
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding the node's record: %w", err)
	}
	if err := os.MkdirAll(leftoversDir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", leftoversDir, err)
	}
	tmp := n.recordPath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("writing the node's record: %w", err)
	}
	if err := os.Rename(tmp, n.recordPath()); err != nil {
		return fmt.Errorf("writing the node's record: %w", err)
	}
	return nil
}

// reapNodes cleans up after the recorded nodes whose containerd is gone:
// those under dir (a fleet's directory), or, with dir "", those whose owner
// is gone too.
func reapNodes(ctx context.Context, dir string) error {
	paths, err := filepath.Glob(filepath.Join(leftoversDir, "*.json"))
	if err != nil {
		return fmt.Errorf("listing node records: %w", err)
	}
	var errs []error
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // removed by another process meanwhile
		}
		var r nodeRecord
		if err := json.Unmarshal(b, &r); err != nil {
			errs = append(errs, fmt.Errorf("decoding %s: %w", path, err))
			continue
		}
		if r.Containerd.running() {
			continue
		}
		if dir != "" && !strings.HasPrefix(r.Dir, filepath.Clean(dir)+"/") {
			continue
		}
		if dir == "" && r.Owner.running() {
			continue
		}
		n := &RealNode{Name: r.Name, Dir: r.Dir, Bridge: r.Bridge, cgroupRoot: r.CgroupRoot, kubeProxy: r.KubeProxy, kubeFirewalls: r.KubeFirewalls}
		if n.kubeProxy != "" {
			// A live node's kube-proxy owns the chains now: leave them to it.
			lock, err := lockKubeProxy(ctx, false)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if lock == nil {
				n.kubeProxy, n.kubeFirewalls = "", nil
			} else {
				defer func() { _ = lock.Close() }()
			}
		}
		if err := errors.Join(n.cleanupKubeProxy(ctx), n.cleanup(ctx)); err != nil {
			errs = append(errs, fmt.Errorf("cleaning up after node %s (%s): %w", r.Name, r.Dir, err))
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
