package charttest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ProcessListening finds the process of `flotilla serve` whose --listen
// names port (the chart's container listens on 0.0.0.0:<service.port>),
// seen from the host.
func ProcessListening(port int) (int, error) {
	want := fmt.Sprintf("--listen=0.0.0.0:%d", port)
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("listing processes: %w", err)
	}
	for _, e := range dirs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if slices.Contains(args, "serve") && slices.Contains(args, want) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no process runs flotilla serve %s", want)
}

// ProcMemory is a process's resident memory in bytes, as /proc/<pid>/status
// reports it: VmRSS is RssAnon (its heap and stacks) plus RssFile (mapped
// files: a static binary's text) plus RssShmem.
type ProcMemory struct {
	VmRSS, RssAnon, RssFile int64
}

// ReadProcMemory reads the process's resident memory from /proc.
func ReadProcMemory(pid int) (ProcMemory, error) {
	var m ProcMemory
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m, fmt.Errorf("reading the status of process %d: %w", pid, err)
	}
	fields := map[string]*int64{"VmRSS:": &m.VmRSS, "RssAnon:": &m.RssAnon, "RssFile:": &m.RssFile}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line) // "VmRSS: <n> kB"
		if len(f) < 2 || fields[f[0]] == nil {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return m, fmt.Errorf("parsing %q of process %d: %w", line, pid, err)
		}
		*fields[f[0]] = kb << 10
	}
	if m.VmRSS == 0 {
		return m, fmt.Errorf("process %d has no VmRSS", pid)
	}
	return m, nil
}

// CgroupMemory is the memory of a process's cgroup (v1, the hosts the real
// node runs on), as the kubelet computes its container stats from it.
type CgroupMemory struct {
	// RSS is memory.stat's total_rss: the kubelet's rssBytes.
	RSS int64
	// WorkingSet is memory.usage_in_bytes less total_inactive_file: the
	// kubelet's workingSetBytes, what it evicts and OOM-ranks by.
	WorkingSet int64
}

// ReadCgroupMemory reads the memory cgroup (v1) of the process from
// /sys/fs/cgroup/memory.
func ReadCgroupMemory(pid int) (CgroupMemory, error) {
	var m CgroupMemory
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return m, fmt.Errorf("reading the cgroups of process %d: %w", pid, err)
	}
	var dir string
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "memory") {
			dir = filepath.Join("/sys/fs/cgroup/memory", f[2])
		}
	}
	if dir == "" {
		return m, fmt.Errorf("process %d has no memory cgroup (v1)", pid)
	}
	usage, err := readInt(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		return m, err
	}
	stat, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return m, fmt.Errorf("reading memory.stat: %w", err)
	}
	var inactive int64
	for line := range strings.SplitSeq(string(stat), "\n") {
		k, v, _ := strings.Cut(line, " ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "total_rss":
			m.RSS = n
		case "total_inactive_file":
			inactive = n
		}
	}
	m.WorkingSet = max(0, usage-inactive)
	return m, nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing %s: %w", path, err)
	}
	return n, nil
}
