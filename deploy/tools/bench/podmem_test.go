package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/testkit/charttest"
)

// Each phase's row has the median and the peak of its own samples only,
// and counts the kubelet's distinct readings, not the reads of them.
func TestPhaseRows(t *testing.T) {
	const mib = 1 << 20
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	sample := func(phase string, vm, kubelet int64, at time.Time) memSample {
		return memSample{phase: phase, proc: charttest.ProcMemory{VmRSS: vm * mib, RssAnon: vm / 2 * mib},
			cgroup: charttest.CgroupMemory{RSS: kubelet * mib, WorkingSet: kubelet * mib}, kubeletRSS: kubelet * mib, kubeletWS: kubelet * mib, kubeletAt: at}
	}
	samples := []memSample{
		sample("idle", 80, 20, t0), sample("idle", 82, 20, t0),
		sample("busy", 100, 40, t0.Add(time.Second)), sample("busy", 140, 60, t0.Add(2*time.Second)), sample("busy", 120, 60, t0.Add(2*time.Second)),
	}
	got := phaseRows(samples, []string{"idle", "busy"}, map[string]time.Duration{"busy": time.Minute})
	want := []phaseRow{
		{phase: "idle", samples: 2, vmRSS: memStats{82, 82}, anon: memStats{41, 41}, cgRSS: memStats{20, 20}, cgWS: memStats{20, 20}, kubeRSS: memStats{20, 20}, kubeWS: memStats{20, 20}, kubeletDistinct: 1},
		{phase: "busy", took: time.Minute, samples: 3, vmRSS: memStats{120, 140}, anon: memStats{60, 70}, cgRSS: memStats{60, 60}, cgWS: memStats{60, 60}, kubeRSS: memStats{60, 60}, kubeWS: memStats{60, 60}, kubeletDistinct: 2},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(phaseRow{}, memStats{})); diff != "" {
		t.Errorf("phaseRows (-want +got):\n%s", diff)
	}
}
