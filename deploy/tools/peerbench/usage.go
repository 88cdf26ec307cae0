package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// What a tool's processes use is read from /proc, for the processes the
// bench started for that tool (every Keel, every Flux controller, each
// flotilla subject's own `flotilla serve`: flotilla runs as a process of its
// own, not in the bench's): CPU time from /proc/PID/stat and the peak
// resident memory from /proc/PID/status's VmHWM, which writing "5" to
// /proc/PID/clear_refs resets to the current RSS (Linux 4.0 on), so that a
// peak is that of one window of the run.

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// procSample is one reading of one process: its CPU time (user + system,
// and that of the children it waited for) and its peak RSS since the last
// reset.
type procSample struct {
	cpu    time.Duration
	hwmKiB int64
}

// parseStat reads the CPU time of /proc/PID/stat: utime, stime, cutime and
// cstime (fields 14 to 17), counted after the command's closing
// parenthesis, since the command itself may hold spaces and parentheses.
func parseStat(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("reading /proc stat %q: no command", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime, field 14, is f[11].
	if len(f) < 15 {
		return 0, fmt.Errorf("reading /proc stat: %d fields after the command, want 15 or more", len(f))
	}
	var ticks int64
	for _, s := range f[11:15] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("reading /proc stat's times: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// parseHWM reads VmHWM (KiB) of /proc/PID/status.
func parseHWM(status string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		v, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("reading VmHWM: %w", err)
		}
		return n, nil
	}
	return 0, fmt.Errorf("no VmHWM in /proc status")
}

// readProc reads one process; a process that has exited reads as zero.
func readProc(pid int) procSample {
	var s procSample
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		s.cpu, _ = parseStat(string(b))
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		s.hwmKiB, _ = parseHWM(string(b))
	}
	return s
}

// resetPeak makes the process's VmHWM its current RSS.
func resetPeak(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// meter reads the bench's processes and keeps each one's peak over the
// whole run, across the resets of the windows.
type meter struct {
	peakKiB map[int]int64 // pid -> highest VmHWM read
}

func newMeter() *meter { return &meter{peakKiB: map[int]int64{}} }

// read reads the processes, remembering their peaks.
func (m *meter) read(pids []int) map[int]procSample {
	out := make(map[int]procSample, len(pids))
	for _, pid := range pids {
		s := readProc(pid)
		out[pid] = s
		m.peakKiB[pid] = max(m.peakKiB[pid], s.hwmKiB)
	}
	return out
}

// window is the reading of a tool's processes at the start of one of its
// pushes, their peaks just reset.
type window struct {
	pids   []int
	before map[int]procSample
}

// open reads the processes (keeping the peaks so far) and resets their
// peaks: what close reads is this window's.
func (m *meter) open(pids []int) (window, error) {
	before := m.read(pids)
	for _, pid := range pids {
		if err := resetPeak(pid); err != nil {
			return window{}, fmt.Errorf("resetting the peak RSS of process %d: %w", pid, err)
		}
	}
	return window{pids: pids, before: before}, nil
}

// close reads the processes again and returns the CPU they used in the
// window and the sum of their peaks in it.
func (m *meter) close(w window) (time.Duration, int64) {
	return usedIn(w.before, m.read(w.pids))
}

// usedIn is the CPU used between two readings of the same processes and
// the sum of the later reading's peaks.
func usedIn(before, after map[int]procSample) (time.Duration, int64) {
	var cpu time.Duration
	var peak int64
	for pid, a := range after {
		cpu += a.cpu - before[pid].cpu
		peak += a.hwmKiB
	}
	return cpu, peak
}

// usage is what a group of processes used over the whole run.
type usage struct {
	what    string
	procs   int
	cpu     time.Duration
	peakMiB float64
}

// group is a set of the bench's processes, named for the report.
type group struct {
	what string
	pids []int
}

// groups are the processes of every tool: each flotilla subject's, every
// Keel, every Flux controller.
func (b *bench) groups() []group {
	var out []group
	for _, s := range b.subs {
		if f, ok := b.flot[s.ns]; ok && f.p != nil {
			out = append(out, group{"flotilla (" + s.ns + ")", []int{f.p.Pid()}})
		}
	}
	out = append(out, group{"Keel (one per cluster, webhook and polling subjects)", b.keelPIDs()})
	if len(b.flux) > 0 {
		out = append(out, group{"Flux (5 controllers per cluster, webhook and polling subjects; also applying Kargo's commits)", b.fluxPIDs()})
	}
	if b.kargo != nil {
		out = append(out, group{"Kargo (its control plane's 4 processes, on c1; webhook and polling subjects)", b.kargo.pids()})
	}
	return out
}

// pidsOf are the processes of the subject's tool: its own flotilla, or
// every Keel, or every Flux controller (a peer's webhook and polling
// subjects share them).
func (b *bench) pidsOf(s *subject) []int {
	switch s.tool {
	case "flotilla":
		if f, ok := b.flot[s.ns]; ok && f.p != nil {
			return []int{f.p.Pid()}
		}
	case "keel":
		return b.keelPIDs()
	case "flux":
		return b.fluxPIDs()
	case "kargo":
		if b.kargo != nil {
			return b.kargo.pids()
		}
	}
	return nil
}

func (b *bench) keelPIDs() []int {
	var pids []int
	for _, k := range b.keels {
		pids = append(pids, k.Pid())
	}
	return pids
}

// cpuOf reads every group's CPU time.
func (b *bench) cpuOf() map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, g := range b.groups() {
		for _, s := range b.meter.read(g.pids) {
			out[g.what] += s.cpu
		}
	}
	return out
}

// wholeRun is every group's CPU since the reading before, and its peak
// RSS over the whole run (the sum of its processes' peaks).
func (b *bench) wholeRun(before map[string]time.Duration) []usage {
	after := b.cpuOf()
	var out []usage
	for _, g := range b.groups() {
		var kib int64
		for _, pid := range g.pids {
			kib += b.meter.peakKiB[pid]
		}
		out = append(out, usage{what: g.what, procs: len(g.pids), cpu: after[g.what] - before[g.what], peakMiB: float64(kib) / 1024})
	}
	return out
}

// spend is what a subject's tool used during the subject's own measured
// pushes: from each push to the end of the pause after every primary ran
// it.
type spend struct {
	pushes int
	cpu    time.Duration
	// perPush is the median CPU of one push.
	perPush time.Duration
	// peakMiB is the highest of the pushes' peaks (each the sum of the
	// processes' peaks in that push).
	peakMiB float64
}

// spendOf sums the subject's measured pushes.
func spendOf(ms []measure, subject string) spend {
	var sp spend
	var cpus []time.Duration
	for _, m := range ms {
		if m.subject != subject {
			continue
		}
		sp.pushes++
		sp.cpu += m.cpu
		cpus = append(cpus, m.cpu)
		sp.peakMiB = max(sp.peakMiB, float64(m.peakKiB)/1024)
	}
	sp.perPush = statsOf(cpus).median
	return sp
}
