package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The fleet's processes stand in for clusters on machines of their own.
// Nice alone does not keep them off flotilla's cores: the kernel weighs
// each thread, and a thousand clusters' worth of API server, etcd and
// proxy threads at nice 10 outweigh flotilla's few at nice 0 together. A
// CPU cgroup weighs the group as one: with the fleet in a group of the
// lowest weight, flotilla's threads run whenever they want a core, and
// the fleet gets what they leave (Kubernetes gives a BestEffort pod's
// cgroup cpu.shares 2 for the same reason).

// cgroupRoots are where a CPU controller is mounted: cgroup v1's cpu
// hierarchy, else the unified (v2) one.
var cgroupRoots = []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup"}

// fleetGroup is the CPU cgroup the fleet's processes run in.
type fleetGroup struct {
	root, dir string
}

// newFleetGroup makes a CPU cgroup of weight shares (cgroup v1's
// cpu.shares, 2 to 262144; on v2 cpu.weight, 1 to 10000, is set to
// shares scaled as the kernel's systemd mapping does).
func newFleetGroup(shares int) (*fleetGroup, error) {
	for _, root := range cgroupRoots {
		if _, err := os.Stat(filepath.Join(root, "cpu.shares")); err == nil {
			return makeGroup(root, "cpu.shares", strconv.Itoa(shares))
		}
		if data, err := os.ReadFile(filepath.Join(root, "cgroup.controllers")); err == nil && strings.Contains(string(data), "cpu") {
			if err := os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("+cpu"), 0o644); err != nil {
				return nil, fmt.Errorf("-fleet-cpu-shares: enabling the cpu controller under %s: %w", root, err)
			}
			return makeGroup(root, "cpu.weight", strconv.Itoa(max(1, shares*10000/262144)))
		}
	}
	return nil, errors.New("-fleet-cpu-shares: no CPU cgroup controller is mounted (cgroup v1 /sys/fs/cgroup/cpu or v2 /sys/fs/cgroup); run with -fleet-cpu-shares 0")
}

func makeGroup(root, file, value string) (*fleetGroup, error) {
	dir := filepath.Join(root, fmt.Sprintf("flotilla-bench-fleet-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("-fleet-cpu-shares: making the fleet's cgroup (needs root): %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("-fleet-cpu-shares: setting %s of %s to %s: %w", file, dir, value, err)
	}
	return &fleetGroup{root: root, dir: dir}, nil
}

// add moves the processes, every thread of them, into the group; the
// threads and processes they start later are born in it.
func (g *fleetGroup) add(pids ...int) error {
	if g == nil {
		return nil
	}
	for _, pid := range pids {
		if err := os.WriteFile(filepath.Join(g.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("moving process %d into the fleet's cgroup %s: %w", pid, g.dir, err)
		}
	}
	return nil
}

// close moves what is left in the group back to the root and removes it.
func (g *fleetGroup) close() {
	if g == nil {
		return
	}
	if data, err := os.ReadFile(filepath.Join(g.dir, "cgroup.procs")); err == nil {
		for _, pid := range strings.Fields(string(data)) {
			_ = os.WriteFile(filepath.Join(g.root, "cgroup.procs"), []byte(pid), 0o644)
		}
	}
	_ = os.Remove(g.dir)
}
