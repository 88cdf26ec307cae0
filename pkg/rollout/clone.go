package rollout

import (
	"encoding/json"
	"maps"
	"slices"
)

// Clone returns a copy of r that shares no memory with it: a caller may
// change either without the other seeing it (a cache hands out clones of
// what it keeps).
func (r Rollout) Clone() Rollout {
	c := r
	c.Waves = make([]Wave, len(r.Waves))
	for i, w := range r.Waves {
		c.Waves[i] = w.clone()
	}
	if r.Waves == nil {
		c.Waves = nil
	}
	c.Members = slices.Clone(r.Members)
	c.Versions, c.PreviousVersions = slices.Clone(r.Versions), slices.Clone(r.PreviousVersions)
	c.Failures = slices.Clone(r.Failures)
	for i, f := range c.Failures {
		c.Failures[i].Event = json.RawMessage(slices.Clone([]byte(f.Event)))
	}
	return c
}

func (w Wave) clone() Wave {
	c := w
	c.Clusters = slices.Clone(w.Clusters)
	for i := range c.Clusters {
		c.Clusters[i].Workloads = maps.Clone(c.Clusters[i].Workloads)
		c.Clusters[i].Jobs = maps.Clone(c.Clusters[i].Jobs)
		c.Clusters[i].PreviousVersions = slices.Clone(c.Clusters[i].PreviousVersions)
	}
	c.Approvers = slices.Clone(w.Approvers)
	c.ApprovalsFrom = slices.Clone(w.ApprovalsFrom)
	if w.PullRequest != nil {
		pr := *w.PullRequest
		c.PullRequest = &pr
	}
	if w.RevertPullRequest != nil {
		pr := *w.RevertPullRequest
		c.RevertPullRequest = &pr
	}
	return c
}
