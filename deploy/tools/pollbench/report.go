package main

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/registry"
)

type reportInput struct {
	setup   time.Duration
	elapsed time.Duration
	cpu     time.Duration
	polls   float64
	reqs    [3]int64 // the polls' requests: tag lists, manifests, other
	before  memStats
	during  memStats
	caught  []time.Duration
	missed  int
}

// heading is the report's section of BENCHMARKS.md.
const heading = "## The poll behind the webhooks: cost and catch-up"

// defaultInterval is flotilla's poll interval unless configured.
const defaultInterval = 5 * time.Minute

func report(w io.Writer, o options, in reportInput) error {
	if in.polls == 0 {
		return fmt.Errorf("no poll ran in %s", in.elapsed)
	}
	perPoll := func(n int64) float64 { return float64(n) / in.polls }
	cpuPerPoll := in.cpu / time.Duration(in.polls)
	// At the default interval with its jitter (on average half of
	// poll.Jitter of the interval), an application is polled this often.
	pollsPerHour := float64(time.Hour) / (float64(defaultInterval) * (1 + 0.05))
	// A repository's transport is set up (the registry's ping, "other")
	// once per registry.ReuseFor, not per poll: the run's short interval
	// spreads it over many polls, the default interval over fewer.
	reqsPerHour := perPoll(in.reqs[0]+in.reqs[1])*pollsPerHour + float64(time.Hour)/float64(registry.ReuseFor)
	fleetPollsPerSec := float64(o.apps) * pollsPerHour / 3600
	fmt.Fprintf(w, "%s\n\nMeasured %s on %d CPUs: ", heading, time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU())
	fmt.Fprintf(w, "`go run ./deploy/tools/pollbench -apps %d -tags %d -interval %s -duration %s -drops %d`: %d applications, each its own repository of %d tags in go-containerregistry's in-process registry on 127.0.0.1, the embedded store and state, each application deployed at its newest tag, and pkg/poll's loops at a %s interval for %s (the cost of one poll does not depend on the interval; the run's short one packs many polls into minutes). Setup (pushing the tags) took %s.\n\n",
		o.apps, o.tags, o.interval, o.duration, o.drops, o.apps, o.tags, o.interval, o.duration, in.setup.Round(time.Second))
	fmt.Fprintln(w, "| measured | value |")
	fmt.Fprintln(w, "|---|---:|")
	fmt.Fprintf(w, "| polls in the run | %.0f |\n", in.polls)
	fmt.Fprintf(w, "| registry requests per poll: tag lists / manifests / other | %.2f / %.2f / %.2f |\n", perPoll(in.reqs[0]), perPoll(in.reqs[1]), perPoll(in.reqs[2]))
	fmt.Fprintf(w, "| CPU per poll (flotilla's side and the in-process registry's) | %s |\n", cpuPerPoll.Round(time.Microsecond))
	fmt.Fprintf(w, "| RSS / Go heap in use before the loops | %.0f / %.0f MiB |\n", in.before.rssMiB, in.before.heapMiB)
	fmt.Fprintf(w, "| RSS / Go heap in use with %d loops running | %.0f / %.0f MiB (%d goroutines) |\n", o.apps, in.during.rssMiB, in.during.heapMiB, in.during.goroutines)
	fmt.Fprintf(w, "| **requests per application per hour at the default %s** | **%.1f** (%.1f polls, and the registry's ping once per %s) |\n", defaultInterval, reqsPerHour, pollsPerHour, registry.ReuseFor)
	fmt.Fprintf(w, "| **CPU of polling %d applications at the default %s** | **%.2f%% of one core** (%.1f polls/s) |\n",
		o.apps, defaultInterval, 100*fleetPollsPerSec*cpuPerPoll.Seconds(), fleetPollsPerSec)
	if len(in.caught) > 0 {
		p50 := in.caught[len(in.caught)/2]
		p99 := in.caught[int(math.Ceil(0.99*float64(len(in.caught))))-1]
		maxWait := time.Duration(float64(o.interval) * 1.1)
		fmt.Fprintf(w, "| **a push without its webhook -> the poll journaled it** (%d pushes) | p50 %s, max %s; bound: interval + jitter = %s |\n",
			len(in.caught), p50.Round(time.Millisecond), p99.Round(time.Millisecond), maxWait)
	}
	if in.missed > 0 {
		fmt.Fprintf(w, "| pushes the poll had not found when the run ended | %d |\n", in.missed)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "A found push goes the webhook's way from there (verify, plan): its rollout starts within A of the reaction table above. At the default interval a dropped webhook costs at most 5 min 30 s.")
	return nil
}
