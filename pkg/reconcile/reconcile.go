package reconcile

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/logctx"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Reader reads what an application's workload runs in a cluster
// (pkg/cluster.Set).
type Reader interface {
	Observe(ctx context.Context, cluster, namespace string, w config.Workload) (rollout.Observed, error)
}

// Renderer renders a git application's commit for one cluster (pkg/app,
// over pkg/gitops's copies of the repositories and pkg/render): the image
// the commit runs in the application's workload container there, held
// against what the primary runs.
type Renderer interface {
	WorkloadImage(ctx context.Context, app config.Application, cluster, commit string) (string, error)
}

// Rollouts is the state a check decides against and records its findings
// in (pkg/state).
type Rollouts interface {
	App(ctx context.Context, name string) (rollout.AppState, error)
	Get(ctx context.Context, id string) (rollout.Rollout, error)
	ListInFlight(ctx context.Context) ([]rollout.Rollout, error)
	UpdateApp(ctx context.Context, name string, fn func(*rollout.AppState) error) error
}

// Journal records the requests and drift a check finds; it reports how
// many were new.
type Journal interface {
	Append(ctx context.Context, evs ...cloudevents.Event) (int, error)
}

// Options tune the Reconciler; zero values take the defaults in brackets.
type Options struct {
	Logger *slog.Logger // [discard]
	// Metrics registers the metrics [none].
	Metrics prometheus.Registerer
	// Owns says whether this replica checks the application (scale-out
	// mode: the partition of its pushes is held here) [every one].
	Owns func(app config.Application) bool
	// Timeout bounds one check of an application [30s].
	Timeout time.Duration
	// Settle is how long a check waits after a watch cache saw a primary
	// change, so that a burst of changes makes one check [250ms].
	Settle time.Duration
	// Now is the clock [time.Now].
	Now func() time.Time
	// Render renders a git application's validated commit, once per
	// commit and cluster [none: a git application's primaries are not
	// compared].
	Render Renderer
}

// Parallel bounds the clusters one check reads at once.
const Parallel = 8

// Reconciler checks the applications' clusters against their validated
// digests.
type Reconciler struct {
	cfg  config.Provider
	read Reader
	ros  Rollouts
	j    Journal
	o    Options

	drift     *prometheus.GaugeVec
	detected  *prometheus.CounterVec
	requested *prometheus.CounterVec
	checks    *prometheus.CounterVec

	mu      sync.Mutex
	pending map[string]bool // applications a watch asked to check
	wake    chan struct{}

	rmu      sync.Mutex
	rendered map[string]rendered // by application: its validated commit's images
}

// rendered is the image a git application's commit renders, by cluster,
// or why it renders none (a permanent error: the commit renders no such
// workload): rendered once per commit and cluster, forgotten when another
// commit is validated.
type rendered struct {
	commit string
	images map[string]string
	errs   map[string]string
}

// Outcomes of a check (the outcome label of flotilla_reconcile_checks_total).
const (
	OutcomeCurrent = "current" // every cluster runs the validated digest
	OutcomeFound   = "found"   // clusters to catch up, drifted or unreadable
	OutcomeSkipped = "skipped" // a rollout in flight, nothing validated yet
	OutcomeError   = "error"
)

// New returns a Reconciler over cfg's applications.
func New(cfg config.Provider, read Reader, ros Rollouts, j Journal, o Options) (*Reconciler, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Owns == nil {
		o.Owns = func(config.Application) bool { return true }
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Settle <= 0 {
		o.Settle = 250 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	r := &Reconciler{cfg: cfg, read: read, ros: ros, j: j, o: o, pending: map[string]bool{}, wake: make(chan struct{}, 1), rendered: map[string]rendered{},
		drift: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flotilla_drift_clusters",
			Help: "Clusters whose primary runs something else than the application's validated digest, as the latest check found.",
		}, []string{"application"}),
		detected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_drift_detected_total",
			Help: "Drifts found: a cluster's primary running another image than the validated digest (each cluster, primary: image and generation, and digest once).",
		}, []string{"application"}),
		requested: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_reconcile_rollouts_total",
			Help: "Rollouts of the validated digest requested without a push, by kind: catch-up (clusters that entered the waves or came back empty), drift-revert.",
		}, []string{"application", "kind"}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_reconcile_checks_total",
			Help: "Checks of an application's clusters against its validated digest, by outcome: current, found, skipped (a rollout in flight, nothing validated), error.",
		}, []string{"outcome"}),
	}
	if o.Metrics != nil {
		for _, c := range []prometheus.Collector{r.drift, r.detected, r.requested, r.checks} {
			if err := o.Metrics.Register(c); err != nil {
				return nil, fmt.Errorf("registering reconcile metrics: %w", err)
			}
		}
	}
	return r, nil
}

// Config is the configuration the Reconciler checks.
func (r *Reconciler) Config() *config.Config { return r.cfg.Current() }

// Run checks every application each fleet.reconcile.interval, the first
// time at once (a cluster new in the config is caught up at start-up),
// and the applications a watch cache saw a primary of change (Changed),
// until ctx ends. With an interval of 0 it does nothing.
func (r *Reconciler) Run(ctx context.Context) error {
	every := r.cfg.Current().ReconcileInterval()
	if every <= 0 {
		return nil
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			cfg := r.cfg.Current() // the applications and interval in force now
			for _, app := range cfg.Applications {
				r.check(ctx, app.Name)
			}
			t.Reset(cmp.Or(cfg.ReconcileInterval(), every))
		case <-r.wake:
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(r.o.Settle):
			}
			r.mu.Lock()
			apps := r.pending
			r.pending = map[string]bool{}
			r.mu.Unlock()
			for app := range apps {
				r.check(ctx, app)
			}
		}
	}
}

// check is Check for Run: its error is logged.
func (r *Reconciler) check(ctx context.Context, app string) {
	if _, err := r.Check(ctx, app); err != nil && ctx.Err() == nil {
		r.o.Logger.WarnContext(ctx, "checking the clusters against the validated digest failed", "application", app, "error", err)
	}
}

// Changed tells the Reconciler that the primary of workload in a
// cluster's namespace changed or went (pkg/cluster's OnPrimaryChange): the
// applications it belongs to are checked shortly. It never blocks.
func (r *Reconciler) Changed(cluster, namespace, workload string) {
	if r.cfg.Current().ReconcileInterval() <= 0 {
		return
	}
	found := false
	r.mu.Lock()
	for _, a := range r.cfg.Current().Applications {
		if a.Namespace == namespace && a.Workload.Name == workload {
			// A member's primary is its set's to check.
			r.pending[cmp.Or(a.MemberOf, a.Name)], found = true, true
		}
	}
	r.mu.Unlock()
	if !found {
		return
	}
	r.o.Logger.Debug("a primary changed", "cluster", cluster, "namespace", namespace, "workload", workload)
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Check reads what the clusters of application name's waves run, judges
// it against the validated digest (rollout.Reconcile) and acts on it:
// journals the drift found and the catch-up's and revert's requests,
// records what it found in the application's state and metrics. An
// application another replica checks is left alone.
func (r *Reconciler) Check(ctx context.Context, name string) (rollout.Reconciliation, error) {
	app, ok := r.cfg.Current().Application(name)
	if !ok {
		return rollout.Reconciliation{}, fault.New(fault.ErrNotFound, fmt.Sprintf("no application %q is configured", name))
	}
	if app.MemberOf != "" {
		// Its set's check reads it (observeSet): the set's rollouts carry it.
		return rollout.Reconciliation{Skip: fmt.Sprintf("a member of release set %s: checked with its set", app.MemberOf)}, nil
	}
	if !r.o.Owns(app) {
		r.drift.DeleteLabelValues(app.Name) // counted where it is checked
		return rollout.Reconciliation{Skip: "checked by another replica"}, nil
	}
	ctx = logctx.With(ctx, "application", app.Name)
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	rec, err := r.check1(ctx, app)
	outcome := OutcomeCurrent
	switch {
	case err != nil:
		outcome = OutcomeError
	case rec.Skip != "":
		outcome = OutcomeSkipped
	case slices.ContainsFunc(rec.Clusters, func(c rollout.ClusterCheck) bool { return c.State != rollout.CheckCurrent }):
		outcome = OutcomeFound
	}
	r.checks.WithLabelValues(outcome).Inc()
	return rec, err
}

func (r *Reconciler) check1(ctx context.Context, app config.Application) (rollout.Reconciliation, error) {
	st, err := r.ros.App(ctx, app.Name)
	if err != nil {
		return rollout.Reconciliation{}, fmt.Errorf("reading application %s: %w", app.Name, err)
	}
	all, err := r.ros.ListInFlight(ctx)
	if err != nil {
		return rollout.Reconciliation{}, fmt.Errorf("listing rollouts in flight: %w", err)
	}
	if ok, why := rollout.Settled(app, st, all); ok {
		return rollout.Reconciliation{Skip: why}, nil
	}
	var partial *rollout.Rollout
	if st.LatestRollout != "" && st.LatestTag != st.DeployedTag {
		// The newest rollout may have succeeded unsigned, stopping
		// before the waves that require a signature: its clusters run
		// its digest by design.
		if ro, err := r.ros.Get(ctx, st.LatestRollout); err == nil && ro.StopsBefore != "" {
			partial = &ro
		} else if err != nil && !errors.Is(err, rollout.ErrNotFound) {
			return rollout.Reconciliation{}, fmt.Errorf("reading rollout %s: %w", st.LatestRollout, err)
		}
	}
	var obs []rollout.Observed
	if app.Set != nil {
		obs = r.observeSet(ctx, app, st)
	} else {
		obs = r.observe(ctx, r.clusters(app), app.Namespace, app.Workload)
		r.render(ctx, app, st.DeployedDigest, obs)
	}
	rec := rollout.Reconcile(r.cfg.Current(), app, st, all, obs, partial)
	if rec.Skip != "" {
		return rec, nil
	}
	r.drift.WithLabelValues(app.Name).Set(float64(len(rec.Drifted)))
	found, primaries, members := map[string]string{}, map[string]string{}, map[string]string{}
	for _, c := range rec.Clusters {
		found[c.Cluster], members[c.Cluster] = c.Image, c.Member
		primaries[c.Cluster] = fmt.Sprintf("%s#%d", c.Image, c.Generation)
		if c.Member != "" {
			primaries[c.Cluster] = c.Member + "/" + primaries[c.Cluster]
		}
	}
	var evs []cloudevents.Event
	for _, c := range rec.Drifted {
		e, err := DriftEvent(app, st, c, members[c], found[c], primaries[c])
		if err != nil {
			return rec, err
		}
		evs = append(evs, e)
	}
	newDrift := 0
	if len(evs) > 0 {
		if newDrift, err = r.j.Append(ctx, evs...); err != nil {
			return rec, fmt.Errorf("journaling the drift of %s: %w", app.Name, err)
		}
		if newDrift > 0 {
			r.detected.WithLabelValues(app.Name).Add(float64(newDrift))
			r.o.Logger.WarnContext(ctx, "clusters drifted from the validated digest", "application", app.Name, "clusters", rec.Drifted,
				"digest", st.DeployedDigest, "policy", cmp.Or(app.DriftPolicy, config.DriftPolicyReport))
		}
	}
	for kind, clusters := range map[string][]string{rollout.KindCatchUp: rec.CatchUp, rollout.KindDriftRevert: rec.Revert} {
		if len(clusters) == 0 {
			continue
		}
		e, err := Request(app, st, kind, clusters, primaries)
		if err != nil {
			return rec, err
		}
		n, err := r.j.Append(ctx, e)
		if err != nil {
			return rec, fmt.Errorf("journaling the %s of %s: %w", kind, app.Name, err)
		}
		if n > 0 {
			r.requested.WithLabelValues(app.Name, kind).Inc()
			r.o.Logger.InfoContext(ctx, "requested a rollout of the validated digest", "application", app.Name, "kind", kind,
				"clusters", clusters, "tag", st.DeployedTag, "digest", st.DeployedDigest, "event_id", e.ID())
		}
	}
	status := rec.Status(st, r.o.Now())
	if !reflect.DeepEqual(status, st.Drift) {
		if err := r.ros.UpdateApp(ctx, app.Name, func(a *rollout.AppState) error {
			a.Drift = status
			return nil
		}); err != nil {
			return rec, fmt.Errorf("recording the check of %s: %w", app.Name, err)
		}
	}
	return rec, nil
}

// clusters names the clusters of app's waves.
func (r *Reconciler) clusters(app config.Application) []string {
	var names []string
	for _, w := range rollout.Waves(r.cfg.Current(), app) {
		for _, c := range w.Clusters {
			names = append(names, c.Name)
		}
	}
	return names
}

// observe reads workload w in namespace of every cluster named, Parallel
// at a time.
func (r *Reconciler) observe(ctx context.Context, names []string, namespace string, w config.Workload) []rollout.Observed {
	out := make([]rollout.Observed, len(names))
	sem := make(chan struct{}, Parallel)
	var wg sync.WaitGroup
	for i, c := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			o, err := r.read.Observe(ctx, c, namespace, w)
			if err != nil {
				o = rollout.Observed{Cluster: c, Err: err.Error()}
			}
			o.Cluster = c
			out[i] = o
		})
	}
	wg.Wait()
	return out
}

// observeSet reads, in every cluster of release set set's waves, each
// member with a canary (a Job member has none: its Jobs ran before its
// dependents were applied), holds each against what the set's validated
// version is for it (a git member: what the commit renders, a set of git
// and image members' commit its git members' entry in the deployed tuple;
// an image member: its entry in the deployed tuple, rollout.MemberExpected;
// an image member with no entry is not read, the set leaving it as its
// clusters run it), and judges each cluster by its first member not
// current there (rollout.SetObserved). No member read: no cluster judged.
func (r *Reconciler) observeSet(ctx context.Context, set config.Application, st rollout.AppState) []rollout.Observed {
	names := r.clusters(set)
	byCluster := make([][]rollout.Observed, len(names))
	read := false
	commit := st.DeployedDigest
	if set.Set.Mixed() {
		c, _ := st.DeployedVersions.Commit(set) // none: its git members are not compared
		commit = c.Digest
	}
	for _, sm := range set.Set.Members {
		m, ok := r.cfg.Current().Application(sm.Name)
		if sm.Job || !ok {
			continue
		}
		byEntry := rollout.ByEntry(set, m.Name)
		entry, has := st.DeployedVersions.Of(m.Name)
		if byEntry && !has {
			continue
		}
		read = true
		obs := r.observe(ctx, names, set.Namespace, m.Workload)
		if byEntry {
			for i := range obs {
				obs[i].Rendered = rollout.MemberExpected(obs[i], entry)
			}
		} else {
			r.render(ctx, m, commit, obs)
		}
		for i := range obs {
			obs[i].Member = m.Name
			byCluster[i] = append(byCluster[i], obs[i])
		}
	}
	if !read {
		return nil
	}
	out := make([]rollout.Observed, len(names))
	for i, c := range names {
		out[i] = rollout.SetObserved(byCluster[i])
		out[i].Cluster = c
	}
	return out
}

// render sets, for a git application, what its validated commit renders
// for each cluster whose primary runs (Observed.Rendered, or RenderErr),
// rendering a commit for a cluster once: a permanent error is kept too
// (the commit will not render otherwise), another one is not, the next
// check renders again.
func (r *Reconciler) render(ctx context.Context, app config.Application, commit string, obs []rollout.Observed) {
	if app.Git() == nil || r.o.Render == nil || commit == "" {
		return
	}
	for i, o := range obs {
		if o.Err != "" || !o.Canary || o.Primary == "" {
			continue
		}
		r.rmu.Lock()
		c, ok := r.rendered[app.Name]
		if !ok || c.commit != commit {
			c = rendered{commit: commit, images: map[string]string{}, errs: map[string]string{}}
			r.rendered[app.Name] = c
		}
		img, ok := c.images[o.Cluster]
		failed, known := c.errs[o.Cluster]
		r.rmu.Unlock()
		if known {
			obs[i].RenderErr = failed
			continue
		}
		if !ok {
			var err error
			if img, err = r.o.Render.WorkloadImage(ctx, app, o.Cluster, commit); err != nil {
				obs[i].RenderErr = err.Error()
				r.o.Logger.WarnContext(ctx, "rendering the validated commit failed: the primary is not compared", "application", app.Name,
					"cluster", o.Cluster, "commit", commit, "error", err)
				if fault.IsPermanent(err) {
					r.rmu.Lock()
					if c := r.rendered[app.Name]; c.commit == commit {
						c.errs[o.Cluster] = err.Error()
					}
					r.rmu.Unlock()
				}
				continue
			}
			r.rmu.Lock()
			if c := r.rendered[app.Name]; c.commit == commit {
				c.images[o.Cluster] = img
			}
			r.rmu.Unlock()
		}
		obs[i].Rendered = img
	}
}

// Request is the request of a rollout of kind of app's validated digest
// to clusters: its id derives from what it asks (rollout.ReconcileID;
// a revert's from the primaries found too, by cluster: image and
// generation), its subject is the image pinned, so dispatch keys it with
// the image's pushes. A git application's names its repository (without
// credentials, as its pushes' rollouts do) and the validated commit,
// "repository#commit", so dispatch keys it with the repository's pushes.
// A release set whose version is a tuple names the set as its image (as
// its rollouts do): a set of image members' subject is its first member's
// image pinned at the tuple's hash, a set of git and image members'
// "repository#<the tuple's hash>".
func Request(app config.Application, st rollout.AppState, kind string, clusters []string, primaries map[string]string) (cloudevents.Event, error) {
	imgs := map[string]string{}
	if kind == rollout.KindDriftRevert {
		imgs = primaries
	}
	image, subject := app.Image, app.Image+"@"+st.DeployedDigest
	if g := app.Git(); g != nil {
		image = config.DisplayURL(g.URL)
		subject = image + "#" + st.DeployedDigest
	}
	switch {
	case rollout.ImageSet(app) && len(st.DeployedVersions) > 0:
		// The set's rollouts name the set as their image; the request
		// goes with its first member's pushes.
		image, subject = app.Name, st.DeployedVersions[0].Image+"@"+st.DeployedDigest
	case rollout.TupleSet(app):
		// A set of git and image members' too; the request goes with its
		// repository's pushes (its source is its git members', whichever
		// member leads).
		image = app.Name
	}
	reason := fmt.Sprintf("%s of %s to %v", kind, st.DeployedTag, clusters)
	e, err := events.New(rollout.ReconcileID(app.Name, kind, st.DeployedDigest, clusters, imgs), "/flotilla/reconcile", events.TypeReconcileRequested,
		events.ReconcileRequested{Application: app.Name, Kind: kind, Image: image, Tag: st.DeployedTag, Digest: st.DeployedDigest,
			Clusters: clusters, Reason: reason})
	if err != nil {
		return e, err
	}
	e.SetSubject(subject)
	return e, nil
}

// DriftEvent is the drift.detected of cluster's primary running image (of
// a release set: member's primary), its id derived from the application,
// cluster, primary (member, image and generation) and validated digest:
// journaled once per drift, and again when the primary is changed again.
func DriftEvent(app config.Application, st rollout.AppState, cluster, member, image, primary string) (cloudevents.Event, error) {
	h := sha256.Sum256([]byte(app.Name + "\x00" + cluster + "\x00" + primary + "\x00" + st.DeployedDigest))
	return events.New("drift/"+hex.EncodeToString(h[:16]), "/flotilla/reconcile", events.TypeDriftDetected, events.DriftDetected{
		Application: app.Name, Member: member, Cluster: cluster, Image: image, Digest: st.DeployedDigest, Tag: st.DeployedTag, Policy: cmp.Or(app.DriftPolicy, config.DriftPolicyReport),
	})
}
