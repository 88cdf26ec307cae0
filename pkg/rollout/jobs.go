package rollout

import (
	"maps"
	"slices"
)

// JobStatus is what a cluster's Job of a release set's Job member says
// (pkg/cluster's Jobs): whether it exists, the revision its pod template
// carries (canary.AnnotationRevision), and how it ended.
type JobStatus struct {
	Name     string
	Found    bool
	Revision string
	Complete bool
	Failed   bool
	// Reason is the Failed condition's message (its reason when it has
	// none).
	Reason string
}

// States of a release set's Job in a cluster of a rollout (Cluster.Jobs).
const (
	JobPending  = "pending" // not created at the rollout's revision (yet)
	JobRunning  = "running"
	JobComplete = "complete"
	JobFailed   = "failed" // "failed: <reason>"
)

// JobState is what job says of a rollout of revision ref: pending when it
// runs another revision or is not there, else running, complete, or
// "failed: <reason>".
func JobState(job JobStatus, ref string) string {
	switch {
	case !job.Found || job.Revision != ref:
		return JobPending
	case job.Failed && job.Reason != "":
		return JobFailed + ": " + job.Reason
	case job.Failed:
		return JobFailed
	case job.Complete:
		return JobComplete
	}
	return JobRunning
}

// RecordJobs records, on cluster name of a release set's rollout, the
// state of each Job of its Job members (jobs, as read there), by name, so
// the API, `flotilla describe rollout` and the UI show it beside the
// canaries' phases. Nothing for a cluster the rollout does not have or no
// Jobs.
func (r *Rollout) RecordJobs(name string, jobs []JobStatus) {
	cl, _, err := r.Cluster(name)
	if err != nil || len(jobs) == 0 {
		return
	}
	states := make(map[string]string, len(jobs))
	for _, j := range jobs {
		states[j.Name] = JobState(j, r.jobRef(j))
	}
	if !maps.Equal(states, cl.Jobs) {
		cl.Jobs = states
	}
}

// JobNames are the names of the Jobs with a state in c, sorted.
func (c Cluster) JobNames() []string { return slices.Sorted(maps.Keys(c.Jobs)) }

// jobRef is the revision a Job of r's version carries: the rollout's
// (repository@commit), or, in a set of git and image members (a tuple),
// its git members' entry's, which the Job's revision is when it ran at
// the tuple's commit (an image entry's Ref is never a commit's).
func (r *Rollout) jobRef(j JobStatus) string {
	for _, e := range r.Versions {
		if e.Digest != "" && e.Ref() == j.Revision {
			return j.Revision
		}
	}
	return r.Ref()
}
