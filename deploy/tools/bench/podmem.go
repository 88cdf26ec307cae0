package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-cd/flotilla/pkg/testkit/charttest"
)

// memSample is one reading of the pod's memory, in bytes: its process's
// resident memory, its cgroup's numbers as the kubelet computes them (read
// from the host's cgroup files at once), and the kubelet's own summary
// (whose numbers change only when the kubelet reads the cgroup again).
type memSample struct {
	at     time.Time
	phase  string
	proc   charttest.ProcMemory
	cgroup charttest.CgroupMemory
	// kubeletRSS and kubeletWS are the container's memory.rssBytes and
	// workingSetBytes in GET /api/v1/nodes/<node>/proxy/stats/summary,
	// of kubeletAt; zero when the read failed.
	kubeletRSS, kubeletWS int64
	kubeletAt             time.Time
}

// memSampler reads the pod's memory every interval until stopped, each
// reading labelled with the phase set last.
type memSampler struct {
	kube              kubernetes.Interface
	node, ns, podName string
	pid               int

	mu      sync.Mutex
	phase   string
	samples []memSample
	errs    int
	stopped chan struct{}
	done    chan struct{}
}

func startMemSampler(ctx context.Context, every time.Duration, kube kubernetes.Interface, node, ns, podName string, pid int) *memSampler {
	m := &memSampler{kube: kube, node: node, ns: ns, podName: podName, pid: pid, phase: "idle before", stopped: make(chan struct{}), done: make(chan struct{})}
	go m.loop(ctx, every)
	return m
}

func (m *memSampler) loop(ctx context.Context, every time.Duration) {
	defer close(m.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		m.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-m.stopped:
			return
		case <-tick.C:
		}
	}
}

func (m *memSampler) sample(ctx context.Context) {
	s := memSample{at: time.Now()}
	var err error
	if s.proc, err = charttest.ReadProcMemory(m.pid); err == nil {
		s.cgroup, err = charttest.ReadCgroupMemory(m.pid)
	}
	kctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if kerr := m.readKubelet(kctx, &s); kerr != nil && err == nil {
		err = kerr
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.errs++
	}
	if s.proc.VmRSS > 0 {
		s.phase = m.phase
		m.samples = append(m.samples, s)
	}
}

// summary is what the bench reads of the kubelet's stats summary.
type summary struct {
	Pods []struct {
		PodRef struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"podRef"`
		Containers []struct {
			Name   string `json:"name"`
			Memory *struct {
				Time            time.Time `json:"time"`
				RSSBytes        *int64    `json:"rssBytes"`
				WorkingSetBytes *int64    `json:"workingSetBytes"`
			} `json:"memory"`
		} `json:"containers"`
	} `json:"pods"`
}

// readKubelet reads flotilla's container's memory from the kubelet's
// stats summary, through the cluster's API server.
func (m *memSampler) readKubelet(ctx context.Context, s *memSample) error {
	raw, err := m.kube.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", m.node, "proxy", "stats", "summary").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("reading the kubelet's stats summary: %w", err)
	}
	var sum summary
	if err := json.Unmarshal(raw, &sum); err != nil {
		return fmt.Errorf("decoding the kubelet's stats summary: %w", err)
	}
	for _, p := range sum.Pods {
		if p.PodRef.Namespace != m.ns || p.PodRef.Name != m.podName {
			continue
		}
		for _, c := range p.Containers {
			if c.Name != "flotilla" || c.Memory == nil || c.Memory.RSSBytes == nil || c.Memory.WorkingSetBytes == nil {
				continue
			}
			s.kubeletRSS, s.kubeletWS, s.kubeletAt = *c.Memory.RSSBytes, *c.Memory.WorkingSetBytes, c.Memory.Time
			return nil
		}
	}
	return fmt.Errorf("no memory of container flotilla of %s/%s in the kubelet's summary", m.ns, m.podName)
}

func (m *memSampler) setPhase(p string) {
	m.mu.Lock()
	m.phase = p
	m.mu.Unlock()
}

// stop ends the sampling and returns the samples and how many reads failed.
func (m *memSampler) stop() ([]memSample, int) {
	close(m.stopped)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.samples, m.errs
}

// memStats are the median and peak of one reading over a phase, in MiB.
type memStats struct{ median, peak float64 }

func statsOf(vals []int64) memStats {
	if len(vals) == 0 {
		return memStats{}
	}
	v := slices.Clone(vals)
	slices.Sort(v)
	return memStats{median: mibOf(v[len(v)/2]), peak: mibOf(v[len(v)-1])}
}

func mibOf(b int64) float64 { return float64(b) / (1 << 20) }

func (m memStats) String() string { return fmt.Sprintf("%.0f / %.0f", m.median, m.peak) }

// phaseRow is the report's row of one phase.
type phaseRow struct {
	phase           string
	took            time.Duration
	samples         int
	vmRSS, anon     memStats
	cgRSS, cgWS     memStats
	kubeRSS, kubeWS memStats
	kubeletDistinct int
}

func phaseRows(samples []memSample, phases []string, took map[string]time.Duration) []phaseRow {
	var rows []phaseRow
	for _, ph := range phases {
		var vm, anon, rss, ws, krss, kws []int64
		kubeAt := map[time.Time]bool{}
		for _, s := range samples {
			if s.phase != ph {
				continue
			}
			vm, anon = append(vm, s.proc.VmRSS), append(anon, s.proc.RssAnon)
			rss, ws = append(rss, s.cgroup.RSS), append(ws, s.cgroup.WorkingSet)
			if s.kubeletRSS > 0 {
				krss, kws = append(krss, s.kubeletRSS), append(kws, s.kubeletWS)
				kubeAt[s.kubeletAt] = true
			}
		}
		rows = append(rows, phaseRow{
			phase: ph, took: took[ph], samples: len(vm),
			vmRSS: statsOf(vm), anon: statsOf(anon), cgRSS: statsOf(rss), cgWS: statsOf(ws), kubeRSS: statsOf(krss), kubeWS: statsOf(kws),
			kubeletDistinct: len(kubeAt),
		})
	}
	return rows
}

// podReport is the Markdown of -pod: one row per phase.
func podReport(o options, env machine, sc *scenario, rows []phaseRow, every time.Duration, failed int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "RSS of flotilla's pod during rollouts of %d clusters (wave 1: %d, wave 2: %d; %d real API servers, %d named clusters behind a namespace proxy), measured %s by `%s`:\n\n",
		len(sc.all()), len(sc.wave1), len(sc.wave2), len(sc.b.real), countProxied(sc), env.started.Format("2006-01-02"), podCommand(o))
	b.WriteString("MiB, median / peak of the phase's samples.\n\n")
	b.WriteString("| phase | wall time | samples | VmRSS | of it RssAnon | cgroup rss | cgroup working set | kubelet's rssBytes | kubelet's workingSetBytes (distinct readings) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s (%d) |\n", r.phase, r.took.Round(time.Second), r.samples, r.vmRSS, r.anon, r.cgRSS, r.cgWS, r.kubeRSS, r.kubeWS, r.kubeletDistinct)
	}
	fmt.Fprintf(&b, "\nSampled every %s from the host: the process's VmRSS and RssAnon (/proc/<pid>/status; VmRSS also counts the mapped binary, RssFile), its memory cgroup's total_rss and usage_in_bytes less total_inactive_file (v1; what the kubelet reports as rssBytes and workingSetBytes), and the kubelet's stats summary through the API server (GET /api/v1/nodes/%s/proxy/stats/summary; its numbers change when the kubelet reads the cgroup again: distinct readings); %d reads failed. The pod: the chart's defaults (requests 100m CPU, 128Mi; limit 512Mi), the image by digest, helm install to Ready and served in %s.\n",
		every, sc.b.pod.node.Name, failed, sc.pod.ready.Round(100*time.Millisecond))
	fmt.Fprintf(&b, "Machine: %d CPUs (%s), %.0f GiB RAM, Linux %s, %s; load average before/after: %s / %s.\n", env.cpus, env.cpuModel, env.memGiB, env.kernel, env.goVersion, env.loadBefore, env.loadAfter)
	return b.String()
}

func countProxied(sc *scenario) int {
	n := 0
	for _, c := range sc.all() {
		if c.proxy != nil {
			n++
		}
	}
	return n
}

func podCommand(o options) string {
	return fmt.Sprintf("go run ./deploy/tools/bench -pod -wave1 %d -wave2 %d -runs %d -clusters %d", o.wave1, o.wave2[0], o.runs, o.clusters)
}

// writePodRaw writes every sample as CSV.
func writePodRaw(path string, samples []memSample) error {
	var b strings.Builder
	b.WriteString("time,phase,vmrss_bytes,rss_anon_bytes,cgroup_rss_bytes,cgroup_working_set_bytes,kubelet_rss_bytes,kubelet_working_set_bytes,kubelet_time\n")
	for _, s := range samples {
		fmt.Fprintf(&b, "%s,%q,%d,%d,%d,%d,%d,%d,%s\n", s.at.UTC().Format(time.RFC3339Nano), s.phase, s.proc.VmRSS, s.proc.RssAnon, s.cgroup.RSS, s.cgroup.WorkingSet, s.kubeletRSS, s.kubeletWS, s.kubeletAt.UTC().Format(time.RFC3339))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
