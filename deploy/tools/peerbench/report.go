package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/deploy/tools/internal/mdsection"
)

// metric is one measured interval of a push.
type metric struct {
	name string
	of   func(measure) time.Duration
}

var metrics = []metric{
	{"push -> first cluster's Deployment spec carries it", func(m measure) time.Duration { return m.firstSpec }},
	{"push -> every cluster's Deployment spec carries it", func(m measure) time.Duration { return m.allSpec }},
	{"push -> every cluster's primary runs it (Flagger promoted)", func(m measure) time.Duration { return m.allPrimary }},
}

// stats are the median, min and max of a subject's pushes for one metric.
type stats struct {
	n                int
	median, min, max time.Duration
}

func statsOf(ds []time.Duration) stats {
	if len(ds) == 0 {
		return stats{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stats{n: len(s), median: med, min: s[0], max: s[len(s)-1]}
}

func (r *results) stats(subject string, m metric) stats {
	var ds []time.Duration
	for _, x := range r.measures {
		if x.subject == subject {
			ds = append(ds, m.of(x))
		}
	}
	return statsOf(ds)
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
}

func ratio(a, b time.Duration) string {
	if b <= 0 {
		return ""
	}
	return strconv.FormatFloat(float64(a)/float64(b), 'f', 1, 64) + "x"
}

// renderReport is a Markdown table per metric: every subject's median, min
// and max, and its median over each flotilla configuration's.
func renderReport(o options, r *results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s (%s)\n\n", headingPrefix, time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "`go run ./deploy/tools/peerbench -clusters %d -pushes %d -poll-pushes %d`: %d real clusters (kube-apiserver, kwok and the fast Flagger build each), Debian's docker-registry notifying every tool; times from the clusters' watch streams. Run took %s.\n\n",
		o.clusters, o.pushes, o.pollPushes, r.clusters, r.took.Round(time.Second))
	b.WriteString("Every tool on its own namespace and repository, Flagger's same blue/green analysis (1s interval, 2 iterations) behind each. flotilla: `flotilla serve` built from this tree, once through waves [c1] then the rest, once with every cluster in one wave. Keel " + KeelVersion + ": one per cluster (out of cluster, a kubeconfig each), policy `all`, the registry's notifications at `/v1/webhooks/registry`; its polling subject reads a second registry that notifies nobody, at Keel's default schedule.")
	if o.flux {
		b.WriteString(" Flux (" + fluxVersions() + "): the five controllers per cluster (a kubeconfig each), each cluster's image automation committing to its own directory of one git-http-backend repository; the registry's notifications at a generic Receiver that has the ImageRepository scan, the git server's push webhook at a generic Receiver that has the GitRepository fetch; its polling subject scans the silent registry every " + fluxImageInterval.String() + ".")
	}
	if o.kargo {
		b.WriteString(" Kargo " + KargoVersion + ": its control plane (controller, management controller, external and Kubernetes webhooks servers) on c1, one Project with a Warehouse per subject and a Stage per wave ([c1], then the rest), auto-promotion on, each Stage promoting with git-clone, kustomize-set-image, git-commit and git-push to its clusters' directories of the same repository, which each cluster's Flux source and kustomize controllers apply; the registry's notifications at the ProjectConfig's generic webhook receiver, which refreshes the Warehouse subscribed to the pushed repository; its polling subject's Warehouse reads the silent registry every " + kargoWarehouseInterval.String() + " (its default).")
	}
	b.WriteString(" Neither Keel nor Flux orders clusters: every cluster takes a push at once, so their fleet-wide times compare with flotilla's one wave; flotilla's waves wait for the first wave's analysis. Kargo's second Stage takes a version once the first Stage's promotion succeeded (its git push), not after Flagger's analysis: Kargo's verification runs Argo Rollouts' analyses, which are not here. How each is configured and why: docs/peers.md. Ratios are medians over flotilla's medians: above 1x flotilla is faster, below 1x the peer is.\n\n")
	if len(r.notRun) > 0 {
		b.WriteString("Not in this run: " + strings.Join(r.notRun, "; ") + ".\n\n")
	}
	if o.chart != "" {
		fmt.Fprintf(&b, "![push -> fleet-wide time per tool, one dot per push](%s)\n\n", chartLink(o))
	}
	fw, fo := r.subjects[0].name, r.subjects[1].name
	for _, m := range metrics {
		fmt.Fprintf(&b, "**%s** (ms)\n\n", m.name)
		fmt.Fprintf(&b, "| tool | pushes | median | min | max | median / %s | median / %s |\n|---|---:|---:|---:|---:|---:|---:|\n", fo, fw)
		w, one := r.stats(fw, m), r.stats(fo, m)
		for _, s := range r.subjects {
			st := r.stats(s.name, m)
			if st.n == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s |\n", s.name, st.n, ms(st.median), ms(st.min), ms(st.max),
				ratio(st.median, one.median), ratio(st.median, w.median))
		}
		b.WriteString("\n")
	}
	b.WriteString(renderSpend(r))
	b.WriteString(renderDrops(r))
	b.WriteString(renderFails(r))
	b.WriteString("What each tool's processes used over the whole measured run (from the end of the set-up to the end of the run, every tool's pushes and the others' in between; peak: the sum of the processes' highest RSS in the run):\n\n| processes | count | CPU s | peak RSS MiB (sum) |\n|---|---:|---:|---:|\n")
	for _, u := range r.usage {
		fmt.Fprintf(&b, "| %s | %d | %.2f | %.0f |\n", u.what, u.procs, u.cpu.Seconds(), u.peakMiB)
	}
	b.WriteString("\n")
	return b.String()
}

// renderSpend is the table of what each subject's tool used during the
// subject's own measured pushes.
func renderSpend(r *results) string {
	var b strings.Builder
	b.WriteString("**What each tool's processes used during its own measured pushes** (each push from the push to the end of the pause after every primary ran it: CPU of the tool's processes, user + system; peak: the sum of their highest RSS in the push, read from /proc's VmHWM reset at each push; flotilla is its own `flotilla serve` process, one per subject; a peer's webhook and polling subjects share its processes)\n\n")
	b.WriteString("| tool | processes | pushes | CPU s (sum) | CPU s per push (median) | peak RSS MiB |\n|---|---:|---:|---:|---:|---:|\n")
	for _, s := range r.subjects {
		sp := spendOf(r.measures, s.name)
		if sp.pushes == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.2f | %.2f | %.0f |\n", s.name, r.procs[s.name], sp.pushes, sp.cpu.Seconds(), sp.perPush.Seconds(), sp.peakMiB)
	}
	b.WriteString("\n")
	return b.String()
}

// chartLink is the chart's path as the updated Markdown file links it.
func chartLink(o options) string {
	if o.update == "" {
		return filepath.ToSlash(o.chart)
	}
	rel, err := filepath.Rel(filepath.Dir(o.update), o.chart)
	if err != nil {
		return filepath.ToSlash(o.chart)
	}
	return filepath.ToSlash(rel)
}

// secs formats a duration in seconds.
func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s" }

// renderDrops is the table of the pushes whose webhook was lost.
func renderDrops(r *results) string {
	if len(r.drops) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("**A dropped webhook**: one push per tool whose registry notification is lost (the registry restarted without its notification endpoints for these pushes, then with them again), all at once; when each tool noticed it anyway. flotilla polls the registry every " + flotillaPoll.String() + " (its default fleet.poll.interval, jittered by 10%); Flux's ImageRepository scans every " + fluxImageInterval.String() + "; Kargo's Warehouse discovers every " + kargoWarehouseInterval.String() + " (its default interval); Keel polls only workloads labelled `keel.sh/trigger: poll`, which a webhook-triggered one is not. Each time is one sample of where the push fell in the tool's poll cycle: anywhere from nothing to the interval.\n\n")
	b.WriteString("| tool | version | push -> first cluster's Deployment spec carries it | push -> every cluster's primary runs it |\n|---|---|---:|---:|\n")
	for _, d := range r.drops {
		noticed, every := "not within "+d.waited.String(), "not within "+d.waited.String()
		if d.noticedOK {
			noticed = secs(d.noticed)
		}
		if d.everyOK {
			every = secs(d.every)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", d.subject, d.tag, noticed, every)
	}
	b.WriteString("\n")
	return b.String()
}

// renderFails is the table of the versions failing in the last wave.
func renderFails(r *results) string {
	if len(r.fails) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "**A version failing in the last wave**: one push per tool whose analysis fails in %s (the waves subject's last wave; the bench's check, a Flagger rollout webhook in every tool's Canary, answers 403 for that version there) and passes in c1; who puts the previous version back where, and when every cluster has settled on it: its primary back on it, kept on it by Flagger, or its Deployment taken back before the analysis ended (waited for up to -fail-wait after the analysis failed it in the last one; Flagger's threshold is 1, so its first failed check fails the canary).\n\n", strings.Join(r.fails[0].failing, ", "))
	b.WriteString("| tool | version (previous) | push -> the analysis failed it in the last of those clusters | push -> every cluster settled on the previous (the latest of them) | what became of each cluster's primary |\n|---|---|---:|---:|---|\n")
	for _, f := range r.fails {
		restored := "not within " + f.waited.String() + " (manual)"
		if f.restoredOK {
			restored = secs(f.restored)
		}
		failed := "-"
		if f.failedOK {
			failed = secs(f.failed)
		}
		fmt.Fprintf(&b, "| %s | %s (%s) | %s | %s | %s |\n", f.subject, f.tag, f.prev, failed, restored, fateText(f))
	}
	b.WriteString("\n")
	return b.String()
}

// headingPrefix starts the report's heading, which ends with the date of
// the run; an earlier run's section (whatever its date) is replaced, else
// the report goes before beforeHeading (docs/peers.md).
const (
	headingPrefix = "## Measured: side by side on one local fleet"
	beforeHeading = "## Not measured yet (issue #34)"
)

var oldHeading = regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(headingPrefix) + `.*$`)

// updateSection puts the report in place of the file's section of an
// earlier run (whatever its date), or before beforeHeading.
func updateSection(path, report string) error {
	return replaceSection(path, report, oldHeading, beforeHeading)
}

// benchmarksHeading starts the report's heading in BENCHMARKS.md
// (-benchmarks), where the section goes before benchmarksBefore the first
// time and in place of its earlier run's after.
const (
	benchmarksHeading = "## The peers side by side: Flux, Keel and Kargo on one local fleet"
	benchmarksBefore  = "## Reproduce"
)

var oldBenchmarksHeading = regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(benchmarksHeading) + `.*$`)

// updateBenchmarks puts the report into o.benchmarks under its own
// heading, the chart linked from there, saying where each tool's
// configuration is described.
func updateBenchmarks(o options, r *results) error {
	o.update = o.benchmarks
	_, body, _ := strings.Cut(strings.TrimLeft(renderReport(o, r), "\n"), "\n")
	page := "docs/peers.md"
	if rel, err := filepath.Rel(filepath.Dir(o.benchmarks), "docs/peers.md"); err == nil {
		page = filepath.ToSlash(rel)
	}
	report := fmt.Sprintf("%s (%s)\n\n`make bench-peers` (issue #34); how each tool is configured, what deviates from its defaults and why, and how the peers are built: [%s](%s).\n%s",
		benchmarksHeading, time.Now().UTC().Format("2006-01-02"), page, page, body)
	return replaceSection(o.benchmarks, report, oldBenchmarksHeading, benchmarksBefore)
}

// replaceSection puts report (its first line its heading) in place of the
// section old finds in the file (whatever its date), or before before.
func replaceSection(path, report string, old *regexp.Regexp, before string) error {
	report = strings.TrimLeft(report, "\n")
	heading, _, _ := strings.Cut(report, "\n")
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if m := old.Find(doc); m != nil {
		heading = string(m)
	}
	return mdsection.Replace(path, heading, report, before)
}

func writeRaw(path string, r *results) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"subject", "tag", "push_ms", "first_spec_ms", "first_cluster", "every_spec_ms", "every_primary_ms", "cpu_ms", "peak_rss_mib"})
	for _, m := range r.measures {
		_ = w.Write([]string{m.subject, m.tag, ms(m.push), ms(m.firstSpec), m.firstCluster, ms(m.allSpec), ms(m.allPrimary), ms(m.cpu), strconv.FormatFloat(float64(m.peakKiB)/1024, 'f', 1, 64)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
