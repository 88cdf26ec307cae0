package rollout

import (
	"slices"
	"strings"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

// A release set of image members (docs/design/release-sets.md, "Image
// members") is judged by its lead's canary, which lists the canaries of
// the members the run set: each member's primary runs its own image, so
// the combined status reads as mixed images, and a cluster is where the
// set's version is when each member with an entry runs that entry's
// image. SetStatus turns the members' images into the version they make
// up, so the judges (Classify, Missed, Back, Expire) compare a set's
// status as an application's.

// Ref is the image the member's entry runs: pinned by its digest
// (repository@digest), else by its tag.
func (m MemberVersion) Ref() string {
	switch {
	case m.Digest != "":
		return m.Image + "@" + m.Digest
	case m.Tag != "":
		return m.Image + ":" + m.Tag
	}
	return m.Image
}

// SetStatus is st, the status of cluster's canaries of release set app
// of image members (or of git and image members: TupleSet), as r judges
// it: the primary (and the target) read as
// r's version (Ref) when each member of r's version runs its entry there,
// as the cluster's previous version (its PreviousImage) when each member
// of that one runs its entry, else as st reads them. A member without an
// entry (the lead, whose canary lists the others) is not compared, nor a
// Job member (no canary: its failure fails the run). A
// cluster being reverted is held against its previous version first. st
// unchanged for any other application.
func (r *Rollout) SetStatus(cfg *config.Config, app config.Application, cluster string, st CanaryStatus) CanaryStatus {
	if !TupleSet(app) || len(r.Versions) == 0 {
		return st
	}
	ws := st.Workloads
	if len(ws) == 0 {
		ws = []WorkloadStatus{{Name: app.Workload.Name, PrimaryImage: st.PrimaryImage, TargetImage: st.TargetImage}}
	}
	workloads := map[string]string{}
	var jobs []string // not compared: no canary, its failure fails the run
	for _, sm := range app.Set.Members {
		if sm.Job {
			jobs = append(jobs, sm.Name)
		} else if m, ok := cfg.Application(sm.Name); ok {
			workloads[sm.Name] = m.Workload.Name
		}
	}
	type version struct {
		v   SetVersion
		ref string
	}
	versions := []version{{r.Versions, r.Ref()}}
	if cl, _, err := r.Cluster(cluster); err == nil && len(cl.PreviousVersions) > 0 {
		versions = append(versions, version{cl.PreviousVersions, cl.PreviousImage})
		if cl.Phase == ClusterReverting {
			slices.Reverse(versions)
		}
	}
	as := func(read string, image func(WorkloadStatus) string) string {
		for _, v := range versions {
			if runs(v.v, workloads, ws, image, jobs) {
				return v.ref
			}
		}
		return read
	}
	st.PrimaryImage = as(st.PrimaryImage, func(w WorkloadStatus) string { return w.PrimaryImage })
	st.TargetImage = as(st.TargetImage, func(w WorkloadStatus) string { return w.TargetImage })
	return st
}

// runs tells whether every member of v runs its entry in ws (as image
// reads a canary's), each found by its workload's name.
func runs(v SetVersion, workloads map[string]string, ws []WorkloadStatus, image func(WorkloadStatus) string, jobs []string) bool {
	for _, e := range v {
		if slices.Contains(jobs, e.Application) {
			continue
		}
		i := slices.IndexFunc(ws, func(w WorkloadStatus) bool { return w.Name == workloads[e.Application] })
		if i < 0 || image(ws[i]) != e.Ref() {
			return false
		}
	}
	return len(v) > 0
}

// clusterPrevious is a cluster's previous version from what its apply run
// read each member it set ran before (image by member): each in the
// rollout's order of members, its tag (and build time) taken from the
// rollout's version or previous version of the member at that digest.
// The rollout's previous version when the run read none (a run that
// reports none).
func (r *Rollout) clusterPrevious(prev map[string]string) SetVersion {
	if len(prev) == 0 {
		return slices.Clone(r.PreviousVersions)
	}
	var out SetVersion
	for _, name := range r.Members {
		image, ok := prev[name]
		if !ok {
			continue
		}
		m := parseMemberImage(name, image)
		for _, known := range []SetVersion{r.PreviousVersions, r.Versions} {
			if k, ok := known.Of(name); ok && m.Tag == "" && k.Image == m.Image && k.Digest == m.Digest && m.Digest != "" {
				m.Tag, m.Created = k.Tag, k.Created
			}
		}
		out = append(out, m)
	}
	return out
}

// parseMemberImage is member's entry for image, an image reference
// (repository[:tag][@digest]).
func parseMemberImage(member, image string) MemberVersion {
	m := MemberVersion{Application: member, Image: image}
	if i := strings.Index(m.Image, "@"); i >= 0 {
		m.Image, m.Digest = m.Image[:i], m.Image[i+1:]
	}
	if i := strings.LastIndex(m.Image, ":"); i > strings.LastIndex(m.Image, "/") {
		m.Image, m.Tag = m.Image[:i], m.Image[i+1:]
	}
	return m
}
