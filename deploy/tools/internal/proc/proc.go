package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Proc is a program started by [Start]: its output goes to a log file, it
// runs in its own process group (Ctrl-C reaches the tool only, which then
// stops it in order), and the kernel kills it if the tool dies without
// stopping it.
type Proc struct {
	// Name names the program in errors.
	Name string
	// Log is the path of its log file (stdout and stderr, appended).
	Log string

	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts argv with its output appended to logPath.
func Start(ctx context.Context, name, logPath string, argv ...string) (*Proc, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	// Without the tool's cancellation: on Ctrl-C the tool stops its
	// processes in order, gracefully, rather than having them killed on the
	// spot.
	cmd := exec.CommandContext(context.WithoutCancel(ctx), argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Proc{Name: name, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = logFile.Close(); close(p.done) }()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited tells whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// State says how the process ended ("exit status 1", "signal: killed"), or
// "running".
func (p *Proc) State() string {
	if !p.Exited() {
		return "running"
	}
	return p.cmd.ProcessState.String()
}

// Stop sends SIGTERM, waits up to grace, then SIGKILLs.
func (p *Proc) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}

// Kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (p *Proc) Kill() {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// WaitHTTP polls url until it answers 200, the process exits or timeout.
func (p *Proc) WaitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.Exited() {
			return fmt.Errorf("%s exited (%s):\n%s", p.Name, p.State(), Tail(p.Log, 15))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s not ready at %s after %s; log %s:\n%s", p.Name, url, timeout, p.Log, Tail(p.Log, 15))
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// FreeAddr returns a loopback address with a port nothing listens on at the
// time of the call.
func FreeAddr(ctx context.Context) (string, error) {
	l, err := Listen(ctx)
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// Listen listens on a free loopback port.
func Listen(ctx context.Context) (net.Listener, error) {
	var lc net.ListenConfig
	return lc.Listen(ctx, "tcp", "127.0.0.1:0")
}

// Tail returns the last n lines of the file at path ("" if it cannot be
// read), each cut to 2,000 bytes: a log line can quote a whole webhook.
func Tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	const window = 256 << 10
	if st, err := f.Stat(); err == nil && st.Size() > window {
		if _, err := f.Seek(st.Size()-window, io.SeekStart); err != nil {
			return ""
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		if len(l) > 2000 {
			lines[i] = l[:2000] + "..."
		}
	}
	return strings.Join(lines, "\n")
}
