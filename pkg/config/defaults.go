package config

import (
	"fmt"
	"net"
	"path/filepath"
	"time"
)

// Defaults applied by Load and Parse to fields left empty or zero.
const (
	DefaultListen           = "127.0.0.1:8080"
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
	DefaultOIDCJWKSURL      = "https://www.googleapis.com/oauth2/v3/certs"
)

// applyDefaults fills empty fields and makes relative paths absolute against
// base. It never fails: validate reports what defaults cannot fix.
func applyDefaults(c *Config, base string) {
	s := &c.Server
	if s.Listen == "" {
		s.Listen = DefaultListen
	}
	if s.DataDir == "" {
		s.DataDir = DefaultDataDir
	}
	s.DataDir = resolvePath(base, s.DataDir)
	if s.ExternalURL == "" {
		s.ExternalURL = defaultExternalURL(s.Listen)
	}

	for i := range c.Receivers {
		applyReceiverDefaults(&c.Receivers[i], base)
	}

	f := &c.Fleet
	if f.Executor == "" {
		f.Executor = DefaultExecutor
	}
	for i := range f.Clusters {
		if f.Clusters[i].Kubeconfig != "" {
			f.Clusters[i].Kubeconfig = resolvePath(base, f.Clusters[i].Kubeconfig)
		}
	}
	for i := range f.Waves {
		if f.Waves[i].Name == "" {
			f.Waves[i].Name = fmt.Sprintf("wave-%d", i+1)
		}
	}

	for i := range c.Applications {
		applyApplicationDefaults(&c.Applications[i])
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

func applyApplicationDefaults(a *Application) {
	if a.Track == "" {
		a.Track = DefaultTrack
	}
	if a.Namespace == "" {
		a.Namespace = DefaultNamespace
	}
	if a.Workload.Kind == "" {
		a.Workload.Kind = DefaultWorkloadKind
	}
	d := &a.Delivery
	if d.Strategy == "" {
		d.Strategy = DefaultStrategy
	}
	if d.Interval.Duration == 0 {
		d.Interval.Duration = DefaultInterval
	}
	if d.Iterations == 0 {
		d.Iterations = DefaultIterations
	}
	if d.Threshold == 0 {
		d.Threshold = DefaultThreshold
	}
	if d.ProgressDeadline.Duration == 0 {
		d.ProgressDeadline.Duration = DefaultProgressDeadline
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

func resolvePath(base, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}

// defaultExternalURL derives the URL clusters use to reach flotilla from
// the listen address. An empty or unspecified host becomes 127.0.0.1: it
// suits a local fleet, and anything else needs externalURL set anyway.
func defaultExternalURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen // validate reports the bad address
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
