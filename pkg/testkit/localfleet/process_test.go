package localfleet

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

func TestProcess_stop(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("no sleep binary: %v", err)
	}
	tests := []struct {
		name        string
		recordedBin func(real string) string
		wantStopped bool
	}{
		{name: "own process is stopped", recordedBin: func(real string) string { return real }, wantStopped: true},
		// A recycled PID now runs another program: stop must leave it alone.
		{name: "foreign process is left alone", recordedBin: func(string) string { return "/usr/bin/not-ours" }, wantStopped: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := startProcess(t.Context(), t.TempDir(), "sleeper", sleep, []string{"60"}, nil, true)
			if err != nil {
				t.Fatal(err)
			}
			real := p
			t.Cleanup(func() { _ = real.stop(context.Background(), time.Second) })
			if !p.running() {
				t.Fatal("started process is not running")
			}
			p.Bin = tt.recordedBin(p.Bin)
			if err := p.stop(context.Background(), 5*time.Second); err != nil {
				t.Fatal(err)
			}
			if stopped := !real.running(); stopped != tt.wantStopped {
				t.Errorf("stopped = %v, want %v", stopped, tt.wantStopped)
			}
		})
	}
}

func TestProcess_stopEscalatesToKill(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	// The shell ignores SIGTERM, so only SIGKILL after the grace period ends it.
	p, err := startProcess(t.Context(), t.TempDir(), "stubborn", sh, []string{"-c", "trap '' TERM; while :; do sleep 0.05; done"}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.stop(context.Background(), 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.running() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if p.running() {
		t.Fatal("process survived SIGKILL")
	}
}

func TestFreePorts(t *testing.T) {
	ports, err := freePorts(t.Context(), 20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("bad or repeated port %d in %v", p, ports)
		}
		seen[p] = true
	}
}
