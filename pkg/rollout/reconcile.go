package rollout

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
)

// Reconciling: what the clusters run of an application, held against the
// digest its fleet converged on (AppState.DeployedDigest). A cluster that
// entered the application's waves (new in the config, or its labels now
// match) or came back empty (no canary or no primary) is caught up: a
// rollout of KindCatchUp limited to it carries the validated digest
// through the wave's pipeline and analysis, without a new push. A cluster
// the digest was rolled out to whose primary runs something else drifted
// (a change by hand): it is reported, and with driftPolicy revert a
// rollout of KindDriftRevert restores the digest. Nothing is decided while
// a rollout of the application is in flight: it reaches every cluster of
// its waves itself, and its clusters are in motion.
//
// A git application's validated version is the commit its fleet last
// converged on (DeployedDigest, its rollouts' digest); a catch-up carries
// that commit, which renders what each cluster runs now, to the clusters
// that came empty (new to the application, or emptied: its render creates
// the workload, so no workload is needed). A cluster whose primary runs
// is held against the image the commit renders for its workload in that
// cluster (Observed.Rendered): another image on the primary is drift,
// reported and with driftPolicy revert restored by re-applying the
// commit; a cluster the commit's image could not be rendered for is
// current, not compared (GitNotCompared).

// Kinds of rollouts (Rollout.Kind) that no push started.
const (
	// KindCatchUp carries the validated digest to clusters that entered
	// the waves or came back empty.
	KindCatchUp = events.KindCatchUp
	// KindDriftRevert restores the validated digest in clusters whose
	// primary was changed by hand (driftPolicy: revert).
	KindDriftRevert = events.KindDriftRevert
)

// Observed is what one cluster runs of an application, as read from it
// (pkg/cluster's watch cache, or live).
type Observed struct {
	Cluster string
	// Err is why the cluster could not be read ("" when it was).
	Err string
	// Workload: the application's workload exists; Canary: its Flagger
	// canary exists; Primary is what <workload>-primary runs, "" when
	// there is none.
	Workload bool
	Canary   bool
	Primary  string
	// Generation is the primary's metadata.generation: every change of
	// its spec (a hand's too) makes a new one, so a drift found again
	// after a revert is a new drift.
	Generation int64
	// Of a git application (whose Primary is the revision, repository@
	// commit): PrimaryImage is the image the primary's container runs;
	// Rendered the image the validated commit renders for the workload's
	// container in this cluster ("" not rendered, RenderErr says why).
	PrimaryImage string
	Rendered     string
	RenderErr    string
	// Member names the member of a release set this is of ("" for an
	// application): a set's cluster is what its first member not current
	// there runs (SetObserved).
	Member string
}

// MemberExpected is what an image member's primary o must run for the
// set's deployed version to be current there: entry's image pinned at its
// digest ("" when o has no primary). A primary that runs entry's digest
// (the pinned reference as the set's run sets it, or another spelling
// of it) is held as running it.
func MemberExpected(o Observed, entry MemberVersion) string {
	switch {
	case o.PrimaryImage == "":
		return ""
	case RunsDigest(o.PrimaryImage, entry.Digest):
		return o.PrimaryImage
	}
	return entry.Image + "@" + entry.Digest
}

// SetObserved is what one cluster runs of a release set, from what it
// runs of each member with a canary (members, in the set's order, each
// with its Member): the first member that could not be read, else the
// first that is empty (no canary or primary: the cluster is caught up,
// every member), else the first whose primary runs another image than
// the commit renders for it (drift), else the first not compared, else
// the first member's (current).
func SetObserved(members []Observed) Observed {
	tests := []func(Observed) bool{
		func(o Observed) bool { return o.Err != "" },
		func(o Observed) bool { return !o.Canary || o.Primary == "" },
		func(o Observed) bool { return o.Rendered != "" && o.PrimaryImage != o.Rendered },
		func(o Observed) bool { return o.Rendered == "" },
	}
	for _, t := range tests {
		if i := slices.IndexFunc(members, t); i >= 0 {
			return members[i]
		}
	}
	if len(members) == 0 {
		return Observed{}
	}
	return members[0]
}

// What a check found of a cluster (ClusterCheck.State).
const (
	CheckCurrent    = "current"     // the primary runs the validated digest
	CheckCatchUp    = "catch-up"    // entered the waves, or came back empty: caught up
	CheckDrifted    = "drifted"     // the primary runs something else: drift
	CheckNoWorkload = "no-workload" // empty, and no workload to apply the digest to
	CheckUnreadable = "unreadable"  // the cluster could not be read
)

// ClusterCheck is what a check found of one cluster.
type ClusterCheck struct {
	Cluster string `json:"cluster"`
	State   string `json:"state"`
	// Image is what the cluster's primary runs ("" none); Generation the
	// primary's generation it was read at.
	Image      string `json:"image,omitempty"`
	Generation int64  `json:"generation,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// Member, of a release set's check, is the member the cluster was
	// judged by (SetObserved): the one not current there.
	Member string `json:"member,omitempty"`
}

// Reconciliation is what a check of an application's clusters decided.
type Reconciliation struct {
	// Skip says why nothing was decided ("" when the clusters were
	// judged): nothing validated yet, a rollout in flight.
	Skip     string         `json:"skip,omitempty"`
	Clusters []ClusterCheck `json:"clusters,omitempty"`
	// CatchUp and Revert are the clusters a rollout of KindCatchUp and of
	// KindDriftRevert go to (sorted); Drifted every drifted cluster.
	CatchUp []string `json:"catchUp,omitempty"`
	Drifted []string `json:"drifted,omitempty"`
	Revert  []string `json:"revert,omitempty"`
}

// Settled tells whether there is nothing to reconcile now (a rollout of the
// application in flight, nothing validated: no digest, or for a git
// application no commit), and why: the clusters are not read then.
func Settled(app config.Application, st AppState, inFlight []Rollout) (bool, string) {
	if st.DeployedDigest == "" {
		return true, "no version has been validated yet"
	}
	for _, ro := range inFlight {
		if ro.Application == app.Name && !ro.Phase.Done() {
			return true, fmt.Sprintf("rollout %s (%s, %s) is in flight: it reaches its clusters itself", ro.ID, ro.Tag, ro.Phase)
		}
	}
	return false, ""
}

// Reconcile judges what the clusters of app's waves run (obs, one per
// cluster read) against the validated digest st.DeployedDigest. A
// cluster with no canary or no primary is empty: caught up when its
// workload exists (the pipeline sets the image of a live workload, it
// does not create it). A primary that runs another image is drift in a
// cluster the digest was rolled out to (st.DeployedClusters; every
// cluster when that is unknown), else the cluster entered the waves since
// and is caught up. Drift is reverted with driftPolicy revert. A cluster
// whose primary runs the digest of partial, a rollout that succeeded
// unsigned and stopped before the waves requiring a signature, to one of
// its clusters, is current: the rollout left it so by design, and the
// version signed later rolls out to the whole fleet. Of a git application
// (st.DeployedDigest is the commit) every empty cluster is caught up, the
// commit's render creating the workload; a cluster whose primary runs
// another image than the commit renders for it (o.Rendered) is judged as
// an image application's whose primary runs another digest (drift, or
// caught up when it entered the waves since), and one the commit could
// not be rendered for is current, not compared (GitNotCompared).
// A release set of image members is judged as a git application, each
// member's primary held against its own entry in the deployed tuple
// (st.DeployedVersions, MemberExpected, set as o.Rendered), not against
// the tuple's hash (st.DeployedDigest); an empty cluster whose workload
// is missing has no workload, the set's run setting images on live ones.
// A set of git and image members is judged so member by member (ByEntry):
// an image member as a set of image members', a git member against what
// the deployed tuple's commit renders for it, as a git set's.
func Reconcile(cfg *config.Config, app config.Application, st AppState, inFlight []Rollout, obs []Observed, partial *Rollout) Reconciliation {
	var out Reconciliation
	if ok, why := Settled(app, st, inFlight); ok {
		out.Skip = why
		return out
	}
	targets := map[string]bool{}
	for _, w := range Waves(cfg, app) {
		for _, c := range w.Clusters {
			targets[c.Name] = true
		}
	}
	known := func(c string) bool { return st.DeployedClusters == nil || slices.Contains(st.DeployedClusters, c) }
	// A git application's primary is held against what its commit renders
	// (o.Rendered), a set of image members' against the member's entry in
	// the deployed tuple (MemberExpected), not the tuple's hash; a set of
	// git and image members' each as its kind's.
	byRender := app.Git() != nil || ImageSet(app)
	tag, digest := st.DeployedTag, st.DeployedDigest
	if c, ok := st.DeployedVersions.Commit(app); ok && app.Set != nil && app.Set.Mixed() {
		tag, digest = c.Tag, c.Digest // what its git members are rendered at
	}
	for _, o := range obs {
		if !targets[o.Cluster] {
			continue
		}
		chk := ClusterCheck{Cluster: o.Cluster, Image: o.Primary, Generation: o.Generation, Member: o.Member}
		byEntry := ByEntry(app, o.Member)
		switch {
		case o.Err != "":
			chk.State, chk.Reason = CheckUnreadable, o.Err
		case !o.Canary || o.Primary == "":
			if !o.Workload && (app.Git() == nil || byEntry) {
				chk.State, chk.Reason = CheckNoWorkload, fmt.Sprintf("no workload %s/%s to set the image of", app.Namespace, app.Workload.Name)
				if o.Member != "" {
					chk.Reason = "no workload to set the image of" // prefixed with the member below
				}
				break
			}
			chk.State, chk.Reason = CheckCatchUp, "no canary or primary: the cluster is new to the application, or came back empty"
			out.CatchUp = append(out.CatchUp, o.Cluster)
		case byEntry && o.Rendered == "":
			chk.State, chk.Reason = CheckCurrent, "not compared: no version of the member in the set's deployed version"
		case byRender && o.Rendered == "":
			chk.State, chk.Reason = CheckCurrent, GitNotCompared
			if o.RenderErr != "" {
				chk.Reason += ": " + o.RenderErr
			}
		case byRender && o.PrimaryImage == o.Rendered:
			chk.State = CheckCurrent
		case byEntry && !known(o.Cluster):
			chk.State, chk.Reason = CheckCatchUp, fmt.Sprintf("entered the waves after %s was rolled out: runs %s, the set's version has %s", st.DeployedTag, o.PrimaryImage, o.Rendered)
			out.CatchUp = append(out.CatchUp, o.Cluster)
		case byRender && !known(o.Cluster):
			chk.State, chk.Reason = CheckCatchUp, fmt.Sprintf("entered the waves after %s was rolled out: runs %s, the commit renders %s", tag, o.PrimaryImage, o.Rendered)
			out.CatchUp = append(out.CatchUp, o.Cluster)
		case byRender:
			chk.Image = o.PrimaryImage
			chk.State, chk.Reason = CheckDrifted, fmt.Sprintf("the primary runs %s, not %s, which the validated %s (%s) renders", o.PrimaryImage, o.Rendered, tag, digest)
			if byEntry {
				chk.Reason = fmt.Sprintf("the primary runs %s, not %s, its version in the validated %s (%s)", o.PrimaryImage, o.Rendered, st.DeployedTag, st.DeployedDigest)
			}
			out.Drifted = append(out.Drifted, o.Cluster)
			if app.DriftPolicy == config.DriftPolicyRevert {
				out.Revert = append(out.Revert, o.Cluster)
			}
		case RunsDigest(o.Primary, st.DeployedDigest):
			chk.State = CheckCurrent
		case partial != nil && partial.Phase == Succeeded && partial.StopsBefore != "" && RunsDigest(o.Primary, partial.Digest) && inRollout(partial, o.Cluster):
			chk.State, chk.Reason = CheckCurrent, fmt.Sprintf("runs %s, which rollout %s took unsigned as far as the waves before %s", partial.Tag, partial.ID, partial.StopsBefore)
		case !known(o.Cluster):
			chk.State, chk.Reason = CheckCatchUp, fmt.Sprintf("entered the waves after %s was rolled out", st.DeployedTag)
			out.CatchUp = append(out.CatchUp, o.Cluster)
		default:
			chk.State, chk.Reason = CheckDrifted, fmt.Sprintf("the primary runs %s, not the validated %s (%s)", o.Primary, st.DeployedTag, st.DeployedDigest)
			out.Drifted = append(out.Drifted, o.Cluster)
			if app.DriftPolicy == config.DriftPolicyRevert {
				out.Revert = append(out.Revert, o.Cluster)
			}
		}
		if chk.Member != "" && chk.Reason != "" {
			chk.Reason = chk.Member + ": " + chk.Reason
		}
		out.Clusters = append(out.Clusters, chk)
	}
	slices.SortFunc(out.Clusters, func(a, b ClusterCheck) int { return strings.Compare(a.Cluster, b.Cluster) })
	slices.Sort(out.CatchUp)
	slices.Sort(out.Drifted)
	slices.Sort(out.Revert)
	return out
}

// ByEntry tells whether member of release set app (an application's
// check: "") is held against its entry in the set's deployed tuple
// (MemberExpected) rather than against what a commit renders for it: every
// member of a set of image members, an image member of a set of git and
// image members.
func ByEntry(app config.Application, member string) bool {
	if ImageSet(app) {
		return true
	}
	if app.Set == nil || member == "" {
		return false
	}
	i := slices.IndexFunc(app.Set.Members, func(m config.SetMember) bool { return m.Name == member })
	return i >= 0 && app.Set.Members[i].Image != ""
}

// GitNotCompared is why a git application's cluster that runs a primary
// is current without being compared: the image the validated commit
// renders for it is not known (the render failed, or no renderer).
const GitNotCompared = "a git application: the primary is not compared, the validated commit's image for the cluster is not rendered"

// inRollout tells whether cluster is one of ro's.
func inRollout(ro *Rollout, cluster string) bool {
	_, _, err := ro.Cluster(cluster)
	return err == nil
}

// RunsDigest tells whether an image reference pins digest.
func RunsDigest(image, digest string) bool {
	return digest != "" && strings.HasSuffix(image, "@"+digest)
}

// ReconcileID is the id of the request of a rollout of kind to clusters
// of app at digest: the same clusters, digest and kind (and, for a
// revert, the same primaries found: image and generation) make the same
// id, so the journal and plan start one such rollout, however often it is
// found (restarts too); a primary changed by hand again is a new one.
func ReconcileID(app, kind, digest string, clusters []string, found map[string]string) string {
	var b strings.Builder
	for _, k := range []string{app, kind, digest} {
		b.WriteString(k + "\x00")
	}
	for _, c := range slices.Sorted(slices.Values(clusters)) {
		b.WriteString(c + "=" + found[c] + "\x00")
	}
	h := sha256.Sum256([]byte(b.String()))
	return "reconcile/" + hex.EncodeToString(h[:16])
}

// PlanReconcile builds rollout id of kind r.Kind, carrying the validated
// digest to r.Clusters, or says why it does not start (skip): the digest
// is no longer the validated one, a rollout of the application is in
// flight (it reaches the clusters itself), or none of the clusters is in
// the application's waves any more. The rollout runs each wave's
// pipeline and analysis, limited to those clusters.
func PlanReconcile(cfg *config.Config, app config.Application, st AppState, inFlight []Rollout, r events.ReconcileRequested, id string) (ro Rollout, skip string) {
	if r.Kind != KindCatchUp && r.Kind != KindDriftRevert {
		return Rollout{}, fmt.Sprintf("unknown kind %q", r.Kind)
	}
	if st.DeployedDigest != r.Digest {
		return Rollout{}, fmt.Sprintf("%s is no longer the validated digest (%s is)", r.Digest, st.DeployedDigest)
	}
	if ok, why := Settled(app, st, inFlight); ok {
		return Rollout{}, why
	}
	ro = Rollout{ID: id, Application: app.Name, Image: r.Image, Tag: st.DeployedTag, Digest: st.DeployedDigest, Phase: Progressing,
		PreviousTag: st.DeployedTag, PreviousDigest: st.DeployedDigest, ImageCreated: st.DeployedCreated, Kind: r.Kind, Reason: r.Reason}
	if app.Set != nil {
		ro.Members = app.Set.Names()
	}
	if TupleSet(app) {
		// The run applies the deployed tuple (its revert too: nothing
		// older to go back to); a set of git and image members' at its
		// git members' commit.
		ro.Versions, ro.PreviousVersions = slices.Clone(st.DeployedVersions), slices.Clone(st.DeployedVersions)
	}
	ro.Waves = LimitWaves(cfg, Waves(cfg, app), r.Clusters, nil)
	if len(ro.Waves) == 0 {
		return Rollout{}, fmt.Sprintf("none of %s is in the application's waves", strings.Join(r.Clusters, ", "))
	}
	return ro, ""
}

// DeployedTo are the clusters the validated digest runs in once ro
// succeeded: a catch-up or a revert adds its clusters to those of st; a
// version's rollout makes them its own, except a git push's limited to
// the clusters it changed (Limited), which adds them: every other cluster
// known to run the previous commit runs what the new one renders for it.
func DeployedTo(st AppState, ro Rollout) []string {
	var out []string
	if ro.Kind != "" && ro.Digest == st.DeployedDigest || ro.Kind == "" && ro.Limited && st.DeployedDigest != "" {
		if st.DeployedClusters == nil {
			return nil // unknown (a state from before), so every cluster stays counted
		}
		out = slices.Clone(st.DeployedClusters)
	}
	for _, w := range ro.Waves {
		for _, c := range w.Clusters {
			if !slices.Contains(out, c.Name) {
				out = append(out, c.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// DriftStatus is what the latest check of an application's clusters found
// that is not current (AppState.Drift): drifted clusters, and those caught
// up, empty or unreadable. Since is when it was first found so.
type DriftStatus struct {
	Digest   string         `json:"digest"`
	Tag      string         `json:"tag,omitempty"`
	Clusters []ClusterCheck `json:"clusters,omitempty"`
	Since    time.Time      `json:"since"`
}

// Reached is d without the clusters ro brought to its digest: a revert or
// catch-up (or a version's rollout) that succeeded there ended their drift
// at once, not at the next check (checks are skipped while it is in
// flight, so `get applications` said "drifted" for up to an interval
// after the revert). A drift held against another digest is kept for the
// next check to judge; nil when no cluster is left.
func (d *DriftStatus) Reached(ro Rollout) *DriftStatus {
	if d == nil || ro.Phase != Succeeded || ro.Digest != d.Digest {
		return d
	}
	out := *d
	out.Clusters = slices.DeleteFunc(slices.Clone(d.Clusters), func(c ClusterCheck) bool {
		for _, w := range ro.Waves {
			for _, rc := range w.Clusters {
				if rc.Name == c.Cluster && rc.Phase == ClusterSucceeded {
					return true
				}
			}
		}
		return false
	})
	if len(out.Clusters) == 0 {
		return nil
	}
	return &out
}

// Status is what r found of the clusters that are not current, at digest
// (tag), found at now; nil when r judged none (it skipped).
func (r Reconciliation) Status(st AppState, now time.Time) *DriftStatus {
	if r.Skip != "" {
		return st.Drift
	}
	out := &DriftStatus{Digest: st.DeployedDigest, Tag: st.DeployedTag, Since: now.UTC()}
	for _, c := range r.Clusters {
		if c.State != CheckCurrent {
			out.Clusters = append(out.Clusters, c)
		}
	}
	if prev := st.Drift; prev != nil && prev.Digest == out.Digest && slices.Equal(prev.Clusters, out.Clusters) {
		out.Since = prev.Since
	}
	return out
}

// Deploys tells whether ro, once ended, is what its application's fleet
// runs: it succeeded, and reached every wave (an unsigned build that
// stopped before the waves requiring a signature is not: the baseline
// stays, so the same version, signed later, rolls out to the whole fleet).
func Deploys(ro Rollout) bool { return ro.Phase == Succeeded && ro.StopsBefore == "" }

// Deploy records ro, a rollout that Deploys, as what the application runs:
// its version, unless a catch-up or a drift's revert brought clusters to
// the deployed version (the rollout that validated it stays the one that
// brought the fleet there), and the clusters it runs in. Recording the
// same rollout again changes nothing.
func (st *AppState) Deploy(ro Rollout) {
	st.DeployedClusters = DeployedTo(*st, ro)
	st.Drift = st.Drift.Reached(ro)
	if ro.Kind != "" && ro.Digest == st.DeployedDigest {
		return
	}
	st.DeployedTag, st.DeployedDigest, st.DeployedCreated = ro.Tag, ro.Digest, ro.ImageCreated
	st.DeployedVersions = slices.Clone(ro.Versions)
	st.DeployedRollout, st.DeployedAt = ro.ID, ro.Updated
}

// Undeployed is the id of st's latest rollout when it may have ended
// with its deployment not recorded yet: it is neither in flight nor the
// deployed one. A rollout is archived when it ends, and recorded as
// deployed after: a push planned in between finds it in neither (""
// when there is no such rollout).
func (st AppState) Undeployed(inFlight []Rollout) string {
	id := st.LatestRollout
	if id == "" || id == st.DeployedRollout || slices.ContainsFunc(inFlight, func(r Rollout) bool { return r.ID == id }) {
		return ""
	}
	return id
}
