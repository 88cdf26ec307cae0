package simulate

import (
	"slices"
	"strings"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// A release set of image members (docs/design/release-sets.md, "Image
// members") is played member by member: each member's workload is its
// own in the fleet model, and the set's run applies them as apply-canary
// does (tasks.ApplyImageSet): in the run's order, each member's image on
// its workload, the next one once that member is ready (its primary on
// the image, its phase settled), the first failing stopping the run; a
// member whose image is unchanged is ready at once, and Flagger reports
// nothing of it. The lead's canary lists the members' canaries, so its
// status is theirs combined, read by the engine as the version they make
// up (rollout.SetStatus).

// setRun is a set's run in one cluster: its members in order and the
// next one to apply or wait for.
type setRun struct {
	namespace, lead, rollout string
	members                  []tasks.SetMember
	next                     int
	applied                  time.Time // when members[next] was applied; zero: not yet
}

// A release set of git and image members (release-sets.md, "Git and
// image members") is played the same way: its run (apply-manifests',
// tasks' applySet) carries every member in dependsOn order, a git member
// without an image, applied at the commit's revision (repository@commit,
// what apply-manifests writes on its pod template and its primary then
// runs), an image member with its entry's image; a Job member runs to
// completion at once (its Job's outcome is not modelled) and reports no
// previous version, as applySet's.

// runSet starts set run p of members in cluster sc (f.mu held): the
// members are applied in order as far as they are ready at once, the rest
// as the simulated Flagger promotes those before them (stepSet). What it
// reports is what apply-canary (apply-manifests, for a set of git and
// image members) reports of the whole run: each member's primary before
// the run, the lead's as the run's. A git member's image is the run's
// revision (p.Git's commit).
func (f *Fleet) runSet(sc *simCluster, p pipelines.RunParams, members []tasks.SetMember) pipelines.Results {
	var res pipelines.Results
	// apply-manifests reports each member's previous only when the run
	// carries an image member (applySet's mixed): a run of the git
	// members alone reports the lead's, as a set of git members' does.
	byMember := slices.ContainsFunc(members, func(m tasks.SetMember) bool { return m.Image != "" })
	members = slices.Clone(members)
	if p.Git != nil {
		rev := tasks.Revision(p.Git.URL, p.Git.Commit)
		for i := range members {
			if members[i].Image == "" {
				members[i].Image = rev
			}
		}
	}
	for _, m := range members {
		if m.Image == "" || m.Kind == tasks.KindJob {
			continue
		}
		w := sc.of(workloadKey(p.Namespace, m.Workload))
		res.Changed = res.Changed || w.target != m.Image
		if w.primary == "" {
			continue
		}
		if res.PreviousMembers == nil && byMember {
			res.PreviousMembers = map[string]string{}
		}
		if byMember {
			res.PreviousMembers[m.Application] = w.primary
		}
		if m.Workload == p.Workload {
			res.PreviousImage = w.primary
		}
	}
	sc.set = &setRun{namespace: p.Namespace, lead: p.Workload, rollout: p.Rollout, members: members}
	f.stepSet(sc)
	return res
}

// stepSet goes on with sc's set run (f.mu held): it applies the next
// members while those before them are ready, and ends the run when every
// member is ready or one failed.
func (f *Fleet) stepSet(sc *simCluster) {
	r := sc.set
	for r != nil && r.next < len(r.members) {
		m := r.members[r.next]
		key := workloadKey(r.namespace, m.Workload)
		if m.Workload == r.lead {
			// The lead's canary, applied in its turn, lists the set's.
			sc.of(key).lists = setCanaries(r.lead, r.members)
		}
		if m.Image == "" {
			r.next++ // the lead without a version: its workload left as it runs
			continue
		}
		w := sc.of(key)
		if m.Kind == tasks.KindJob {
			// A Job member's Job runs at the revision, complete at once.
			w.primary, w.target, w.phase, w.transition = m.Image, m.Image, string(flaggerv1.CanaryPhaseSucceeded), f.clock.Now()
			r.next++
			continue
		}
		if r.applied.IsZero() {
			// An image the workload has already is no new revision:
			// Flagger's analysis of it goes on, or it runs it (ready). A
			// retry of one that failed is (its restart token).
			r.applied = f.clock.Now()
			if w.target != m.Image || (w.primary != m.Image && w.phase == string(flaggerv1.CanaryPhaseFailed)) {
				f.apply(sc, r.namespace, m.Workload, m.Image, m.Canary, r.rollout)
			}
		}
		switch {
		case w.primary == m.Image && w.target == m.Image && settled(w.phase):
			r.next, r.applied = r.next+1, time.Time{}
		case w.phase == string(flaggerv1.CanaryPhaseFailed) && !w.transition.Before(r.applied):
			r = nil // the first member failing stops the run
		default:
			return // waiting for the member's analysis
		}
	}
	sc.set = nil
}

// settled tells whether Flagger rests in phase.
func settled(phase string) bool { return rollout.CanaryStatus{Phase: phase}.Settled() }

// setCanaries are the workloads whose canaries a set's lead lists: the
// lead's first, then the other members' of the run in its order
// (tasks.ApplyImageSet's); none when the lead's canary is the only one.
func setCanaries(lead string, members []tasks.SetMember) []string {
	var out []string
	for _, m := range members {
		switch {
		case m.Canary == nil:
		case m.Workload == lead:
			out = append([]string{m.Workload}, out...)
		default:
			out = append(out, m.Workload)
		}
	}
	if len(out) < 2 {
		return nil
	}
	return out
}

// setVersion names what tuple set set's members run in cluster c: each
// member's version ("-" for nothing; a git member's the scenario's name of
// its commit), in the set's order, as `flotilla describe rollout` names a
// set's version without its digests ("shop-api 1.1.0, shop-frontend
// 1.0.0"; f.mu held).
func (f *Fleet) setVersion(c *simCluster, set config.Application) string {
	var parts []string
	for _, name := range set.Set.Names() {
		m, ok := f.cfg.Application(name)
		if !ok {
			continue
		}
		v := "-"
		if w := c.workloads[workloadKey(m.Namespace, m.Workload.Name)]; w != nil {
			v = f.version(w.primary)
		}
		parts = append(parts, name+" "+v)
	}
	return strings.Join(parts, ", ")
}

// stepSets goes on with the set runs of clusters, once the simulated
// Flagger acted there (f.mu held).
func (f *Fleet) stepSets(clusters []string) {
	slices.Sort(clusters)
	for _, name := range slices.Compact(clusters) {
		if sc := f.clusters[name]; sc != nil && sc.set != nil {
			f.stepSet(sc)
		}
	}
}
