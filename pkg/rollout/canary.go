package rollout

import "time"

// CanaryStatus is the live state of one cluster's canary, as a cluster
// reader (pkg/cluster) reports it: what Flagger says and which images the
// workloads run. Functions judge it without linking a Kubernetes client.
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
}

// Settled tells whether no analysis is under way: Flagger rests in
// Initialized, Succeeded or Failed until it sees a new revision.
func (s CanaryStatus) Settled() bool {
	switch s.Phase {
	case "Initialized", "Succeeded", "Failed":
		return true
	}
	return false
}
