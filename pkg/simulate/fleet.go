package simulate

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"

	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Outcome is what the simulated Flagger's analysis of a version ends in.
type Outcome string

// Outcomes a scenario gives a version in a cluster or a wave.
const (
	Succeed Outcome = "succeeds"
	Fail    Outcome = "fails"
	Hang    Outcome = "hangs" // Flagger never reports: the cluster's deadline passes
)

// Commit is the commit the simulated repository gives a push named name
// (a scenario names commits as it names tags): 40 hex digits.
func Commit(repoURL, name string) string {
	h := sha256.Sum256([]byte(config.DisplayURL(repoURL) + ":" + name))
	return hex.EncodeToString(h[:])[:40]
}

// simCluster is one cluster of the fleet model: its applications'
// workloads.
type simCluster struct {
	name, wave  string
	unreachable bool
	workloads   map[string]*workload // by namespace/name
	// set is the run of a release set of image members applying its
	// members one after another (setrun.go); nil when none is.
	set *setRun
}

// workload is one application's workload in a cluster, as Flagger keeps
// it: the primary and the canary.
type workload struct {
	primary    string // what <workload>-primary runs (repo@digest, repository@commit)
	target     string // what the workload (the canary) runs
	phase      string // Flagger's phase
	transition time.Time
	// lists, on a release set's lead, are the workloads (by name, the
	// lead's first) whose canaries its canary lists: its status is theirs
	// combined (canary.AnnotationWorkloads, rollout.Combine).
	lists []string
}

// workloadKey names a workload in a cluster.
func workloadKey(namespace, name string) string { return namespace + "/" + name }

// of is cluster c's workload key, made empty the first time.
func (c *simCluster) of(key string) *workload {
	w := c.workloads[key]
	if w == nil {
		w = &workload{}
		c.workloads[key] = w
	}
	return w
}

// action is something the simulated Flagger does at a virtual time.
type action struct {
	at       time.Time
	seq      uint64 // the order actions were made in
	cluster  string
	workload string            // its key
	do       func(w *workload) // the state change
	payload  flaggerv1.CanaryWebhookPayload
}

// Fleet is the simulated fleet: the executor (Run), the canaries' status
// (CanaryStatus) and the simulated Flagger behind them.
type Fleet struct {
	cfg      *config.Config
	clock    *dispatch.ManualClock
	hookURL  string // the flagger receiver's URL with its secret
	mu       sync.Mutex
	clusters map[string]*simCluster
	versions map[string]string               // digest or commit -> the scenario's name
	tags     map[string]map[string]time.Time // image -> tag -> built (Resolve)
	outcomes map[string]Outcome              // "tag/cluster" or "tag/wave:W" or "tag/*"
	analysis time.Duration                   // when set, overrides the canaries' analysis time
	actions  []action
	made     uint64 // actions made
	applies  []Apply
	client   *http.Client
	// signers are the stand-ins for the config's signers, and their
	// registry (signatures.go); nil when no application verifies
	// signatures.
	signers *signers
}

// Apply is one run the executor took.
type Apply struct {
	At      time.Time
	Cluster string
	Version string
	Revert  bool
}

func newFleet(cfg *config.Config, clock *dispatch.ManualClock) *Fleet {
	f := &Fleet{cfg: cfg, clock: clock, clusters: map[string]*simCluster{}, versions: map[string]string{}, tags: map[string]map[string]time.Time{},
		outcomes: map[string]Outcome{}, client: &http.Client{Timeout: 30 * time.Second}}
	for _, c := range cfg.Fleet.Clusters {
		f.clusters[c.Name] = &simCluster{name: c.Name, workloads: map[string]*workload{}}
	}
	for _, w := range cfg.Fleet.Waves {
		for _, c := range w.ClusterNames() {
			if sc, ok := f.clusters[c]; ok {
				sc.wave = w.Name
			}
		}
	}
	return f
}

// version names what image (repo@digest, repository@commit) runs: the
// scenario's name of a digest or commit the simulation made, else the
// image.
func (f *Fleet) version(image string) string {
	if image == "" {
		return "-"
	}
	i := strings.LastIndex(image, "@")
	if i < 0 {
		return image
	}
	if name, ok := f.versions[image[i+1:]]; ok {
		return name
	}
	return image[i+1:]
}

// Version is the name of what application app's primary runs in cluster
// ("-" for nothing); a member of a release set of git members runs its
// set's, a release set whose version is a tuple what its members run.
func (f *Fleet) Version(cluster, app string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.clusters[cluster]
	if !ok {
		return "", false
	}
	a, ok := f.cfg.Application(app)
	if !ok {
		return "", false
	}
	if rollout.TupleSet(a) {
		return f.setVersion(c, a), true
	}
	if set, ok := f.cfg.Application(a.MemberOf); ok && !rollout.TupleSet(set) {
		// A release set of git members is played as one application (its
		// lead's workload): each member runs what the set does.
		a = set
	}
	w := c.workloads[workloadKey(a.Namespace, a.Workload.Name)]
	if w == nil {
		return "-", true
	}
	return f.version(w.primary), true
}

// ref is what application a runs when it runs the version the scenario
// names version: repo@digest, or a git application's repository@commit.
func (f *Fleet) ref(a config.Application, version string) string {
	if g := a.Git(); g != nil {
		commit := Commit(g.URL, version)
		f.versions[commit] = version
		return config.DisplayURL(g.URL) + "@" + commit
	}
	return a.Image + "@" + f.resolved(a.Image, version)
}

// runs has every cluster application a targets run version (f.mu held).
// A release set whose version is a tuple runs what its members do (each
// its own workload).
func (f *Fleet) runs(a config.Application, version string) {
	if rollout.TupleSet(a) {
		return
	}
	img := f.ref(a, version)
	for _, cl := range f.cfg.Fleet.Clusters {
		if c := f.clusters[cl.Name]; c != nil && a.Targets(cl) {
			w := c.of(workloadKey(a.Namespace, a.Workload.Name))
			w.primary, w.target, w.phase = img, img, string(flaggerv1.CanaryPhaseSucceeded)
		}
	}
}

// VerifyPush is the simulated repository (verify's GitRepos): the commits
// the scenario pushes are on their branch, and each changes every path
// the applications following the repository track, in every cluster.
func (f *Fleet) VerifyPush(_ context.Context, src config.GitSource, _, _, commit string) ([]string, error) {
	f.mu.Lock()
	_, known := f.versions[commit]
	f.mu.Unlock()
	if !known {
		return nil, fault.Permanent(fmt.Errorf("commit %s is not one the scenario pushed", commit))
	}
	var changed []string
	for _, a := range f.cfg.Applications {
		if g := a.Git(); g != nil && config.SameGitRepository(g.URL, src.URL) {
			for _, c := range f.cfg.Fleet.Clusters {
				for _, p := range g.TrackedPaths(c.Name) {
					if p = strings.Trim(p, "/"); p != "" && !slices.Contains(changed, p) {
						changed = append(changed, p)
					}
				}
			}
		}
	}
	slices.Sort(changed)
	return changed, nil
}

// Resolve is the simulated registry: every tag exists, its digest derived
// from the image and the tag, built when first resolved (Created).
func (f *Fleet) Resolve(_ context.Context, image, tag string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.resolved(image, tag), nil
}

// resolved records that image's tag exists, and returns its digest (f.mu
// held).
func (f *Fleet) resolved(image, tag string) string {
	d := Digest(image, tag)
	f.versions[d] = tag
	if f.tags[image] == nil {
		f.tags[image] = map[string]time.Time{}
	}
	if _, ok := f.tags[image][tag]; !ok {
		f.tags[image][tag] = f.clock.Now()
	}
	return d
}

// Tags lists the tags of image the simulation resolved (the poll's
// Registry: the engine builds no client of the config's registries).
func (f *Fleet) Tags(_ context.Context, image string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for t := range f.tags[image] {
		out = append(out, t)
	}
	slices.Sort(out)
	return out, nil
}

// Created is when image@digest was built: the virtual instant the
// simulation first resolved its tag (track Newest orders by it).
func (f *Fleet) Created(_ context.Context, image, digest string) (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if tag, ok := f.versions[digest]; ok {
		return f.tags[image][tag], nil
	}
	return time.Time{}, nil
}

// CanaryStatus reads a cluster's canary from the model.
func (f *Fleet) CanaryStatus(_ context.Context, cluster, namespace string, wl config.Workload) (rollout.CanaryStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.clusters[cluster]
	if !ok {
		return rollout.CanaryStatus{}, fault.Permanent(fmt.Errorf("no cluster %q in the simulated fleet", cluster))
	}
	if c.unreachable {
		return rollout.CanaryStatus{}, fmt.Errorf("cluster %s is unreachable (simulated)", cluster)
	}
	w := c.workloads[workloadKey(namespace, wl.Name)]
	if w == nil {
		w = &workload{}
	}
	if len(w.lists) > 1 {
		// A release set's lead: its canary and those it lists, as
		// pkg/cluster reads them.
		ws := make([]rollout.WorkloadStatus, len(w.lists))
		for i, name := range w.lists {
			ws[i] = c.of(workloadKey(namespace, name)).status(name)
		}
		return rollout.Combine(ws), nil
	}
	return rollout.CanaryStatus{Phase: w.phase, Transition: w.transition, PrimaryImage: w.primary, TargetImage: w.target,
		Checksum: w.target}, nil
}

// status is w as one canary named name of a release's.
func (w *workload) status(name string) rollout.WorkloadStatus {
	return rollout.WorkloadStatus{Name: name, Phase: w.phase, Transition: w.transition, PrimaryImage: w.primary, TargetImage: w.target,
		Checksum: w.target}
}

// outcome is what the scenario decided for tag in cluster c: a cluster's
// own, else its wave's, else every cluster's, else success.
func (f *Fleet) outcome(tag string, c *simCluster) Outcome {
	for _, k := range []string{tag + "/" + c.name, tag + "/wave:" + c.wave, tag + "/*"} {
		if o, ok := f.outcomes[k]; ok {
			return o
		}
	}
	return Succeed
}

// analysisTime is how long Flagger analyses canary: its interval times its
// steps (iterations, step weights, or maxWeight / stepWeight); and how long
// until it fails (interval x threshold).
func analysisTime(cn *flaggerv1.Canary) (success, failure time.Duration) {
	interval, steps, threshold := time.Minute, 1, 1
	if cn != nil && cn.Spec.Analysis != nil {
		a := cn.Spec.Analysis
		if d, err := time.ParseDuration(a.Interval); err == nil && d > 0 {
			interval = d
		}
		switch {
		case a.Iterations > 0:
			steps = a.Iterations
		case len(a.StepWeights) > 0:
			steps = len(a.StepWeights)
		case a.StepWeight > 0 && a.MaxWeight > 0:
			steps = (a.MaxWeight + a.StepWeight - 1) / a.StepWeight
		}
		threshold = max(a.Threshold, 1)
	}
	return interval * time.Duration(steps+1), interval * time.Duration(threshold)
}

// Run is the executor: it applies p to the cluster's model at once (an
// image, or a git application's commit: its revision repository@commit),
// and has the simulated Flagger answer as the scenario decided. A git
// application's prune (the run of a commit's pending deletions after the
// cluster succeeded) changes no workload: nothing to do.
func (f *Fleet) Run(_ context.Context, cluster string, p pipelines.RunParams) (pipelines.Results, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sc, ok := f.clusters[cluster]
	if !ok {
		return pipelines.Results{}, fault.Permanent(fmt.Errorf("no cluster %q in the simulated fleet", cluster))
	}
	if sc.unreachable {
		return pipelines.Results{}, fault.Permanent(fmt.Errorf("cluster %s is unreachable (simulated)", cluster))
	}
	if p.Git != nil && p.Git.Prune == tasks.PrunePending {
		return pipelines.Results{}, nil
	}
	if len(p.Members) > 0 && p.Git == nil {
		return f.runSet(sc, p, p.Members), nil
	}
	if a, ok := f.cfg.Application(p.Application); ok && p.Git != nil && a.Set != nil && a.Set.Mixed() {
		// A set of git and image members: its git members at the
		// commit's revision, its image members with an entry at their
		// images (none before the frontend's first push).
		return f.runSet(sc, p, p.Git.Members), nil
	}
	prev, changed := f.apply(sc, p.Namespace, p.Workload, p.Image, p.Canary, p.Rollout)
	return pipelines.Results{PreviousImage: prev, Changed: changed}, nil
}

// apply sets image on workload (in namespace) of cluster sc, its canary
// cn, and has the simulated Flagger answer as the scenario decided for
// the image's version (f.mu held). It returns what the primary ran
// before and whether the workload's image changed.
func (f *Fleet) apply(sc *simCluster, namespace, workloadName, image string, cn *flaggerv1.Canary, rolloutID string) (string, bool) {
	cluster := sc.name
	key := workloadKey(namespace, workloadName)
	c := sc.of(key)
	now := f.clock.Now()
	prev := c.primary
	changed := c.target != image
	name, ns := workloadName, namespace
	if cn != nil {
		name, ns = cn.Name, cmp.Or(cn.Namespace, namespace)
	}
	tag := f.version(image)
	f.applies = append(f.applies, Apply{At: now, Cluster: cluster, Version: tag, Revert: image == c.primary && prev != ""})
	add := func(a action) {
		a.cluster, a.workload = cluster, key
		f.add(a)
	}
	c.target = image
	meta := func(msg, typ string) flaggerv1.CanaryWebhookPayload {
		return flaggerv1.CanaryWebhookPayload{Name: name, Namespace: ns, Checksum: image, Metadata: map[string]string{
			"eventMessage": msg, "eventType": typ, "cluster": cluster, "rollout": rolloutID,
		}}
	}
	switch {
	case c.primary == "":
		// Flagger's first sight of the workload: it copies it to the primary.
		// Done as the apply returns (what the engine reads next sees it);
		// the webhook follows once the engine is idle.
		pl := meta(fmt.Sprintf("Initialization done! %s.%s", name, ns), "Normal")
		pl.Phase = flaggerv1.CanaryPhaseInitialized
		c.primary, c.phase, c.transition = image, string(flaggerv1.CanaryPhaseInitialized), now
		add(action{at: now, payload: pl, do: func(*workload) {}})
	case image == c.primary || (cn != nil && cn.Spec.SkipAnalysis):
		// A revert (or skipAnalysis): promoted without analysis.
		// Done as the apply returns, like the initialization.
		pl := meta(fmt.Sprintf("Promotion completed! Scaling down %s.%s", name, ns), "Normal")
		pl.Phase = flaggerv1.CanaryPhaseSucceeded
		c.primary, c.phase, c.transition = image, string(flaggerv1.CanaryPhaseSucceeded), now
		add(action{at: now, payload: pl, do: func(*workload) {}})
	default:
		c.phase = string(flaggerv1.CanaryPhaseProgressing)
		c.transition = now
		start := meta(fmt.Sprintf("New revision detected! Scaling up %s.%s", name, ns), "Normal")
		start.Phase = flaggerv1.CanaryPhaseProgressing
		add(action{at: now, payload: start, do: func(*workload) {}})
		success, failure := analysisTime(cn)
		if f.analysis > 0 {
			success, failure = f.analysis, f.analysis
		}
		switch f.outcome(tag, sc) {
		case Succeed:
			pl := meta(fmt.Sprintf("Promotion completed! Scaling down %s.%s", name, ns), "Normal")
			pl.Phase = flaggerv1.CanaryPhaseSucceeded
			add(action{at: now.Add(success), payload: pl, do: func(c *workload) {
				if c.target == image {
					c.primary, c.phase = image, string(flaggerv1.CanaryPhaseSucceeded)
				}
			}})
		case Fail:
			pl := meta(fmt.Sprintf("Rolling back %s.%s failed checks threshold reached", name, ns), "Warning")
			pl.Phase = flaggerv1.CanaryPhaseFailed
			add(action{at: now.Add(failure), payload: pl, do: func(c *workload) {
				if c.target == image {
					c.phase = string(flaggerv1.CanaryPhaseFailed)
				}
			}})
		case Hang:
		}
	}
	return prev, changed
}

// add makes action a (f.mu held).
func (f *Fleet) add(a action) {
	f.made++
	a.seq = f.made
	f.actions = append(f.actions, a)
}

// nextAction is when the simulated Flagger acts next.
func (f *Fleet) nextAction() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var next time.Time
	for _, a := range f.actions {
		if next.IsZero() || a.at.Before(next) {
			next = a.at
		}
	}
	return next, !next.IsZero()
}

// fireDue does the simulated Flagger's actions due at now as one burst,
// as a wave's canaries report together: in order (actionBefore), each
// workload's first only (a workload's next action waits until the engine
// handled the first: what the engine reads of a canary is then what one
// action at a time would show it), every change first, then the webhooks,
// each answered 202 once journaled. The engine calls it only while it is
// idle and held (app.Server.Hold), so it handles the burst once it is
// journaled whole, folding it (dispatch.Folder) in the journal's order:
// what it reads and journals never depends on how fast its goroutines
// ran. It reports whether it did any.
func (f *Fleet) fireDue(ctx context.Context) (bool, error) {
	f.mu.Lock()
	now := f.clock.Now()
	var due, later []action
	for _, a := range f.actions {
		if a.at.After(now) {
			later = append(later, a)
		} else {
			due = append(due, a)
		}
	}
	slices.SortFunc(due, func(a, b action) int {
		if actionBefore(a, b) {
			return -1
		}
		if actionBefore(b, a) {
			return 1
		}
		return 0
	})
	var burst []action
	taken := map[string]bool{}
	for _, a := range due {
		if k := a.cluster + "/" + a.workload; taken[k] {
			later = append(later, a)
		} else {
			taken[k] = true
			burst = append(burst, a)
		}
	}
	f.actions = later
	var acted []string
	for _, a := range burst {
		if c := f.clusters[a.cluster]; c != nil {
			w := c.of(a.workload)
			a.do(w)
			w.transition = now
			acted = append(acted, a.cluster)
		}
	}
	// A set's run applies its next member once the one before is ready.
	f.stepSets(acted)
	f.mu.Unlock()
	for _, a := range burst {
		a.payload.Metadata["timestamp"] = strconv.FormatInt(now.UnixMilli(), 10)
		if err := f.post(ctx, a.payload); err != nil {
			return true, err
		}
	}
	return len(burst) > 0, nil
}

// actionBefore orders actions: by time, cluster, workload, then as they
// were made.
func actionBefore(a, b action) bool {
	if c := a.at.Compare(b.at); c != 0 {
		return c < 0
	}
	if a.cluster != b.cluster {
		return a.cluster < b.cluster
	}
	if a.workload != b.workload {
		return a.workload < b.workload
	}
	return a.seq < b.seq
}

// post sends a Flagger event webhook to flotilla's flagger receiver.
func (f *Fleet) post(ctx context.Context, p flaggerv1.CanaryWebhookPayload) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.hookURL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		return fmt.Errorf("posting the simulated Flagger's event: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("posting the simulated Flagger's event: %s", resp.Status)
	}
	return nil
}
