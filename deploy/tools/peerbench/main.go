// Command peerbench runs flotilla side by side with the tools its users
// would pick instead (issue #34), on the same real local fleet, in one run,
// and prints a table of absolute times and ratios (peer / flotilla).
//
// What runs, all real and on 127.0.0.1:
//
//   - the local fleet (pkg/testkit/localfleet: etcd, kube-apiserver,
//     controller-manager, scheduler, kwok and the fast Flagger build per
//     cluster; -clusters of them);
//   - Debian's docker-registry, notifying every tool of every push (one
//     notification endpoint per receiver, as distribution delivers them:
//     each endpoint its own queue), and a second docker-registry that
//     notifies nobody, for the tools' polling;
//   - Keel (deploy/tools/peers/build.sh: from its release archive), one per
//     cluster with a kubeconfig (out of cluster), receiving the registry's
//     webhook at /v1/webhooks/registry, policy `all`; and the same Keels
//     polling the silent registry at their default schedule;
//   - Flux (deploy/tools/peers/build.sh: the image-reflector,
//     image-automation and notification controllers from their release
//     archives, the source and kustomize controllers from the module proxy),
//     one set of the five controllers per cluster with a kubeconfig, every
//     cluster reading its own directory of one deployments repository served
//     by git-http-backend; the registry's webhook reaches each cluster's
//     notification-controller Receiver, which has the ImageRepository scan;
//     the image automation commits, the git server's push webhook (as a git
//     host sends it) has every GitRepository fetch; and the same Flux
//     scanning the silent registry at its interval;
//   - Kargo (deploy/tools/peers/build.sh: its control plane from its
//     release archive): controller, management controller, external and
//     Kubernetes webhooks servers on c1 (out of cluster), one Project with
//     a Warehouse per subject and a Stage per wave ([c1], then the rest),
//     auto-promotion on, each Stage pushing its clusters' image to the
//     deployments repository (git-clone, kustomize-set-image, git-commit,
//     git-push), which each cluster's Flux applies; the registry's webhook
//     at the ProjectConfig's generic receiver refreshing the Warehouse; and
//     a Warehouse of the silent registry at its default interval;
//   - flotilla (`flotilla serve`, built from this tree) with the same
//     application, once through waves [c1] then [c2..cN] (its recommended
//     shape) and once with every cluster in one wave (no ordering, like
//     Keel).
//
// Flagger runs the same analysis behind every tool: flotilla renders the
// Canary of its application; the peers' namespaces get a copy of it (without
// flotilla's webhooks), so a Canary's own time is the same for all.
//
// Per push, for each tool: push -> the first cluster's Deployment spec
// carries the new image (reaction); push -> every cluster's Deployment spec
// carries it; push -> every cluster's primary runs it (Flagger promoted:
// includes the analysis, once per wave). Pushes go round-robin over the
// tools, each waiting until the previous one has settled everywhere.
//
//	go run ./deploy/tools/peerbench -pushes 5 -poll-pushes 2
//
// Build the fleet's binaries and the peers first: make fleet-build peers-build
// (make bench-peers does both).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/flotilla-cd/flotilla/deploy/tools/internal/cmdline"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

// KeelVersion and KargoVersion are those deploy/tools/peers/build.sh
// builds.
const (
	KeelVersion  = "0.22.1"
	KargoVersion = "1.11.2"
)

type options struct {
	clusters   int
	pushes     int
	pollPushes int
	settle     time.Duration
	failWait   time.Duration
	dropWait   time.Duration
	timeout    time.Duration
	keelBin    string
	flux       bool
	kargo      bool
	fluxDir    string
	peersDir   string
	flotilla   string
	keep       bool
	raw        string
	update     string
	benchmarks string
	chart      string
}

// flags defines the command line's flags into o.
func (o *options) flags(fs *flag.FlagSet) {
	fs.IntVar(&o.clusters, "clusters", 3, "real clusters: c1 is flotilla's first wave, c2..cN its second")
	fs.IntVar(&o.pushes, "pushes", 5, "measured pushes per tool with webhooks (after one unmeasured warm-up push each)")
	fs.IntVar(&o.pollPushes, "poll-pushes", 2, "measured pushes to the registry that notifies nobody, for Keel's polling at its default schedule (0: not)")
	fs.DurationVar(&o.settle, "settle", 2*time.Second, "pause after every cluster's primary runs a pushed version, before the next push")
	fs.DurationVar(&o.failWait, "fail-wait", 90*time.Second, "a version failing in the last wave: how long after Flagger failed it there to wait for every primary to run the previous version again (0: not measured)")
	fs.DurationVar(&o.dropWait, "drop-wait", fluxImageInterval+2*time.Minute, "a push whose registry webhook is lost: how long to wait for each tool to notice it (0: not measured)")
	fs.DurationVar(&o.timeout, "timeout", 4*time.Minute, "how long one push may take to reach every cluster's primary")
	fs.StringVar(&o.keelBin, "keel", filepath.Join(localfleet.BinDir(), "keel-"+KeelVersion), "Keel's binary (make peers-build)")
	fs.BoolVar(&o.flux, "flux", true, "also run Flux's subjects (its registry webhook, and its polling with -poll-pushes); left out, and named in the report, while its controllers are not built")
	fs.BoolVar(&o.kargo, "kargo", true, "also run Kargo's subjects (its registry webhook, and its polling with -poll-pushes; Flux's controllers apply its commits, so it needs -flux); left out, and named in the report, while it is not built")
	fs.StringVar(&o.peersDir, "peers-bin", localfleet.BinDir(), "where make peers-build puts the peers, to name those not built")
	fs.StringVar(&o.fluxDir, "flux-bin", localfleet.BinDir(), "the directory of Flux's controllers and their CRDs (make peers-build)")
	fs.StringVar(&o.flotilla, "flotilla", "", "flotilla's binary (default: go build this tree)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (configs, every process's log)")
	fs.StringVar(&o.raw, "raw", "", "also write every measured push as CSV to this file")
	fs.StringVar(&o.benchmarks, "benchmarks", "", "also put the report, headed \""+benchmarksHeading+"\", in place of its dated section of this Markdown file (BENCHMARKS.md), before \""+benchmarksBefore+"\"")
	fs.StringVar(&o.chart, "chart", "", "also draw every measured push's fleet-wide times per tool as a PNG at this path (docs/peers-fleet-wide.png)")
	fs.StringVar(&o.update, "update", "", "also put the report in place of its dated section of this Markdown file (docs/peers.md), before \""+beforeHeading+"\"")
}

func main() {
	var o options
	cmdline.Main("peerbench", o.flags, func(ctx context.Context) error { return run(ctx, o) })
}

// notRunning names the peers this run leaves out, and why: a peer whose
// binaries are not built (make peers-build) is named, not a failure, and
// left out of the run (o.flux, o.kargo); Kargo needs Flux's controllers
// to apply its commits.
func notRunning(o *options) []string {
	var out []string
	if o.flux {
		if err := checkFlux(o.fluxDir); err != nil {
			out = append(out, "Flux ("+fluxVersions()+"): not built: "+err.Error())
			o.flux = false
		}
	} else {
		out = append(out, "Flux: left out (-flux=false)")
	}
	switch {
	case !o.kargo:
		out = append(out, "Kargo: left out (-kargo=false)")
	case !o.flux:
		out = append(out, "Kargo "+KargoVersion+": left out with Flux, whose controllers apply its commits")
		o.kargo = false
	default:
		if err := checkKargo(o.peersDir); err != nil {
			out = append(out, "Kargo "+KargoVersion+": not built: "+err.Error())
			o.kargo = false
		}
	}
	return out
}

func run(ctx context.Context, o options) error {
	if o.clusters < 2 || o.pushes < 1 || o.pollPushes < 0 || o.settle < 0 || o.timeout <= 0 || o.failWait < 0 || o.dropWait < 0 {
		return fmt.Errorf("need -clusters >= 2, -pushes >= 1, -poll-pushes >= 0, -settle >= 0, -timeout > 0, -fail-wait >= 0, -drop-wait >= 0")
	}
	if _, err := os.Stat(o.keelBin); err != nil {
		return fmt.Errorf("no Keel binary (make peers-build): %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	notRun := notRunning(&o)
	for _, n := range notRun {
		log.Warn("not in this run", "peer", n)
	}
	b, err := newBench(ctx, o, log)
	if err != nil {
		if b != nil {
			b.close(true)
		}
		return err
	}
	res, err := b.run(ctx)
	b.close(err != nil)
	if err != nil {
		return err
	}
	res.notRun = notRun
	if o.raw != "" {
		if err := writeRaw(o.raw, res); err != nil {
			return err
		}
	}
	if o.chart != "" {
		if err := writeChart(o.chart, res); err != nil {
			return err
		}
	}
	report := renderReport(o, res)
	fmt.Print(report)
	if o.update != "" {
		if err := updateSection(o.update, report); err != nil {
			return err
		}
	}
	if o.benchmarks != "" {
		return updateBenchmarks(o, res)
	}
	return nil
}
