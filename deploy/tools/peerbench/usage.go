package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// usage is what a tool's processes used: CPU time (user + system) and the
// peak resident memory (VmHWM) of each, summed.
type usage struct {
	what    string
	procs   int
	cpu     time.Duration
	peakMiB float64
}

func (b *bench) usage() []usage {
	var out []usage
	for _, s := range b.subs {
		if f, ok := b.flot[s.ns]; ok && f.p != nil {
			out = append(out, procUsage("flotilla ("+s.ns+")", f.p.Pid()))
		}
	}
	var pids []int
	for _, k := range b.keels {
		pids = append(pids, k.Pid())
	}
	out = append(out, procUsage("Keel (one per cluster, webhook and polling subjects)", pids...))
	if len(b.flux) > 0 {
		out = append(out, procUsage("Flux (5 controllers per cluster, webhook and polling subjects)", b.fluxPIDs()...))
	}
	return out
}

func procUsage(what string, pids ...int) usage {
	u := usage{what: what, procs: len(pids)}
	for _, pid := range pids {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			s := string(b)
			f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
			if len(f) > 12 {
				ut, _ := strconv.ParseInt(f[11], 10, 64)
				st, _ := strconv.ParseInt(f[12], 10, 64)
				u.cpu += time.Duration(ut+st) * time.Second / 100 // USER_HZ
			}
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
					kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
					u.peakMiB += kb / 1024
				}
			}
		}
	}
	return u
}

// subtractUsage gives the CPU used between two readings (the peak stays the
// later one's: a high-water mark).
func subtractUsage(after, before []usage) []usage {
	out := make([]usage, len(after))
	for i, a := range after {
		out[i] = a
		if i < len(before) {
			out[i].cpu -= before[i].cpu
		}
	}
	return out
}
