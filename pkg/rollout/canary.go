package rollout

import (
	"slices"
	"strings"
	"time"
)

// CanaryStatus is the live state of one cluster's canary, as a cluster
// reader (pkg/cluster) reports it: what Flagger says and which images the
// workloads run. Functions judge it without linking a Kubernetes client.
// A release that canaries several workloads (a git application's: every
// Deployment and DaemonSet its commit renders has its own Canary) is
// reported as one status, Combine's, with each canary's in Workloads.
type CanaryStatus struct {
	Phase      string
	Weight     int
	Checksum   string    // Flagger's hash of the last applied spec
	Transition time.Time // when Flagger last changed the phase
	// PrimaryImage is what <workload>-primary runs ("" if Flagger has not
	// made it yet), TargetImage what the workload itself (the canary)
	// runs: the container's image, or a git application's revision
	// (repository@commit).
	PrimaryImage string
	TargetImage  string
	// Workloads are the canaries of a release of several workloads, the
	// application's own workload first; nil for a release of one.
	Workloads []WorkloadStatus
}

// WorkloadStatus is the live state of one canary of a release of several
// workloads: its name (the workload's) and what CanaryStatus says of one.
type WorkloadStatus struct {
	Name         string
	Phase        string
	Weight       int
	Checksum     string
	Transition   time.Time
	PrimaryImage string
	TargetImage  string
}

// Settled tells whether no analysis is under way: Flagger rests in
// Initialized, Succeeded or Failed until it sees a new revision.
func (s CanaryStatus) Settled() bool { return settled(s.Phase) }

func settled(phase string) bool {
	switch phase {
	case "Initialized", "Succeeded", "Failed":
		return true
	}
	return false
}

// standing orders a canary's phase by how far it is from promoted: a
// release stands where its least advanced canary does.
func standing(phase string) int {
	switch {
	case phase == "Failed":
		return 0
	case !settled(phase):
		return 1 // analysing, or not initialized yet
	case phase == "Initialized":
		return 2
	}
	return 3 // Succeeded
}

// Combine is the status of a release of several workloads in one cluster,
// judged as one canary: its phase, weight and transition are those of its
// least advanced canary (one failed: Failed; else one analysing: that
// phase; else one resting Initialized: Initialized; else Succeeded), and it
// runs an image (a revision) only where every canary's workload does: the
// primary runs the release's revision once every canary promoted it, the
// target once the apply reached every workload. Mixed images read as
// "mixed: <name>=<image>, ...", which equals no revision. The result keeps
// ws as its Workloads; one workload is that workload's status.
func Combine(ws []WorkloadStatus) CanaryStatus {
	if len(ws) == 0 {
		return CanaryStatus{}
	}
	least := ws[0]
	for _, w := range ws[1:] {
		if standing(w.Phase) < standing(least.Phase) {
			least = w
		}
	}
	st := CanaryStatus{
		Phase: least.Phase, Weight: least.Weight, Checksum: ws[0].Checksum, Transition: least.Transition,
		PrimaryImage: common(ws, func(w WorkloadStatus) string { return w.PrimaryImage }),
		TargetImage:  common(ws, func(w WorkloadStatus) string { return w.TargetImage }),
	}
	if len(ws) > 1 {
		st.Workloads = slices.Clone(ws)
	}
	return st
}

// common is what every workload runs, as image reads it, or which runs what.
func common(ws []WorkloadStatus, image func(WorkloadStatus) string) string {
	first := image(ws[0])
	for _, w := range ws[1:] {
		if image(w) != first {
			parts := make([]string, len(ws))
			for i, w := range ws {
				parts[i] = w.Name + "=" + image(w)
			}
			return "mixed: " + strings.Join(parts, ", ")
		}
	}
	return first
}

// WorkloadPhases is what a cluster records of a release's canaries
// (Cluster.Workloads): each workload's Flagger phase, by name; nil for a
// release of one workload, so a rollout of image applications does not
// grow.
func (s CanaryStatus) WorkloadPhases() map[string]string {
	if len(s.Workloads) < 2 {
		return nil
	}
	out := make(map[string]string, len(s.Workloads))
	for _, w := range s.Workloads {
		out[w.Name] = w.Phase
	}
	return out
}
