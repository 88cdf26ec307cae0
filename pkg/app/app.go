package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/events/intake"
	"github.com/flotilla-cd/flotilla/functions/advance"
	"github.com/flotilla-cd/flotilla/functions/launch"
	"github.com/flotilla-cd/flotilla/functions/observe"
	"github.com/flotilla-cd/flotilla/functions/plan"
	"github.com/flotilla-cd/flotilla/functions/rollback"
	"github.com/flotilla-cd/flotilla/functions/verify"
	"github.com/flotilla-cd/flotilla/pipelines/deliver"
	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/authz"
	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/cdevents"
	"github.com/flotilla-cd/flotilla/pkg/cluster"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/discovery"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
	"github.com/flotilla-cd/flotilla/pkg/fleetmetrics"
	"github.com/flotilla-cd/flotilla/pkg/fleetrollout"
	"github.com/flotilla-cd/flotilla/pkg/gates"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/gitops/proposer"
	"github.com/flotilla-cd/flotilla/pkg/gitops/triggers"
	"github.com/flotilla-cd/flotilla/pkg/kube"
	"github.com/flotilla-cd/flotilla/pkg/logctx"
	"github.com/flotilla-cd/flotilla/pkg/poll"
	"github.com/flotilla-cd/flotilla/pkg/reconcile"
	"github.com/flotilla-cd/flotilla/pkg/registry"
	"github.com/flotilla-cd/flotilla/pkg/reload"
	"github.com/flotilla-cd/flotilla/pkg/resources"
	"github.com/flotilla-cd/flotilla/pkg/resync"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
	"github.com/flotilla-cd/flotilla/pkg/tokens"
	"github.com/flotilla-cd/flotilla/pkg/tracing"
	"github.com/flotilla-cd/flotilla/pkg/ui"
	"github.com/flotilla-cd/flotilla/pkg/watch"
)

// Options override parts of the configuration and inject dependencies.
type Options struct {
	Listen   string               // overrides server.listen
	DataDir  string               // overrides server.dataDir
	Logger   *slog.Logger         // default: discard
	Registry *prometheus.Registry // served at /metrics; default: a new registry with Go and process collectors
	// Registerer is where the parts register their metrics; default Registry.
	// It must register into Registry for them to be served.
	Registerer prometheus.Registerer
	Resolver   registry.Resolver // default: registry.NewRemote()
	Executor   deliver.Executor  // default: the executor the config names
	Resync     resync.Options    // lost-event recovery; see package resync for defaults
	NoPrune    bool              // skips the start-up prune (prune.go), for flotillas sharing clusters
	// PullRequestHosts builds the pull request hosts of applications in
	// gitops mode pullRequest; default proposer.HostOf (the kept clients).
	// Tests inject failures with it.
	PullRequestHosts proposer.Hosts
	// ReadHeaderTimeout is how long a request's headers may take to
	// arrive; default DefaultReadHeaderTimeout.
	ReadHeaderTimeout time.Duration
	// Clock is the time the engine decides by: deadlines, bake times,
	// freeze windows, approvals' expiry and the timers that carry them
	// (the functions, the dispatcher's timers and retry backoffs, the
	// store's and the state's clocks, in scale-out mode the bus's timers
	// and retention and the state's on NATS, the date of an approval the API
	// records, the pull request proposer's reads and merge attempts).
	// Default the wall clock; `flotilla simulate` gives a virtual one.
	Clock Clock
	// Canaries reads the clusters' canaries for observe and rollback;
	// default the fleet's clients (pkg/cluster). `flotilla simulate` gives
	// its simulated fleet.
	Canaries CanaryReader
	// GitRepos confirms git applications' pushes against their
	// repositories (verify's port); default flotilla's copies of them
	// (gitops.Mirror, under the data directory). `flotilla simulate`
	// gives its simulated repositories.
	GitRepos verify.GitRepos
	// Sequential has the dispatcher handle one event at a time, in journal
	// order (dispatch.Options.Sequential): `flotilla simulate`'s runs of a
	// scenario journal the same events in the same order. Never for a
	// server: it gives up running rollouts and pipelines in parallel.
	Sequential bool
	// ConfigFile is the file the config was loaded from: Run reloads it
	// live (reload.go) when its content changes, read every
	// ConfigReloadInterval (0: only on Hangup), and on each value of
	// Hangup (the CLI's SIGHUP). Empty: the config never reloads.
	ConfigFile           string
	ConfigReloadInterval time.Duration
	Hangup               <-chan os.Signal
	// NoSync has the embedded store write without syncing
	// (store.WithoutSync): `flotilla simulate`, whose state is thrown away
	// at exit. Never for a server: a crash would lose acknowledged events.
	NoSync bool
}

// Clock is the time the engine decides by (Options.Clock); the
// dispatcher's timers wait on it (dispatch.Clock).
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// CanaryReader reads a cluster's canary (observe's and rollback's
// StatusReader).
type CanaryReader interface {
	CanaryStatus(ctx context.Context, cluster, namespace string, workload config.Workload) (rollout.CanaryStatus, error)
}

// DefaultReadHeaderTimeout bounds the arrival of a request's headers. Past
// it net/http closes the connection without an answer, or answers 400 when
// not even the request line is complete.
const DefaultReadHeaderTimeout = 10 * time.Second

// Server is the running main job.
type Server struct {
	cfg       *config.Config // as at start-up: what only a restart changes
	live      *config.Live   // the config in force, swapped by reloads (reload.go)
	reloader  *reload.Reloader
	reloadOpt Options // ConfigFile, ConfigReloadInterval, Hangup
	log       *slog.Logger
	store     *store.Store // embedded mode
	scale     *scaleOut    // scale-out mode
	bus       eventBus     // the store, or the bus on NATS
	repo      state.Rollouts
	approvals *gates.StoreApprovals
	api       *api.API
	authn     *api.Authn             // who a request of the API or the UI comes from
	tokens    *tokens.Registry       // the created tokens, revocations (tokens.go)
	sso       *api.SSO               // single sign-on (sso.go); nil: none
	hub       *watch.Hub             // the journal, live, for the API's watchers
	delivery  *fleetmetrics.Observer // the delivery metrics, from the journal
	ui        *ui.Handler
	intake    *intake.Intake
	dispatch  engine
	mirror    *dispatch.Mirror
	cdevents  []*dispatch.Mirror
	resync    *resync.Resyncer
	poll      *poll.Poller
	reconcile *reconcile.Reconciler
	pruneSet  *cluster.Set // the clusters the start-up prune cleans; nil with Options.NoPrune
	clusters  *cluster.Set // the fleet's clients and watch caches
	http      *http.Server
	listener  net.Listener
	reg       *prometheus.Registry
	ready     chan struct{}
	// externalURL is where the clusters reach flotilla: server.externalURL,
	// else derived from the bound address.
	externalURL string
	// tracer exports the rollouts' traces; nil while tracing is off.
	tracer *tracing.Tracer
	// projector keeps the FleetRollouts; nil unless server.fleetRollouts.
	projector *fleetrollout.Projector
	// resources are the Application resources; nil unless
	// server.resources (resources.go).
	resources *resources.Source
	// discovery is the clusters fleet.discovery finds; nil without it
	// (discovery.go).
	discovery *discovery.Source
}

// New builds the server and opens its store; it listens at once, so Addr is
// known before Run.
func New(ctx context.Context, cfg *config.Config, o Options) (*Server, error) {
	// Lines logged while handling an event of a rollout carry its id
	// (pkg/logctx: the dispatcher puts it in the call's ctx).
	o.Logger = logctx.Wrap(o.Logger)
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
		o.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if o.Registerer == nil {
		o.Registerer = o.Registry
	}
	listen, dataDir := cfg.Server.Listen, cfg.Server.DataDir
	if o.Listen != "" {
		listen = o.Listen
	}
	if o.DataDir != "" {
		dataDir = o.DataDir
	}
	flaggerRecv, err := flaggerReceiver(cfg)
	if err != nil {
		return nil, err
	}
	if o.Clock == nil {
		o.Clock = dispatch.WallClock
	}
	s := &Server{cfg: cfg, live: config.NewLive(cfg), log: o.Logger, reg: o.Registry, ready: make(chan struct{}), reloadOpt: o}
	if err := s.build(ctx, o, listen, dataDir, flaggerRecv); err != nil {
		// Whatever build opened (the store, the listener) is released.
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// storeBounds are the journal's retention and dedupe window as configured
// (the store's defaults where the config, not made by config.Parse, has
// none).
func storeBounds(c config.Server) []store.Option {
	var opts []store.Option
	if c.Retention != nil {
		opts = append(opts, store.WithRetention(c.Retention.Duration))
	}
	maxEvents := -1 // the store's default
	if c.DedupeMaxEvents != nil {
		maxEvents = *c.DedupeMaxEvents
	}
	return append(opts, store.WithDedupeWindow(c.DedupeWindow.Duration, maxEvents))
}

// build opens the store and the listener and builds the parts of s. On an
// error, s holds what was opened so far, for Close.
func (s *Server) build(ctx context.Context, o Options, listen, dataDir string, flaggerRecv config.Receiver) (err error) {
	cfg := s.cfg
	if cfg.Server.Bus != nil {
		if s.scale, err = openScaleOut(ctx, cfg.Server, o.Clock, o.Logger); err != nil {
			return err
		}
		s.bus, s.repo = s.scale.bus, s.scale.repo
		s.approvals = gates.NewStoreApprovals(s.scale.docs)
	} else {
		opts := append(storeBounds(cfg.Server), store.WithLogger(o.Logger), store.WithMetrics(o.Registerer), store.WithClock(o.Clock.Now))
		if o.NoSync {
			opts = append(opts, store.WithoutSync())
		}
		s.store, err = store.Open(filepath.Join(dataDir, "flotilla.db"), opts...)
		if err != nil {
			return err
		}
		s.bus, s.repo = s.store, embedded.NewRepo(s.store, o.Clock.Now)
		s.approvals = gates.NewStoreApprovals(s.store)
	}
	clusters, err := cluster.NewSet(cfg.Fleet.Clusters)
	if err != nil {
		return err
	}
	s.clusters = clusters
	if !o.NoPrune {
		s.pruneSet = clusters
	}
	// One copy of each git application's repository, which verify reads
	// pushes against and the embedded executor renders from. It is state:
	// under the data directory --data-dir names, never beside the config
	// (read-only where a ConfigMap holds it).
	mirror := gitops.NewMirror(filepath.Join(dataDir, "git"))
	if o.Executor == nil {
		if o.Executor, err = newExecutor(cfg, s.live, clusters, mirror, o.Logger); err != nil {
			return err
		}
	}
	if o.Resolver == nil {
		if o.Resolver, err = newRemote(ctx, cfg); err != nil {
			return err
		}
	}
	s.listener, err = (&net.ListenConfig{}).Listen(ctx, "tcp", listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", listen, err)
	}
	// --listen replaces server.listen, never a configured externalURL.
	external := cmp.Or(cfg.Server.ExternalURL, config.ExternalURLFor(s.listener.Addr().String()))
	s.externalURL = external
	hookURL := FlaggerHookURL(external, flaggerRecv.Name, flaggerRecv.SecretValue)
	var hooks deliver.Hooks = func(clusterName, rolloutID string) canary.EventHook {
		return canary.EventHook{
			URL:      hookURL,
			Metadata: map[string]string{"cluster": clusterName, "rollout": rolloutID},
		}
	}
	// What follows reads the config in force per event (s.live), not the
	// start-up's: a reload swaps it (reload.go).
	live := s.live
	tracked := func(image string) bool {
		cfg := live.Current()
		for _, a := range cfg.Applications {
			if config.SameImage(a.Image, image) {
				return true
			}
		}
		return len(cfg.KubeCDTriggered(image)) > 0 // KubeCD's image triggers
	}
	newest := func(image string) bool {
		for _, a := range live.Current().Applications {
			if a.Track == config.TrackNewest && config.SameImage(a.Image, image) {
				return true
			}
		}
		return false
	}
	verifier := verify.New(o.Resolver, tracked).WithCreationTime(newest)
	sigs, signed, err := signatures(ctx, cfg, live, o.Resolver)
	if err != nil {
		return err
	}
	if sigs != nil {
		verifier = verifier.WithSignatures(sigs, signed)
	}
	var repos verify.GitRepos = gitSources{mirror}
	if o.GitRepos != nil {
		repos = o.GitRepos
	}
	verifier = verifier.WithGit(repos, live).WithApplications(s.repo, live)
	prop, err := proposer.New(live, s.repo, o.PullRequestHosts, o.Logger).WithClock(o.Clock.Now).WithMetrics(o.Registerer)
	if err != nil {
		return err
	}
	// observe folds a burst of a rollout's events into one update.
	var _ dispatch.Folder = (*observe.Function)(nil)
	// advance folds a burst of a rollout's cluster results likewise.
	var _ dispatch.Folder = (*advance.Function)(nil)
	// rollback takes only reverts' run ends, so observe folds the applies'.
	var _ dispatch.Selective = (*rollback.Function)(nil)
	var canaries CanaryReader = clusters
	if o.Canaries != nil {
		canaries = o.Canaries
	}
	now := o.Clock.Now
	fns := []dispatch.Function{
		verifier,
		plan.New(live, s.repo, now),
		launch.New(live, s.repo, now),
		observe.New(live, s.repo, canaries, now),
		advance.New(live, s.repo, now),
		rollback.New(live, s.repo, canaries, now),
		deliver.NewRunner(deliver.New(live, o.Executor, hooks), s.bus, 0, o.Logger).SkipEnded(s.repo).AnnounceStarts(s.bus).WithClock(now),
		prop,
		triggers.New(live, triggers.Git{Mirror: mirror}, o.Logger).WithApplications(s.repo),
	}
	// In scale-out mode the dispatchers start with the partitions taken,
	// after New: a wiring that cannot run is refused here, in both modes.
	if err := dispatch.CheckLanes(fns); err != nil {
		return err
	}
	dopts := dispatch.Options{Logger: o.Logger, Metrics: o.Registerer, Workers: cfg.Server.Workers, Clock: o.Clock, Sequential: o.Sequential}
	var inFlight resync.Rollouts = s.repo
	mopts := []fleetmetrics.Option{fleetmetrics.WithLogger(o.Logger)}
	if s.scale != nil {
		shared := &sharedEngine{so: s.scale, fns: fns, opts: dopts, log: o.Logger}
		mopts = append(mopts, fleetmetrics.WithActive(func() bool { return shared.held(0) }))
		if err := o.Registerer.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flotilla_partitions_held",
			Help: "Partitions of the bus this replica holds and handles the events of (scale-out mode).",
		}, shared.heldCount)); err != nil {
			return fmt.Errorf("registering metrics: %w", err)
		}
		s.dispatch, inFlight = shared, ownedRollouts{repo: s.repo, owns: shared.owns}
	} else if s.dispatch, err = dispatch.New(s.bus, fns, dopts); err != nil {
		return err
	}
	o.Resync.Logger = o.Logger
	s.resync = resync.New(live, inFlight, clusters, journal{s.bus}, o.Resync)
	if s.poll, err = s.newPoller(ctx, cfg, o.Resolver, o); err != nil {
		return err
	}
	if s.reconcile, err = s.newReconciler(o, mirror); err != nil {
		return err
	}
	if cfg.Events.Sink != "" {
		if s.mirror, err = dispatch.NewMirror(s.bus, cfg.Events.Sink, o.Logger); err != nil {
			return err
		}
	} else if err := dispatch.ForgetMirror(ctx, s.bus); err != nil {
		// Housekeeping: the next start tries again; meanwhile the stale
		// cursor only holds retention back (and says so).
		o.Logger.Warn("forgetting the cursor of a sink no longer configured", "error", err)
	}
	if err := s.cdeventMirrors(ctx, cfg, o.Logger); err != nil {
		return err
	}
	if t := cfg.Telemetry.Tracing; t.Endpoint != "" {
		if s.tracer, err = tracing.New(ctx, s.bus, t.Endpoint, tracing.WithHeaders(t.HeaderValues), tracing.WithSampleRatio(t.Ratio()),
			tracing.WithInstance(cfg.Server.Instance), tracing.WithLogger(o.Logger)); err != nil {
			return err
		}
	}
	if s.hub, err = watch.New(s.bus, s.repo, o.Logger, o.Registerer); err != nil {
		return err
	}
	if s.delivery, err = fleetmetrics.New(s.bus, s.repo, o.Registerer, mopts...); err != nil {
		return err
	}
	if err := s.silenceMetric(cfg, o); err != nil {
		return err
	}
	if f := cfg.Server.FleetRollouts; f != nil {
		if s.projector, err = newProjector(f, s.bus, s.repo, o.Logger); err != nil {
			return err
		}
	}
	dm, err := discovery.NewMetrics(o.Registerer) // 0 without fleet.discovery
	if err != nil {
		return err
	}
	if d := cfg.Fleet.Discovery; d != nil {
		if s.discovery, err = s.newDiscovery(*d, o, dm); err != nil {
			return err
		}
	}
	if r := cfg.Server.Resources; r != nil {
		if s.resources, err = s.newResources(r, o); err != nil {
			return err
		}
	}
	s.tokens = s.newTokens()
	aopts := []api.AuthnOption{api.AnonymousRead(cfg.Server.AnonymousRead), api.WithRegisterer(o.Registerer),
		api.TokenGroups(tokenGroups(cfg)), api.WithTokens(s.tokens), api.WithSessions(s.documents()), api.AuthnTrustedProxies(cfg.Server.Proxies()...)}
	if s.scale != nil { // an address's failed API tokens count on every replica
		aopts = append(aopts, api.SharedBearerFailures(s.scale.docs))
	}
	if s.authn, err = api.NewAuthn(cfg.Server.Tokens(), aopts...); err != nil {
		return err
	}
	if notice := cfg.Server.AuthNotice(); notice != "" {
		o.Logger.Warn(notice)
	}
	if s.ui, err = ui.New(s.authn, o.Logger); err != nil {
		return err
	}
	s.api = api.New(s.repo, s.approvals, s.bus, o.Logger).WithClock(o.Clock.Now).WithApplicationInfos(s.repo, applicationInfos(cfg)...).
		WithClusters(clusterInfos(cfg.Fleet)...).WithWatch(s.hub).WithRefresher(refresher{s.poll}).
		WithAuditLog(s.bus).WithTrustedProxies(cfg.Server.Proxies()...).WithAutomation(cfg.Server.AutomationTokens()...)
	az, err := authz.New(cfg)
	if err != nil {
		return err
	}
	if notice := cfg.RBACNotice(); notice != "" {
		o.Logger.Info(notice)
	}
	s.api.WithAuthorizer(az, s.authn.Forbidden())
	s.grantTokens(az, o.Logger)
	s.api.WithHealth(clusterHealth{clusters})
	keeper := gates.NewKeeper(validationPolicies(live, clusters), s.approvals, clusters, o.Clock.Now)
	s.intake, err = intake.New(receiverConfigs(cfg.Receivers), journal{s.bus}, intake.WithGateKeeper(keeper),
		intake.WithObserver(observePipelineRuns(o.Executor)),
		intake.WithLogger(o.Logger), intake.WithMetrics(o.Registerer))
	if err != nil {
		return err
	}
	s.useSSO(cfg, o.Logger) // sso.go

	// The one swap of the config in force (reload.go).
	if s.reloader, err = s.newReloader(o); err != nil {
		return err
	}
	s.http = &http.Server{
		Handler:           s.routes(),
		ReadHeaderTimeout: cmp.Or(o.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		// Headers are read before anything is authenticated: keep what an
		// anonymous client can make flotilla hold small (Go's default is
		// 1 MiB; a webhook's headers, OIDC token included, are a few KB).
		MaxHeaderBytes: MaxHeaderBytes,
		// A webhook body is at most 1 MiB: a sender that takes longer
		// than this to send one is stuck or hostile.
		ReadTimeout:  30 * time.Second,
		WriteTimeout: 30 * time.Second,
		IdleTimeout:  2 * time.Minute,
	}
	return nil
}

// clusterInfos are the fleet's clusters as the API lists them, each with
// the wave it is in.
func clusterInfos(f config.Fleet) []api.ClusterInfo {
	wave := map[string]string{}
	for _, w := range f.Waves {
		for _, c := range w.ClusterNames() {
			wave[c] = w.Name
		}
	}
	out := make([]api.ClusterInfo, 0, len(f.Clusters))
	for _, c := range f.Clusters {
		out = append(out, api.ClusterInfo{Name: c.Name, Labels: c.Labels, Wave: wave[c.Name], Source: c.Source})
	}
	return out
}

// MaxHeaderBytes bounds a request's headers; larger ones are answered 431
// (net/http reads up to 4 KiB more before it refuses them).
const MaxHeaderBytes = 64 << 10

// receiverConfigs translates the config's receivers for the intake.
func receiverConfigs(rs []config.Receiver) []intake.ReceiverConfig {
	out := make([]intake.ReceiverConfig, 0, len(rs))
	for _, r := range rs {
		rc := intake.ReceiverConfig{
			Name:     r.Name,
			Type:     r.Type,
			Secret:   r.SecretValue,
			Header:   r.Header,
			Registry: r.Registry,
			Insecure: r.Insecure,
		}
		if o := r.OIDC; o != nil {
			rc.OIDC = intake.OIDCConfig{
				Issuer:         o.Issuer,
				Audience:       o.Audience,
				JWKSURL:        o.JWKSURL,
				JWKSFile:       o.JWKSFile,
				ServiceAccount: o.ServiceAccount,
			}
		}
		if l := r.RateLimit; l != nil {
			rc.RateLimit = intake.RateLimit{PerSecond: l.PerSecond, Burst: l.Burst}
		}
		out = append(out, rc)
	}
	return out
}

func flaggerReceiver(cfg *config.Config) (config.Receiver, error) {
	for _, r := range cfg.Receivers {
		if r.Type == "flagger" {
			return r, nil
		}
	}
	return config.Receiver{}, errors.New("config: receivers: a receiver of type flagger is required: canaries report their progress to it")
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// ExternalURL is the URL the clusters reach flotilla at: server.externalURL
// if configured, else derived from Addr.
func (s *Server) ExternalURL() string { return s.externalURL }

// Run prunes what removed delivery policies left (prune.go), then serves
// HTTP and runs the functions until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	s.startDiscovery(ctx)
	if s.startResources(ctx) { // their applications are not the prune's to remove
		s.prune(ctx)
	}
	if err := s.tokens.Start(ctx); err != nil { // before the first request
		return fmt.Errorf("reading the API tokens: %w", err)
	}
	if err := s.authn.StartSharedFailures(ctx); err != nil { // scale-out mode's shared limit, alike
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := s.http.Serve(s.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving http: %w", err)
		}
		return nil
	})
	// The sinks' mirrors and the tracer follow the whole bus once: here,
	// or in scale-out mode on the replica that holds partition 0.
	var once []func(context.Context) error
	for _, m := range s.cdevents {
		once = append(once, m.Run)
	}
	if s.mirror != nil {
		once = append(once, s.mirror.Run)
	}
	if s.tracer != nil {
		once = append(once, s.tracer.Run)
	}
	if s.projector != nil {
		once = append(once, s.projector.Run)
	}
	if s.discovery != nil {
		g.Go(func() error { return s.discovery.Run(gctx, s.reloader) })
	}
	if s.resources != nil {
		once = append(once, s.runResourceStatuses)
		g.Go(func() error { return s.runResources(gctx) })
	}
	// The ended and expired web sessions, deleted on one replica every
	// server.sessionSweepInterval.
	sweepEvery := s.cfg.Server.SessionSweep()
	if s.sso != nil {
		once = append(once, func(ctx context.Context) error { return s.sso.RunSweeper(ctx, sweepEvery) })
	}
	once = append(once, func(ctx context.Context) error { // the created tokens' web sessions, alike
		return api.RunSweeper(ctx, sweepEvery, s.log, "web sessions of created API tokens", s.authn.SweepSessions)
	})
	if s.scale != nil { // the shared limit's buckets full again
		once = append(once, func(ctx context.Context) error {
			return api.RunSweeper(ctx, api.BearerFailureSweepEvery, s.log, "limits of failed API tokens that refilled", s.authn.SweepFailures)
		})
	}
	if shared, ok := s.dispatch.(*sharedEngine); ok {
		if r := s.cfg.Server.Retention.Duration; r > 0 {
			// The stream keeps an event until every cursor that reads it
			// has passed it, as the embedded journal does (no MaxAge).
			once = append(once, func(ctx context.Context) error {
				return s.scale.bus.RunRetention(ctx, r, retireEvery(r), s.log)
			})
		}
		shared.once = once
	} else {
		for _, run := range once {
			g.Go(func() error { return run(gctx) })
		}
	}
	g.Go(func() error { return runDrained(gctx, s.dispatch, s.log) })
	g.Go(func() error { return s.resync.Run(gctx) })
	g.Go(func() error { return s.poll.Run(gctx) })
	g.Go(func() error { return s.reconcile.Run(gctx) })
	g.Go(func() error { return s.hub.Run(gctx) })
	g.Go(func() error { return s.delivery.Run(gctx) })
	if f := s.reloadOpt.ConfigFile; f != "" {
		g.Go(func() error {
			return s.reloader.WatchFile(gctx, f, s.reloadOpt.ConfigReloadInterval, s.reloadOpt.Hangup)
		})
	}
	g.Go(func() error {
		<-gctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return s.http.Shutdown(shutdown)
	})
	close(s.ready)
	s.log.Info("flotilla serving", "addr", s.Addr(), "external_url", s.externalURL)
	return g.Wait()
}

// Close releases the store and, if Run never served it, the listener. It
// may be called on a Server that New only partly built.
func (s *Server) Close() error {
	var errs []error
	if s.clusters != nil {
		s.clusters.Close()
	}
	if s.listener != nil {
		if err := s.listener.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, fmt.Errorf("closing listener: %w", err))
		}
	}
	if s.store != nil {
		errs = append(errs, s.store.Close())
	}
	if s.scale != nil {
		s.scale.close()
	}
	return errors.Join(errs...)
}

// FlaggerHookURL is the URL of the flagger receiver that flotilla writes into
// every canary: <externalURL>/hooks/<receiver>/<secret>, the secret
// path-escaped, so that one with '/', '?', '#' or '%' (a base64 secret, say)
// reaches the intake whole.
func FlaggerHookURL(externalURL, receiver, secret string) string {
	return strings.TrimRight(externalURL, "/") + "/hooks/" + url.PathEscape(receiver) + "/" + url.PathEscape(secret)
}

// newProjector keeps the FleetRollouts in the management cluster that
// server.fleetRollouts names (its kubeconfig, else the pod's own).
func newProjector(f *config.FleetRollouts, j fleetrollout.Journal, ros fleetrollout.Rollouts, log *slog.Logger) (*fleetrollout.Projector, error) {
	var rc *rest.Config
	var err error
	if f.Kubeconfig != "" {
		rc, err = kube.RESTConfig(f.Kubeconfig, "")
	} else if rc, err = rest.InClusterConfig(); err != nil {
		err = fmt.Errorf("server.fleetRollouts: no kubeconfig, and not in a pod with a service account token: %w", err)
	}
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("server.fleetRollouts: %w", err)
	}
	return fleetrollout.New(j, ros, dyn, f.Namespace, log), nil
}

// journal adapts the bus to the intake's Journal.
type journal struct{ s eventBus }

func (j journal) Append(ctx context.Context, evs ...cloudevents.Event) (int, error) {
	recs, err := j.s.Append(ctx, evs...)
	return len(recs), err
}

// cdeventCursor prefixes the journal cursors of the CDEvents sinks, one per
// URL.
const cdeventCursor = "cdevents:"

// cdeventMirrors makes a mirror per CDEvents sink, translating with the
// rollouts' state, and forgets the cursors of sinks no longer configured.
func (s *Server) cdeventMirrors(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	tr := cdevents.Translator{Source: "/flotilla/" + cfg.Server.Instance, Rollouts: s.repo}
	keep := make([]string, 0, len(cfg.Events.CDEvents))
	for _, u := range cfg.Events.CDEvents {
		m, err := dispatch.NewMirror(s.bus, u, log)
		if err != nil {
			return err
		}
		s.cdevents = append(s.cdevents, m.WithTransform(cdeventCursor+u, tr.Translate))
		keep = append(keep, cdeventCursor+u)
	}
	if err := dispatch.ForgetMirrorsExcept(ctx, s.bus, cdeventCursor, keep); err != nil {
		log.Warn("forgetting the cursors of CDEvents sinks no longer configured", "error", err)
	}
	return nil
}
