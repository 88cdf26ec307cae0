package localfleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Process is one program the fleet started.
type Process struct {
	Name string   `json:"name"`
	Bin  string   `json:"bin"`
	Args []string `json:"args"`
	PID  int      `json:"pid"`
	Log  string   `json:"log"`
}

// startProcess runs bin in its own process group with output appended to
// dir/logs/name.log. With dieWithParent the kernel kills it when the starting
// process dies, so a crashed test run leaves nothing behind. The process
// outlives ctx: ctx is not used to kill it, only Process.stop does.
func startProcess(ctx context.Context, dir, name, bin string, args, env []string, dieWithParent bool) (Process, error) {
	return startWrappedProcess(ctx, dir, name, bin, nil, args, env, dieWithParent)
}

// startWrappedProcess is startProcess through a wrapper command that ends by
// exec-ing bin with args (such as unshare, to run bin in namespaces of its
// own): the process keeps its PID and is recognized by bin.
func startWrappedProcess(ctx context.Context, dir, name, bin string, wrapper, args, env []string, dieWithParent bool) (Process, error) {
	logPath := filepath.Join(dir, "logs", name+".log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return Process{}, fmt.Errorf("creating log dir: %w", err)
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return Process{}, fmt.Errorf("opening log of %s: %w", name, err)
	}
	// The child holds its own descriptor of the log; ours is only closed.
	defer func() { _ = logFile.Close() }()
	argv := append(append(slices.Clone(wrapper), bin), args...)
	cmd := exec.CommandContext(context.WithoutCancel(ctx), argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if dieWithParent {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return Process{}, fmt.Errorf("starting %s: %w", name, err)
	}
	// Reap the child when it exits so it does not linger as a zombie while this
	// process lives; a process that outlives us is reparented to init.
	go func() { _ = cmd.Wait() }()
	p := Process{Name: name, Bin: bin, Args: args, PID: cmd.Process.Pid, Log: logPath}
	// Start returns once execve has begun, but the kernel fills in the new
	// command line a moment later (later still after a wrapper); until then
	// running() cannot recognize p.
	wait := 2 * time.Second
	if len(wrapper) > 0 {
		wait = 10 * time.Second
	}
	for deadline := time.Now().Add(wait); !p.running() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	return p, nil
}

// running tells whether the PID is alive and still runs this process's binary
// (PIDs wrap, so a bare PID may belong to somebody else by now).
func (p Process) running() bool {
	if p.PID <= 0 {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
	if err != nil {
		return false
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	if string(argv0) != p.Bin {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID))
	if err != nil {
		return false
	}
	// A zombie has exited; only its parent has not reaped it yet.
	if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false
	}
	return true
}

// stop sends SIGTERM, waits up to grace for the process to exit, then SIGKILLs it.
func (p Process) stop(ctx context.Context, grace time.Duration) error {
	if !p.running() {
		return nil
	}
	if err := syscall.Kill(p.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stopping %s (pid %d): %w", p.Name, p.PID, err)
	}
	deadline := time.Now().Add(grace)
	for p.running() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("killing %s (pid %d): %w", p.Name, p.PID, err)
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// Tail returns the last n lines of the process's log, for error messages.
func (p Process) Tail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
