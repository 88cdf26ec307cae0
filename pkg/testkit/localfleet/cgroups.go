package localfleet

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupV1Mounts lists the mount points of the host's cgroup v1 hierarchies.
func cgroupV1Mounts() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	defer func() { _ = f.Close() }()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID parent major:minor root mountpoint options [optional...] - fstype source super
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 0 || sep+1 >= len(fields) || len(fields) < 5 {
			continue
		}
		if fields[sep+1] == "cgroup" {
			out = append(out, fields[4])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	return out, nil
}

// createCgroupRoot makes the node's cgroup in every hierarchy: the kubelet
// puts its pods under it (cgroupRoot) and refuses a root that does not exist,
// and the shims go there too, so Stop finds every process of the node.
func (n *RealNode) createCgroupRoot() error {
	mounts, err := cgroupV1Mounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		for _, dir := range []string{filepath.Join(m, n.cgroupRoot), filepath.Join(m, n.cgroupRoot, "shims")} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("creating cgroup: %w", err)
			}
			if err := inheritCpuset(dir); err != nil {
				return err
			}
		}
	}
	return nil
}

// inheritCpuset gives a new cgroup v1 cpuset its parent's CPUs and memory
// nodes: a cpuset starts with none, and a process cannot join it (ENOSPC)
// until both are set.
func inheritCpuset(dir string) error {
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
		if errors.Is(err, fs.ErrNotExist) {
			return nil // not the cpuset hierarchy
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", f, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return fmt.Errorf("writing %s of %s: %w", f, dir, err)
		}
	}
	return nil
}

// killCgroup SIGKILLs every process in the cgroup tree root of every
// hierarchy, until none is left or 10 s have passed.
func killCgroup(root string) error {
	mounts, err := cgroupV1Mounts()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var pids []int
		for _, m := range mounts {
			pids = append(pids, cgroupPids(filepath.Join(m, root))...)
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still in cgroup %s", pids, root)
		}
		for _, pid := range pids {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("killing pid %d of cgroup %s: %w", pid, root, err)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func cgroupPids(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// removeCgroup removes the cgroup tree root of every hierarchy, deepest
// first (a cgroup is removed with rmdir once it has no children and no
// processes).
func removeCgroup(root string) error {
	mounts, err := cgroupV1Mounts()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(m, root), func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for _, d := range slices.Backward(dirs) {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// unmountUnder unmounts every mount point under dir, deepest first: the
// overlay root filesystems, network namespaces and volumes of the node.
func unmountUnder(dir string) error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("reading mounts: %w", err)
	}
	prefix := filepath.Clean(dir) + "/"
	var points []string
	for line := range strings.Lines(string(b)) {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		// Octal escapes (\040 for a space) do not occur in our paths.
		if p := fields[4]; strings.HasPrefix(p, prefix) || p == filepath.Clean(dir) {
			points = append(points, p)
		}
	}
	slices.SortFunc(points, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}
