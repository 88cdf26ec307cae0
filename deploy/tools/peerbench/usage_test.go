package main

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name    string
		stat    string
		want    time.Duration
		wantErr bool
	}{
		// utime 250, stime 50, cutime 7, cstime 3 ticks: 3.1 s.
		{"plain", "4242 (keel-0.22.1) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 50 7 3 20 0 12 0 100 800000000 9000 18446744073709551615",
			3100 * time.Millisecond, false},
		{"a command with spaces and parentheses", "77 (a (b) c) R 1 77 77 0 -1 0 0 0 0 0 100 0 0 0 20 0 1 0 5 1 1 1",
			time.Second, false},
		{"cut short", "77 (x) R 1 77 77 0 -1 0 0 0 0 0 100", 0, true},
		{"no command", "garbage", 0, true},
		{"not a number", "77 (x) R 1 77 77 0 -1 0 0 0 0 0 1x 0 0 0 20", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat(tt.stat)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseStat error = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parseStat = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestParseHWM(t *testing.T) {
	tests := []struct {
		name    string
		status  string
		want    int64
		wantErr bool
	}{
		{"status", "Name:\tkeel\nVmPeak:\t 1000 kB\nVmHWM:\t   52344 kB\nVmRSS:\t   40000 kB\n", 52344, false},
		{"none (a kernel thread)", "Name:\tkthreadd\nState:\tS\n", 0, true},
		{"garbled", "VmHWM:\tmany kB\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseHWM(tt.status)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseHWM error = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parseHWM = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestUsedIn(t *testing.T) {
	before := map[int]procSample{1: {cpu: time.Second, hwmKiB: 900}, 2: {cpu: 2 * time.Second, hwmKiB: 50}}
	after := map[int]procSample{1: {cpu: 1500 * time.Millisecond, hwmKiB: 100}, 2: {cpu: 4 * time.Second, hwmKiB: 60}}
	cpu, peak := usedIn(before, after)
	// The peaks are the later reading's: the window reset them.
	if cpu != 2500*time.Millisecond || peak != 160 {
		t.Errorf("usedIn = %s, %d KiB; want 2.5s, 160 KiB", cpu, peak)
	}
}

func TestSpendOf(t *testing.T) {
	ms := []measure{
		{subject: "keel", cpu: 300 * time.Millisecond, peakKiB: 1024 * 30},
		{subject: "flotilla", cpu: 50 * time.Millisecond, peakKiB: 1024 * 80},
		{subject: "keel", cpu: 100 * time.Millisecond, peakKiB: 1024 * 40},
		{subject: "keel", cpu: 200 * time.Millisecond, peakKiB: 1024 * 35},
	}
	tests := []struct {
		subject string
		want    spend
	}{
		{"keel", spend{pushes: 3, cpu: 600 * time.Millisecond, perPush: 200 * time.Millisecond, peakMiB: 40}},
		{"flotilla", spend{pushes: 1, cpu: 50 * time.Millisecond, perPush: 50 * time.Millisecond, peakMiB: 80}},
		{"flux", spend{}},
	}
	for _, tt := range tests {
		t.Run(tt.subject, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, spendOf(ms, tt.subject), cmp.AllowUnexported(spend{})); diff != "" {
				t.Errorf("spendOf (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMeterWindow reads this test's own process: a window's CPU is what it
// burned in the window, its peak at least what it holds, and the run's peak
// survives the window's reset.
func TestMeterWindow(t *testing.T) {
	pid := os.Getpid()
	m := newMeter()
	ballast := make([]byte, 64<<20)
	for i := range ballast {
		ballast[i] = 1
	}
	w, err := m.open([]int{pid})
	if err != nil {
		t.Fatal(err)
	}
	runPeak := m.peakKiB[pid]
	if runPeak < 64<<10 {
		t.Fatalf("peak before the window = %d KiB, want >= 64 MiB (the ballast)", runPeak)
	}
	// Spin until the kernel's other account of this process (getrusage)
	// says 300ms more CPU were used: the machine may be loaded.
	start := rusageCPU(t)
	for deadline := time.Now().Add(time.Minute); rusageCPU(t)-start < 300*time.Millisecond && time.Now().Before(deadline); {
	}
	cpu, peak := m.close(w)
	if used := rusageCPU(t) - start; cpu < used-50*time.Millisecond || cpu > used+time.Second {
		t.Errorf("window CPU = %s, getrusage says %s", cpu, used)
	}
	if peak <= 0 || m.peakKiB[pid] < runPeak {
		t.Errorf("window peak %d KiB, run peak %d KiB (was %d)", peak, m.peakKiB[pid], runPeak)
	}
	_ = ballast[len(ballast)-1]
}

func rusageCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
