package config

import (
	"cmp"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/utils/ptr"
)

// Defaults applied by Load and Parse to fields left empty or zero.
const (
	DefaultListen           = "127.0.0.1:8080"
	DefaultMetricsServer    = "http://prometheus:9090"
	DefaultDataDir          = "flotilla-data"
	DefaultExecutor         = ExecutorEmbedded
	DefaultTrack            = TrackMinorVersion
	DefaultNamespace        = "default"
	DefaultWorkloadKind     = "Deployment"
	DefaultStrategy         = StrategyBlueGreen
	DefaultInterval         = time.Minute
	DefaultIterations       = 10
	DefaultThreshold        = 5
	DefaultProgressDeadline = 10 * time.Minute
	DefaultWebhookType      = "rollout"        // Flagger's own default
	DefaultWebhookTimeout   = 10 * time.Second // Flagger's own default
	DefaultOIDCIssuer       = "https://accounts.google.com"
	DefaultValidationPeriod = 15 * time.Minute
	DefaultInstance         = "flotilla"
	DefaultWorkers          = 16
	DefaultRetention        = 7 * 24 * time.Hour
	DefaultDedupeWindow     = 24 * time.Hour
	DefaultDedupeMaxEvents  = 1_000_000
	DefaultBusStream        = "FLOTILLA"
	DefaultBusReplicas      = 3
	DefaultBusPartitions    = 16
	DefaultTektonNamespace  = "flotilla"
	DefaultGitOpsEdit       = "kustomize"
	DefaultGitOpsMode       = GitOpsModeCommit
	DefaultMergeMethod      = "merge"
	DefaultMergeDeadline    = 24 * time.Hour
	DefaultPollInterval     = 2 * time.Minute
	DefaultRegistryPoll     = 5 * time.Minute
	DefaultMergeRetryFor    = 5 * time.Minute
	DefaultGitHubAPI        = "https://api.github.com/"
	DefaultOIDCJWKSURL      = "https://www.googleapis.com/oauth2/v3/certs"
)

// DefaultReconcileInterval is fleet.reconcile.interval's default.
const DefaultReconcileInterval = time.Minute

// applyDefaults fills empty fields and makes relative paths absolute against
// base. It never fails: validate reports what defaults cannot fix.
func applyDefaults(c *Config, base string) {
	telemetryDefaults(&c.Telemetry, base)
	if r := c.Registries; r != nil {
		for i, f := range r.DockerConfigFiles {
			if f != "" {
				r.DockerConfigFiles[i] = resolvePath(base, f)
			}
		}
	}
	s := &c.Server
	if s.Listen == "" {
		s.Listen = DefaultListen
	}
	if s.Instance == "" {
		s.Instance = DefaultInstance
	}
	if s.Workers == 0 {
		s.Workers = DefaultWorkers
	}
	if s.Retention == nil {
		s.Retention = &Duration{DefaultRetention}
	}
	if s.DedupeWindow.Duration == 0 {
		s.DedupeWindow.Duration = DefaultDedupeWindow
	}
	if s.DedupeMaxEvents == nil && s.Bus == nil { // the embedded journal's bound
		n := DefaultDedupeMaxEvents
		s.DedupeMaxEvents = &n
	}
	ssoDefaults(s.SSO, base)
	if f := s.FleetRollouts; f != nil && f.Kubeconfig != "" {
		f.Kubeconfig = resolvePath(base, f.Kubeconfig)
	}
	if r := s.Resources; r != nil && r.Kubeconfig != "" {
		r.Kubeconfig = resolvePath(base, r.Kubeconfig)
	}
	if b := s.Bus; b != nil {
		if b.Stream == "" {
			b.Stream = DefaultBusStream
		}
		if b.Replicas == 0 {
			b.Replicas = DefaultBusReplicas
		}
		if b.Partitions == 0 {
			b.Partitions = DefaultBusPartitions
		}
		if b.Replica == "" {
			b.Replica = cmpOr(os.Getenv("POD_NAME"), hostname())
		}
		if b.CredentialsFile != "" {
			b.CredentialsFile = resolvePath(base, b.CredentialsFile)
		}
		if t := b.TLS; t != nil {
			for _, f := range []*string{&t.CAFile, &t.CertFile, &t.KeyFile} {
				if *f != "" {
					*f = resolvePath(base, *f)
				}
			}
		}
	}
	if s.DataDir == "" {
		s.DataDir = DefaultDataDir
	}
	s.DataDir = resolvePath(base, s.DataDir)
	if s.APIToken != nil && s.APIToken.File != "" {
		s.APIToken.File = resolvePath(base, s.APIToken.File)
	}
	for _, t := range s.APITokens {
		if t.Secret != nil && t.Secret.File != "" {
			t.Secret.File = resolvePath(base, t.Secret.File)
		}
	}

	for i := range c.Receivers {
		applyReceiverDefaults(&c.Receivers[i], base)
	}

	f := &c.Fleet
	if f.Executor == "" {
		f.Executor = DefaultExecutor
	}
	if t := f.Tekton; t != nil {
		if t.Namespace == "" {
			t.Namespace = DefaultTektonNamespace
		}
		if t.ManageSecrets == nil {
			t.ManageSecrets = ptr.To(true)
		}
		if t.Kubeconfig != "" {
			t.Kubeconfig = resolvePath(base, t.Kubeconfig)
		}
	}
	if f.MetricsServer == "" {
		f.MetricsServer = DefaultMetricsServer
	}
	if f.Poll.Interval == nil {
		f.Poll.Interval = &Duration{DefaultRegistryPoll}
	}
	for i := range f.Clusters {
		if f.Clusters[i].Kubeconfig != "" {
			f.Clusters[i].Kubeconfig = resolvePath(base, f.Clusters[i].Kubeconfig)
		}
	}
	if d := f.Discovery; d != nil && d.ArgoCD != nil {
		if d.ArgoCD.Namespace == "" {
			d.ArgoCD.Namespace = DefaultArgoCDNamespace
		}
		if d.ArgoCD.Kubeconfig != "" {
			d.ArgoCD.Kubeconfig = resolvePath(base, d.ArgoCD.Kubeconfig)
		}
	}
	if d := f.Discovery; d != nil && d.ClusterProfiles != nil && d.ClusterProfiles.Kubeconfig != "" {
		d.ClusterProfiles.Kubeconfig = resolvePath(base, d.ClusterProfiles.Kubeconfig)
	}
	if d := f.Discovery; d != nil && d.ClusterAPI != nil && d.ClusterAPI.Kubeconfig != "" {
		d.ClusterAPI.Kubeconfig = resolvePath(base, d.ClusterAPI.Kubeconfig)
	}
	for i := range f.Waves {
		if f.Waves[i].Name == "" {
			f.Waves[i].Name = fmt.Sprintf("wave-%d", i+1)
		}
	}

	for i := range c.Applications {
		applyApplicationDefaults(&c.Applications[i])
		defaultMetricsAddress(&c.Applications[i], f.MetricsServer)
		resolveGitFiles(&c.Applications[i], base)
		if v := c.Applications[i].Verify; v != nil {
			for j := range v.Signatures {
				a := &v.Signatures[j]
				if a.Key != nil && a.Key.File != "" {
					a.Key.File = resolvePath(base, a.Key.File)
				}
				if a.TrustedRoot != nil && a.TrustedRoot.File != "" {
					a.TrustedRoot.File = resolvePath(base, a.TrustedRoot.File)
				}
				if k := a.Keyless; k != nil && k.TrustedRoot != nil && k.TrustedRoot.File != "" {
					k.TrustedRoot.File = resolvePath(base, k.TrustedRoot.File)
				}
			}
		}
	}
}

func applyReceiverDefaults(r *Receiver, base string) {
	if sec := r.Secret; sec != nil && sec.File != "" {
		sec.File = resolvePath(base, sec.File)
	}
	if o := r.OIDC; o != nil {
		if o.Issuer == "" {
			o.Issuer = DefaultOIDCIssuer
		}
		if o.JWKSFile != "" {
			o.JWKSFile = resolvePath(base, o.JWKSFile)
		} else if o.JWKSURL == "" {
			o.JWKSURL = DefaultOIDCJWKSURL
		}
	}
	if r.RateLimit != nil && r.RateLimit.Burst == 0 {
		r.RateLimit.Burst = max(1, int(2*r.RateLimit.PerSecond))
	}
}

// applyValidationDefaults fills the validation's defaults and turns its
// PromQL items into custom metrics of the delivery's analysis, where the
// delivery's own rules validate and render them.
func applyValidationDefaults(a *Application) {
	v := a.Validation
	if v == nil {
		return
	}
	if v.ValidationPeriod.Duration == 0 {
		v.ValidationPeriod.Duration = DefaultValidationPeriod
	}
	n := 0
	for _, it := range v.Items {
		if m := it.Manual; m != nil && m.StatusAfterDeadline == "" {
			m.StatusAfterDeadline = "none"
		}
		q := it.PromQL
		if q == nil || q.Query == "" || !isHTTPURL(q.PrometheusURL, true) {
			// Validation reports it where the user wrote it.
			continue
		}
		n++
		if q.Name == "" {
			q.Name = fmt.Sprintf("promql-%d", n)
		}
		if q.ValueInRange == nil {
			q.ValueInRange = &ThresholdRange{Min: ptr.To(1.0)}
		}
		a.Delivery.TrafficAnalysis.Metrics = append(a.Delivery.TrafficAnalysis.Metrics, Metric{
			Name:           q.Name,
			ThresholdRange: q.ValueInRange,
			CustomMetric: &CustomMetric{
				Provider: MetricProvider{Type: "prometheus", Address: q.PrometheusURL},
				Query:    q.Query,
			},
		})
	}
}

// defaultMetricsAddress points the application's Prometheus queries that
// name no server (custom metrics, Kanary's promQL) at the fleet's: Flagger
// itself refuses a MetricTemplate without an address.
func defaultMetricsAddress(a *Application, server string) {
	ms := a.Delivery.TrafficAnalysis.Metrics
	for i := range ms {
		if cm := ms[i].CustomMetric; cm != nil && cm.Provider.Type == DefaultMetricProvider && cm.Provider.Address == "" {
			cm.Provider.Address = server
		}
	}
}

// isHTTPURL reports whether s is an absolute http(s) URL (or empty, when
// emptyOK).
func isHTTPURL(s string, emptyOK bool) bool {
	if s == "" {
		return emptyOK
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func applyApplicationDefaults(a *Application) {
	if a.OnNewVersion == "" {
		a.OnNewVersion = OnNewVersionSupersede
	}
	if a.Track == "" {
		a.Track = DefaultTrack
	}
	if a.Namespace == "" {
		a.Namespace = DefaultNamespace
	}
	if a.Workload.Kind == "" {
		a.Workload.Kind = DefaultWorkloadKind
	}
	if a.Service.PortDiscovery == nil {
		a.Service.PortDiscovery = ptr.To(true)
	}
	applyValidationDefaults(a)
	if g := a.GitOps; g != nil {
		applyGitOpsDefaults(g)
	}
	if g := a.Git(); g != nil {
		if g.Branch == "" {
			g.Branch = DefaultGitBranch
		}
		if g.Render == "" {
			g.Render = DefaultGitRender
		}
		if h := g.Helm; h != nil && h.ReleaseName == "" {
			h.ReleaseName = a.Name
		}
	}
	d := &a.Delivery
	r, an := &d.TrafficRouting, &d.TrafficAnalysis
	// Kurator's names fill in flotilla's, which rendering reads; validation
	// reports the two set to different values.
	if d.Provider == "" {
		d.Provider = d.TrafficRoutingProvider
	}
	if d.Provider == "" {
		d.Provider = DefaultProvider
	}
	if d.Strategy == "" {
		switch {
		case r.CanaryStrategy != nil:
			d.Strategy = StrategyCanary
		case len(r.Match) > 0:
			d.Strategy = StrategyABTesting
		default:
			d.Strategy = DefaultStrategy
		}
	}
	defaultDuration(&d.Interval, an.CheckIntervalSeconds, DefaultInterval)
	defaultDuration(&d.ProgressDeadline, d.RolloutTimeoutSeconds, DefaultProgressDeadline)
	defaultDuration(&r.Timeout, r.TimeoutSeconds, 0)
	if d.Threshold == 0 {
		d.Threshold = cmp.Or(an.CheckFailedTimes, DefaultThreshold)
	}
	if d.Iterations == 0 {
		d.Iterations = r.AnalysisTimes
	}
	if d.Iterations == 0 && d.Strategy != StrategyCanary {
		d.Iterations = DefaultIterations // a canary advances by weight instead
	}
	if d.Strategy == StrategyCanary && Supports(d.Provider, StrategyCanary) {
		if r.CanaryStrategy == nil {
			r.CanaryStrategy = &CanaryStrategy{}
		}
		if cs := r.CanaryStrategy; len(cs.StepWeights) == 0 {
			cs.StepWeight = cmp.Or(cs.StepWeight, DefaultStepWeight)
			cs.MaxWeight = cmp.Or(cs.MaxWeight, DefaultMaxWeight)
		}
	}
	if d.Provider == ProviderKuma && r.Protocol == "" {
		r.Protocol = DefaultKumaProtocol
	}
	for i := range an.Metrics {
		m := &an.Metrics[i]
		defaultDuration(&m.Interval, m.IntervalSeconds, DefaultMetricInterval)
		if m.CustomMetric != nil && m.CustomMetric.Provider.Type == "" {
			m.CustomMetric.Provider.Type = DefaultMetricProvider
		}
	}
	defaultDuration(&an.Webhooks.Timeout, an.Webhooks.TimeoutSeconds, 0)
	if as := d.Autoscale; as != nil && as.MinReplicas == 0 {
		as.MinReplicas = DefaultMinReplicas
	}
	for i := range d.Webhooks {
		w := &d.Webhooks[i]
		if w.Type == "" {
			w.Type = DefaultWebhookType
		}
		if w.Timeout.Duration == 0 {
			w.Timeout.Duration = DefaultWebhookTimeout
		}
	}
}

// defaultDuration sets an unset d to seconds (Kurator's name for it), else
// to def.
func defaultDuration(d *Duration, seconds int, def time.Duration) {
	switch {
	case d.Duration != 0:
	case seconds != 0:
		d.Duration = time.Duration(seconds) * time.Second
	default:
		d.Duration = def
	}
}

// resolveGitFiles resolves the files of an application's git credentials
// (gitops, its pull requests', a git source's) against the config's
// directory, as every other file of the config.
func resolveGitFiles(a *Application, base string) {
	secret := func(s *Secret) {
		if s != nil && s.File != "" {
			s.File = resolvePath(base, s.File)
		}
	}
	if g := a.GitOps; g != nil {
		secret(g.Password)
		secret(g.Token)
		if g.SSHKeyFile != "" {
			g.SSHKeyFile = resolvePath(base, g.SSHKeyFile)
		}
		if g.PullRequest != nil {
			secret(g.PullRequest.Token)
		}
	}
	if a.Source != nil && a.Source.Git != nil {
		g := a.Source.Git
		secret(g.Password)
		secret(g.Token)
		if g.SSHKeyFile != "" {
			g.SSHKeyFile = resolvePath(base, g.SSHKeyFile)
		}
	}
}

func resolvePath(base, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}

// ExternalURLFor is the default of server.externalURL: the URL clusters use
// to reach flotilla, derived from the address it listens on (the bound
// address, so that ":0" gets its real port). An empty or unspecified host
// becomes 127.0.0.1: it suits a local fleet, and anything else needs
// externalURL set anyway. A configured externalURL is never replaced.
func ExternalURLFor(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen // validate reports the bad address
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// applyGitOpsDefaults fills a GitOps block's edit and mode and, in mode
// pullRequest, the host's API URL and repository from the url.
func applyGitOpsDefaults(g *GitOps) {
	if g.Edit == "" {
		g.Edit = DefaultGitOpsEdit
	}
	if g.Mode == "" {
		g.Mode = DefaultGitOpsMode
	}
	pr := g.PullRequest
	if pr == nil {
		return
	}
	if pr.MergeMethod == "" {
		pr.MergeMethod = DefaultMergeMethod
	}
	if pr.Revert == "" {
		pr.Revert = GitOpsModePullRequest
	}
	if pr.MergeDeadline == nil {
		pr.MergeDeadline = &Duration{DefaultMergeDeadline}
	}
	if pr.PollInterval == nil {
		pr.PollInterval = &Duration{DefaultPollInterval}
	}
	if pr.MergeRetryFor == nil {
		pr.MergeRetryFor = &Duration{DefaultMergeRetryFor}
	}
	host, path := repoHostPath(g.URL)
	if pr.Repository == "" {
		pr.Repository = path
	}
	if pr.APIURL == "" {
		switch pr.Host {
		case "github":
			pr.APIURL = DefaultGitHubAPI
		case "gitlab":
			if host != "" {
				pr.APIURL = "https://" + host + "/api/v4"
			}
		case "gitea", "forgejo":
			if host != "" {
				pr.APIURL = "https://" + host
			}
		}
	}
}

// repoHostPath splits a repository URL (https://host/owner/name.git,
// ssh://git@host/owner/name, git@host:owner/name.git) into its host and its
// path without ".git"; both empty for a file:// URL or a local path.
func repoHostPath(raw string) (host, path string) {
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" && u.Scheme != "file" && u.Host != "" {
		host, path = u.Hostname(), u.Path
	} else if at := strings.Index(raw, "@"); at >= 0 && !strings.Contains(raw, "://") {
		// scp-like: user@host:path
		h, p, ok := strings.Cut(raw[at+1:], ":")
		if !ok {
			return "", ""
		}
		host, path = h, p
	} else {
		return "", ""
	}
	path = strings.TrimSuffix(strings.Trim(path, "/"), ".git")
	return host, path
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
