package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestFleetGroup: a process added to the fleet's group runs in it, with
// the group's weight, and is back in the root once the group is closed.
func TestFleetGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a cgroup needs root")
	}
	g, err := newFleetGroup(2)
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if err := g.add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if got := cgroupOf(t, cmd.Process.Pid); !strings.HasSuffix(got, "/"+filepath.Base(g.dir)) {
		t.Fatalf("sleep runs in cgroup %q, want the fleet's %s", got, g.dir)
	}
	weight := "cpu.shares"
	if g.root == "/sys/fs/cgroup" {
		weight = "cpu.weight"
	}
	if data, err := os.ReadFile(filepath.Join(g.dir, weight)); err != nil || (weight == "cpu.shares" && strings.TrimSpace(string(data)) != "2") {
		t.Fatalf("the group's %s = %q, %v; want 2", weight, data, err)
	}
	g.close()
	if _, err := os.Stat(g.dir); !os.IsNotExist(err) {
		t.Fatalf("the group %s is still there after close: %v", g.dir, err)
	}
	if got := cgroupOf(t, cmd.Process.Pid); strings.Contains(got, "flotilla-bench-fleet") {
		t.Fatalf("sleep still runs in %q after close", got)
	}
}

// cgroupOf is the CPU cgroup of process pid as /proc says: cgroup v1's
// cpu hierarchy, else the unified one.
func cgroupOf(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	unified := ""
	for line := range strings.Lines(string(data)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		switch {
		case len(parts) != 3:
		case slices.Contains(strings.Split(parts[1], ","), "cpu"):
			return parts[2]
		case parts[1] == "":
			unified = parts[2]
		}
	}
	return unified
}
