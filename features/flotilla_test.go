package features

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// flotillaBin is the flotilla binary the features run, built once by TestMain.
var flotillaBin string

// buildFlotilla builds the binary from this module into dir.
func buildFlotilla(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "flotilla")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/flotilla-cd/flotilla")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building flotilla: %w", err)
	}
	return bin, nil
}

// flotillaProcess is one `flotilla serve` run by a scenario, or, in
// scale-out mode, the scenario's replicas behind one address.
type flotillaProcess struct {
	config, listen, logPath string
	// args are more flags; env more environment variables.
	args, env []string
	// replicas, when set, are the scale-out replicas this stands for,
	// reached through proxy at listen.
	replicas []*flotillaProcess
	proxy    *replicaProxy

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *flotillaProcess) url() string { return "http://" + p.listen }

// start runs `flotilla serve` and waits until /readyz answers; replicas
// all start at once, behind their proxy.
func (p *flotillaProcess) start(ctx context.Context) error {
	if p.replicas != nil {
		return p.startReplicas(ctx)
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// The process outlives this step: stop and kill end it, not ctx.
	args := append([]string{"serve", "--config", p.config, "--listen", p.listen, "--log-level", "debug"}, p.args...)
	cmd := exec.CommandContext(context.WithoutCancel(ctx), flotillaBin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), p.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting flotilla: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logFile.Close(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	// A replica's start waits out a NATS stream's leader election (its
	// own retries run 20 s) on a loaded machine: 90 s, not 30.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case <-done:
			return false, fmt.Errorf("flotilla exited:\n%s", tail(p.logPath, 20))
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url()+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for flotilla to be ready: %w", err)
	}
	return nil
}

// kill sends SIGKILL and waits for the process (every replica) to be gone.
func (p *flotillaProcess) kill() error {
	if p.replicas != nil {
		for _, r := range p.replicas {
			if err := r.kill(); err != nil {
				return err
			}
		}
		return nil
	}
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !strings.Contains(err.Error(), "finished") {
		return err
	}
	<-done
	return nil
}

// stop ends the process (every replica) gracefully (SIGTERM), then kills it.
func (p *flotillaProcess) stop() {
	if p.replicas != nil {
		var wg sync.WaitGroup
		for _, r := range p.replicas {
			wg.Go(r.stop)
		}
		wg.Wait()
		return
	}
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.kill()
	}
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
