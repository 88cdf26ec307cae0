package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/tektoncd/pipeline/pkg/apis/pipeline/pod"
	"golang.org/x/net/http/httpguts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Problem is one thing wrong with a config.
type Problem struct {
	// Path locates the field, such as "fleet.waves[1].clusters[0]".
	Path string
	// Message says what is wrong and, where it helps, what is wanted.
	Message string
}

// String returns the problem as "path: message".
func (p Problem) String() string { return p.Path + ": " + p.Message }

// ValidationError lists every problem of a config that decoded but is
// invalid, in the order found.
type ValidationError struct {
	Problems []Problem
}

// Error returns the problems one per line, each as "path: message".
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// validator collects problems. Its checks also read secrets and stat
// kubeconfigs, so that a missing file is a problem like any other.
type validator struct {
	problems []Problem
	clusters []Cluster // the fleet's, for the applications' selectors
	// discovers: fleet.discovery or the Cluster resources
	// (server.resources.platformNamespaces) may bring clusters the file
	// has not, so a selector that takes none of the file's is no problem.
	discovers bool
}

func (v *validator) addf(path, format string, args ...any) {
	v.problems = append(v.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// validate checks a defaulted config and resolves receivers' secrets;
// earlier are problems found before defaults (kuratorAliases).
func validate(c *Config, earlier ...Problem) *ValidationError {
	v := validator{problems: earlier, discovers: c.Fleet.Discovery != nil || c.Server.Resources != nil && len(c.Server.Resources.PlatformNamespaces) > 0}
	v.server(&c.Server)
	seenSinks := map[string]bool{}
	for i, u := range c.Events.CDEvents {
		p := fmt.Sprintf("events.cdevents[%d]", i)
		v.httpURL(p, u)
		if seenSinks[u] {
			v.addf(p, "%q is listed twice", u)
		}
		seenSinks[u] = true
	}
	if c.Events.Sink != "" {
		v.httpURL("events.sink", c.Events.Sink)
	}
	v.telemetry(&c.Telemetry)
	v.receivers(c.Receivers)
	v.fleet(&c.Fleet)
	v.clusters = c.Fleet.Clusters
	v.applications(c.Applications, c.Server.Resources != nil)
	v.triggersReachable(c)
	v.projects(c)
	v.resourcesInProjects(c)
	v.releaseSets(c)
	if c.Registries != nil {
		v.registries(c.Registries)
	}
	if len(v.problems) == 0 {
		return nil
	}
	return &ValidationError{Problems: v.problems}
}

func (v *validator) server(s *Server) {
	if _, port, err := net.SplitHostPort(s.Listen); err != nil {
		v.addf("server.listen", "invalid address %q: want host:port, such as %q", s.Listen, DefaultListen)
	} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		v.addf("server.listen", "invalid port %q: want a number 0..65535", port)
	}
	if s.ExternalURL != "" {
		v.httpURL("server.externalURL", s.ExternalURL)
	}
	v.dnsLabel("server.instance", "instance", s.Instance)
	if s.Workers < 1 || s.Workers > 1024 {
		v.addf("server.workers", "%d is out of range: want 1 to 1024", s.Workers)
	}
	if s.Retention != nil && s.Retention.Duration < 0 {
		v.addf("server.retention", "%s is negative: want a duration, or 0s to keep every event", s.Retention.Duration)
	}
	if s.DedupeWindow.Duration < 0 {
		v.addf("server.dedupeWindow", "%s is negative: want a duration such as 24h", s.DedupeWindow.Duration)
	}
	if r := s.Retention; r != nil && r.Duration > 0 && r.Duration < s.DedupeWindow.Duration {
		v.addf("server.retention", "%s is shorter than server.dedupeWindow (%s): the ids of deleted events would be forgotten at a restart; want at least the window, or 0s", r.Duration, s.DedupeWindow.Duration)
	}
	if s.DedupeMaxEvents != nil && *s.DedupeMaxEvents < 0 {
		v.addf("server.dedupeMaxEvents", "%d is negative: want a number of events, or 0 for no bound", *s.DedupeMaxEvents)
	}
	if s.Bus != nil {
		v.bus(s)
	}
	if f := s.FleetRollouts; f != nil {
		v.dnsLabel("server.fleetRollouts.namespace", "namespace", f.Namespace)
		v.file("server.fleetRollouts.kubeconfig", f.Kubeconfig)
	}
	if r := s.Resources; r != nil {
		seen := map[string]bool{}
		for i, ns := range r.Namespaces {
			p := fmt.Sprintf("server.resources.namespaces[%d]", i)
			v.dnsLabel(p, "namespace", ns)
			if seen[ns] {
				v.addf(p, "namespace %q is listed twice", ns)
			}
			seen[ns] = true
		}
		seen = map[string]bool{}
		for i, ns := range r.PlatformNamespaces {
			p := fmt.Sprintf("server.resources.platformNamespaces[%d]", i)
			v.dnsLabel(p, "namespace", ns)
			if seen[ns] {
				v.addf(p, "namespace %q is listed twice", ns)
			}
			seen[ns] = true
		}
		v.file("server.resources.kubeconfig", r.Kubeconfig)
	}
	for i, p := range s.TrustedProxies {
		if _, err := ParseProxy(p); err != nil {
			v.addf(fmt.Sprintf("server.trustedProxies[%d]", i), "%v", err)
		}
	}
	v.sso(s.SSO)
	v.sessionSweep(s)
	if s.APIToken != nil {
		s.APITokenValue = v.resolveSecret("server.apiToken", s.APIToken)
	}
	names := map[string]string{}
	if s.APIToken != nil {
		names[DefaultTokenName] = "server.apiToken"
	}
	for i := range s.APITokens {
		t := &s.APITokens[i]
		p := fmt.Sprintf("server.apiTokens[%d]", i)
		v.name(p, "token", t.Name, names)
		if t.Secret == nil {
			v.addf(p+".secret", "required: where the token comes from (env or file)")
			continue
		}
		t.Value = v.resolveSecret(p+".secret", t.Secret)
	}
}

var busStreamName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// bus checks scale-out mode's settings.
func (v *validator) bus(s *Server) {
	b := s.Bus
	if b.URL == "" {
		v.addf("server.bus.url", "required: the NATS servers, such as nats://nats:4222")
	}
	for _, u := range strings.Split(b.URL, ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "nats" && pu.Scheme != "tls") || pu.Host == "" {
			v.addf("server.bus.url", "%q is not a nats:// or tls:// URL with a host", u)
		}
	}
	if !busStreamName.MatchString(b.Stream) {
		v.addf("server.bus.stream", "%q: want 1-32 letters, digits, '-' or '_'", b.Stream)
	}
	if b.Replicas != 1 && b.Replicas != 3 && b.Replicas != 5 {
		v.addf("server.bus.replicas", "%d: want 1, 3 or 5 (JetStream's replication factors)", b.Replicas)
	}
	if b.Partitions < 1 || b.Partitions > 1024 {
		v.addf("server.bus.partitions", "%d is out of range: want 1 to 1024", b.Partitions)
	}
	if b.Replica == "" {
		v.addf("server.bus.replica", "required: no $POD_NAME nor host name to default to")
	}
	v.file("server.bus.credentialsFile", b.CredentialsFile)
	if t := b.TLS; t != nil {
		v.file("server.bus.tls.caFile", t.CAFile)
		v.file("server.bus.tls.certFile", t.CertFile)
		v.file("server.bus.tls.keyFile", t.KeyFile)
		if (t.CertFile == "") != (t.KeyFile == "") {
			v.addf("server.bus.tls", "certFile and keyFile go together (mutual TLS), or neither")
		}
	}
	if s.DedupeMaxEvents != nil {
		v.addf("server.dedupeMaxEvents", "bounds the embedded journal's ids; with server.bus the stream's de-duplication window (server.dedupeWindow) is the bound: remove it")
	}
}

// registries checks the registry credentials: each Docker config file
// readable and holding "auths" (the config check in the chart's init
// container then names a Secret mounted without them), each provider known.
func (v *validator) registries(r *Registries) {
	seen := map[string]bool{}
	for i, f := range r.DockerConfigFiles {
		p := fmt.Sprintf("registries.dockerConfigFiles[%d]", i)
		switch {
		case f == "":
			v.addf(p, "empty: want the path of a Docker config file")
		case seen[f]:
			v.addf(p, "%q is listed twice", f)
		default:
			v.dockerConfig(p, f)
		}
		seen[f] = true
	}
	listed := map[string]bool{}
	for i, name := range r.Providers {
		p := fmt.Sprintf("registries.providers[%d]", i)
		v.oneOf(p, "registry provider", name, RegistryProviders)
		if listed[name] {
			v.addf(p, "%q is listed twice", name)
		}
		listed[name] = true
	}
}

func (v *validator) dockerConfig(path, name string) {
	data, err := os.ReadFile(name)
	if err != nil {
		v.addf(path, "%v", err)
		return
	}
	var c struct {
		Auths map[string]json.RawMessage `json:"auths"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		v.addf(path, "%s is not a Docker config (JSON with \"auths\"): %v", name, err)
		return
	}
	if len(c.Auths) == 0 {
		v.addf(path, `%s has no "auths": want {"auths": {"registry.example.com": {"auth": "<base64 of user:password>"}}}, as kubectl create secret docker-registry writes it`, name)
	}
}

// file checks that a named file, if any, can be read.
func (v *validator) file(path, name string) {
	if name == "" {
		return
	}
	if _, err := os.Stat(name); err != nil {
		v.addf(path, "%v", err)
	}
}

func (v *validator) receivers(rs []Receiver) {
	if len(rs) == 0 {
		v.addf("receivers", "at least one receiver is required")
	}
	if len(rs) > 0 && !slices.ContainsFunc(rs, func(r Receiver) bool { return r.Type == ReceiverFlagger }) {
		v.addf("receivers", "a receiver of type flagger is required: canaries report their progress to it")
	}
	seen := map[string]string{}
	for i := range rs {
		r := &rs[i]
		p := fmt.Sprintf("receivers[%d]", i)
		v.name(p, "receiver", r.Name, seen)
		v.oneOf(p+".type", "receiver type", r.Type, ReceiverTypes)
		if r.Type == ReceiverGAR {
			v.oidc(p, r)
		} else {
			v.secret(p, r)
			if r.OIDC != nil {
				v.addf(p+".oidc", "only gar receivers authenticate with OIDC")
			}
		}
		v.receiverOptions(p, r)
	}
}

// triggersReachable refuses KubeCD image triggers that nothing can fire: a
// trigger fires on an image push a receiver reports, and no receiver of
// the config reports image pushes. Each such trigger is named.
func (v *validator) triggersReachable(c *Config) {
	if slices.ContainsFunc(c.Receivers, func(r Receiver) bool { return slices.Contains(ImageReceiverTypes, r.Type) }) {
		return
	}
	for _, a := range c.Applications {
		g := a.Git()
		if g == nil || g.KubeCD == nil {
			continue
		}
		for _, i := range g.KubeCD.Images {
			v.addf("receivers", "release %s of environment %s: trigger %d tracks %s, but no receiver reports image pushes, so it would never fire (flotilla does not poll for triggers): add a receiver of one of the types %s",
				i.Release, i.Environment, i.Trigger, i.Repository, strings.Join(ImageReceiverTypes, ", "))
		}
	}
}

// oidc checks the credentials of a gar receiver: OIDC, not a secret.
func (v *validator) oidc(path string, r *Receiver) {
	if r.Secret != nil {
		v.addf(path+".secret", "gar receivers authenticate with oidc, not a secret")
	}
	o := r.OIDC
	switch {
	case o == nil && !r.Insecure:
		v.addf(path+".oidc", "required unless insecure: true: set oidc.audience to the push subscription's audience")
		return
	case o == nil:
		return
	case r.Insecure:
		v.addf(path+".insecure", "cannot be true when oidc is set; remove one of them")
	}
	path += ".oidc"
	if o.Audience == "" {
		v.addf(path+".audience", "required: the audience set on the Pub/Sub push subscription")
	}
	if o.JWKSURL != "" && o.JWKSFile != "" {
		v.addf(path, "set at most one of jwksURL and jwksFile")
	}
	v.httpURL(path+".issuer", o.Issuer)
	if o.JWKSFile == "" {
		v.httpURL(path+".jwksURL", o.JWKSURL)
	}
	if o.JWKSFile != "" {
		if _, err := os.Stat(o.JWKSFile); err != nil {
			v.addf(path+".jwksFile", "%v", err)
		}
	}
}

// receiverOptions checks the options only some receiver types take.
func (v *validator) receiverOptions(path string, r *Receiver) {
	if r.Header != "" {
		if !slices.Contains(headerReceivers, r.Type) {
			v.addf(path+".header", "only %s receivers send a configured header", strings.Join(headerReceivers, ", "))
		} else if !httpguts.ValidHeaderFieldName(r.Header) {
			v.addf(path+".header", "%q is not a valid HTTP header name", r.Header)
		}
	}
	switch {
	case r.Type == ReceiverNexus && r.Registry == "":
		v.addf(path+".registry", "required for nexus receivers: the host[:port] of the Docker connector, since Nexus does not name it")
	case r.Registry != "" && r.Type != ReceiverNexus:
		v.addf(path+".registry", "only nexus receivers take a registry: the other senders name it")
	case r.Registry != "":
		if strings.ContainsAny(r.Registry, "/ ") {
			v.addf(path+".registry", "%q is not host[:port]", r.Registry)
		}
	}
	if rl := r.RateLimit; rl != nil {
		if !(rl.PerSecond > 0) {
			v.addf(path+".rateLimit.perSecond", "must be > 0")
		}
		if rl.Burst < 1 {
			v.addf(path+".rateLimit.burst", "must be >= 1")
		}
	}
}

// secret resolves r's secret into r.SecretValue. Messages name the variable
// or file, never the value.
func (v *validator) secret(path string, r *Receiver) {
	s := r.Secret
	switch {
	case s == nil && !r.Insecure:
		v.addf(path+".secret", "required unless insecure: true, since a receiver without a secret accepts anyone's requests")
		return
	case s == nil:
		return
	case r.Insecure:
		v.addf(path+".insecure", "cannot be true when a secret is set; remove one of them")
	}
	r.SecretValue = v.resolveSecret(path+".secret", s)
}

// resolveSecret reads s; "" after reporting a problem. Messages name the
// variable or file, never the value.
func (v *validator) resolveSecret(path string, s *Secret) string {
	switch {
	case (s.Env == "") == (s.File == ""):
		v.addf(path, "set exactly one of env and file")
	case s.Env != "":
		val := os.Getenv(s.Env)
		if val == "" {
			v.addf(path+".env", "environment variable %q is not set or is empty", s.Env)
		}
		return val
	default:
		b, err := os.ReadFile(s.File)
		if err != nil {
			v.addf(path+".file", "reading secret file: %v", err)
			return ""
		}
		val := strings.TrimRight(string(b), "\r\n")
		if val == "" {
			v.addf(path+".file", "secret file %q is empty", s.File)
		}
		return val
	}
	return ""
}

func (v *validator) fleet(f *Fleet) {
	v.oneOf("fleet.executor", "executor", f.Executor, Executors)
	v.tekton(f)
	v.httpURL("fleet.metricsServer", f.MetricsServer)
	v.poll("fleet.poll", &f.Poll)
	if r := f.Reconcile.Interval; r != nil && r.Duration != 0 && r.Duration < MinPollInterval {
		v.addf("fleet.reconcile.interval", "%s: want 0s (off) or at least %s", r.Duration, MinPollInterval)
	}

	v.discovery("fleet.discovery", f.Discovery)
	if len(f.Clusters) == 0 && !v.discovers {
		v.addf("fleet.clusters", "at least one cluster is required")
	}
	seen := map[string]string{}
	for i, cl := range f.Clusters {
		p := fmt.Sprintf("fleet.clusters[%d]", i)
		if cl.Source != "" { // discovered: its problems are its source's
			p = cl.Source
		}
		v.name(p, "cluster", cl.Name, seen)
		if cl.KubeconfigData == nil {
			v.kubeconfig(p+".kubeconfig", cl.Kubeconfig)
		}
		v.labels(p+".labels", cl.Labels)
	}

	if len(f.Waves) == 0 {
		v.addf("fleet.waves", "at least one wave is required")
	}
	v.wavePolicy("fleet.wavePolicy", f.WavePolicy)
	v.freezeWindows("fleet.freezeWindows", f.FreezeWindows)
	waveNames := map[string]string{}
	waveOf := map[string]int{} // cluster name to 1 + index of its wave
	for i := range f.Waves {
		w := &f.Waves[i]
		p := fmt.Sprintf("fleet.waves[%d]", i)
		v.name(p, "wave", w.Name, waveNames)
		if len(w.Clusters) == 0 && w.Selector == nil {
			v.addf(p+".clusters", "a wave needs at least one cluster, or a selector")
		}
		w.Members = nil
		for j, cn := range w.Clusters {
			cp := fmt.Sprintf("%s.clusters[%d]", p, j)
			switch prev := waveOf[cn]; {
			case seen[cn] == "":
				v.addf(cp, "unknown cluster %q", cn)
			case prev == i+1:
				v.addf(cp, "cluster %q is listed twice in this wave", cn)
			case prev != 0:
				v.addf(cp, "cluster %q is already in wave %q; a cluster may be in only one wave", cn, f.Waves[prev-1].Name)
			default:
				waveOf[cn] = i + 1
				w.Members = append(w.Members, cn)
			}
		}
		v.freezeWindows(p+".freezeWindows", w.FreezeWindows)
		v.wavePolicy(p, WavePolicy{MaxParallel: w.MaxParallel, MaxFailures: w.MaxFailures, BakeTime: w.BakeTime, RequiredSoakTime: w.RequiredSoakTime, Approvals: w.Approvals})
	}
	// Selectors take the clusters no wave names and no earlier selector took.
	for i := range f.Waves {
		w := &f.Waves[i]
		if w.Selector == nil {
			continue
		}
		p := fmt.Sprintf("fleet.waves[%d].selector", i)
		sel, err := metav1.LabelSelectorAsSelector(w.Selector)
		if err != nil {
			v.addf(p, "%v", err)
			continue
		}
		took := 0
		for _, cl := range f.Clusters {
			if waveOf[cl.Name] == 0 && sel.Matches(labels.Set(cl.Labels)) {
				waveOf[cl.Name] = i + 1
				w.Members = append(w.Members, cl.Name)
				took++
			}
		}
		if took == 0 && len(w.Clusters) == 0 && !v.discovers { // discovery or a Cluster resource may bring its clusters later
			v.addf(p, "selects no cluster that an earlier wave or a wave's clusters list does not have already (%s)", sel)
		}
	}
	if len(f.Waves) == 0 {
		return // "at least one wave" says it all
	}
	for i, cl := range f.Clusters {
		// A discovered cluster no wave selects is listed without a wave:
		// the inventory may hold clusters that are not this fleet's.
		if cl.Name != "" && cl.Source == "" && seen[cl.Name] == fmt.Sprintf("fleet.clusters[%d]", i) && waveOf[cl.Name] == 0 {
			v.addf(fmt.Sprintf("fleet.clusters[%d]", i),
				"cluster %q is in no wave, so it would never receive rollouts; add it to one of fleet.waves", cl.Name)
		}
	}
}

// wavePolicy checks a wave's maxParallel (a count >= 1 or a percentage
// 1-100%), maxFailures (a count >= 0 or a percentage 0-100%) and bake time.
func (v *validator) wavePolicy(path string, p WavePolicy) {
	check := func(field string, x *intstr.IntOrString, least int) {
		if x == nil {
			return
		}
		n, pct, err := intOrPercent(x)
		switch {
		case err != nil:
			v.addf(path+"."+field, "%v", err)
		case pct && (n < least || n > 100):
			v.addf(path+"."+field, "%s is out of range: want %d%% to 100%%", x.String(), least)
		case !pct && n < least:
			v.addf(path+"."+field, "%d is out of range: want at least %d, or a percentage such as \"25%%\"", n, least)
		}
	}
	check("maxParallel", p.MaxParallel, 1)
	check("maxFailures", p.MaxFailures, 0)
	if p.BakeTime != nil && p.RequiredSoakTime != nil {
		v.addf(path+".requiredSoakTime", "is an alias of bakeTime: set one of them")
	}
	if p.Bake() < 0 {
		v.addf(path+".bakeTime", "%s is negative", p.Bake())
	}
	v.approvals(path+".approvals", p.Approvals)
}

// intOrPercent reads a count or a percentage ("25%").
func intOrPercent(x *intstr.IntOrString) (n int, percent bool, err error) {
	if x.Type == intstr.Int {
		return x.IntValue(), false, nil
	}
	s, ok := strings.CutSuffix(x.StrVal, "%")
	n, err = strconv.Atoi(s)
	if !ok || err != nil {
		return 0, false, fmt.Errorf("invalid value %q: want a count such as 2 or a percentage such as \"25%%\"", x.StrVal)
	}
	return n, true, nil
}

func (v *validator) kubeconfig(path, file string) {
	if file == "" {
		v.addf(path, "required: the path of the cluster's kubeconfig")
		return
	}
	fi, err := os.Stat(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		v.addf(path, "file %q does not exist", file)
	case err != nil:
		v.addf(path, "checking kubeconfig: %v", err)
	case fi.IsDir():
		v.addf(path, "%q is a directory; want a kubeconfig file", file)
	}
}

func (v *validator) labels(path string, labels map[string]string) {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := fmt.Sprintf("%s[%q]", path, k)
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			v.addf(p, "invalid label key: %s", strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(labels[k]); len(errs) > 0 {
			v.addf(p, "invalid label value %q: %s", labels[k], strings.Join(errs, "; "))
		}
	}
}

// applications checks the applications; with resources (server.resources)
// the file may have none: the management cluster's resources bring them.
func (v *validator) applications(as []Application, resources bool) {
	if len(as) == 0 && !resources {
		v.addf("applications", "at least one application is required")
	}
	seen := map[string]string{}
	for i, a := range as {
		p := fmt.Sprintf("applications[%d]", i)
		v.name(p, "application", a.Name, seen)
		switch {
		case a.Git() != nil && a.Image != "":
			v.addf(p+".image", "set either image or source.git: an application follows an image repository or a git repository")
		case a.Git() != nil:
			v.gitSource(p+".source.git", a)
		case a.Source != nil:
			v.addf(p+".source.git", "required: the git repository the application follows (or drop source and set image)")
		default:
			v.image(p+".image", a.Image)
		}
		v.oneOf(p+".track", "track", string(a.Track), tracks())
		v.dnsLabel(p+".namespace", "namespace", a.Namespace)
		v.workload(p+".workload", a.Workload)
		switch port := a.Service.Port; {
		case a.Workload.Kind == KindJob: // no canary, no service
		case port == 0:
			v.addf(p+".service.port", "required: the port the workload serves on, 1..65535")
		case port < 0 || port > 65535:
			v.addf(p+".service.port", "port %d out of range 1..65535", port)
		}
		v.delivery(p, a)
		v.validation(p+".validation", a.Validation)
		v.gitops(p+".gitops", a.GitOps)
		v.clusterSelector(p+".clusterSelector", "application", a)
		if f := a.TagFilter; f != nil {
			if f.Pattern == "" {
				v.addf(p+".tagFilter.pattern", "required: the regular expression tags must match")
			} else if re, err := f.Regexp(); err != nil {
				v.addf(p+".tagFilter.pattern", "%v", err)
			} else if f.Extract != "" && !strings.Contains(f.Extract, "$") {
				v.addf(p+".tagFilter.extract", "%q names no group of the pattern: want a template such as \"$version\" (groups: %v)", f.Extract, re.SubexpNames()[1:])
			}
		}
		for j, d := range a.DenyTags {
			if d == "" {
				v.addf(fmt.Sprintf("%s.denyTags[%d]", p, j), "empty: a regular expression of tags never to roll out")
			} else if _, err := regexp.Compile(d); err != nil {
				v.addf(fmt.Sprintf("%s.denyTags[%d]", p, j), "%v", err)
			}
		}
		if a.Semver != "" {
			if _, err := semver.NewConstraint(a.Semver); err != nil {
				v.addf(p+".semver", "constraint %q: %v", a.Semver, err)
			} else if a.Track == TrackNewest {
				v.addf(p+".semver", "track Newest follows the newest tag whatever its version: a semver constraint needs a semantic track")
			}
		}
		v.oneOf(p+".onNewVersion", "onNewVersion", a.OnNewVersion, OnNewVersions)
		v.freezeWindows(p+".freezeWindows", a.FreezeWindows)
		v.verify(p+".verify", &as[i])
		v.poll(p+".poll", a.Poll)
		if a.DriftPolicy != "" {
			v.oneOf(p+".driftPolicy", "driftPolicy", a.DriftPolicy, DriftPolicies)
		}
	}
}

// MinPollInterval is the shortest poll interval: a registry listed more
// often than this is hammered, not watched.
const MinPollInterval = time.Second

// poll checks a poll: an interval of 0s (off) or at least MinPollInterval.
func (v *validator) poll(path string, p *Poll) {
	if p == nil || p.Interval == nil {
		return
	}
	if d := p.Interval.Duration; d != 0 && d < MinPollInterval {
		v.addf(path+".interval", "%s: want 0s (off) or at least %s", d, MinPollInterval)
	}
}

// verify checks an application's signature authorities and reads their
// keys and roots.
func (v *validator) verify(path string, a *Application) {
	if a.Verify == nil {
		return
	}
	if len(a.Verify.Signatures) == 0 {
		v.addf(path+".signatures", "required: at least one key or keyless identity (or remove verify)")
	}
	names := map[string]bool{}
	trustedRoot := ""
	keys := 0
	for i := range a.Verify.Signatures {
		s := &a.Verify.Signatures[i]
		p := fmt.Sprintf("%s.signatures[%d]", path, i)
		switch {
		case s.Name == "":
			v.addf(p+".name", "required: names the signer in messages")
		case names[s.Name]:
			v.addf(p+".name", "%q is used twice", s.Name)
		}
		names[s.Name] = true
		if (s.Key == nil) == (s.Keyless == nil) {
			v.addf(p, "set exactly one of key and keyless")
			continue
		}
		if s.Key != nil {
			keys++
			if s.KeyValue = v.resolveSecret(p+".key", s.Key); s.KeyValue != "" {
				if _, err := cryptoutils.UnmarshalPEMToPublicKey([]byte(s.KeyValue)); err != nil {
					v.addf(p+".key", "not a PEM public key (cosign.pub): %v", err)
				}
			}
			v.keyLog(p, s, a.Verify.IgnoreTlog)
			continue
		}
		if s.TrustedRoot != nil {
			v.addf(p+".trustedRoot", "only with key: a keyless identity's root is keyless.trustedRoot")
		}
		k := s.Keyless
		if k.Issuer == "" {
			v.addf(p+".keyless.issuer", "required: the OIDC issuer of the signers' certificates")
		}
		if k.Subject == "" {
			v.addf(p+".keyless.subject", "required: a regular expression the certificate's subject must match")
		} else if _, err := regexp.Compile(k.Subject); err != nil {
			v.addf(p+".keyless.subject", "%v", err)
		}
		if k.TrustedRoot == nil {
			v.addf(p+".keyless.trustedRoot", "required: Sigstore's trusted_root.json, as a file")
		} else if k.TrustedRootValue = v.resolveSecret(p+".keyless.trustedRoot", k.TrustedRoot); k.TrustedRootValue != "" {
			if !json.Valid([]byte(k.TrustedRootValue)) {
				// The parser's message quotes the content, which may be a secret.
				v.addf(p+".keyless.trustedRoot", "not a trusted root: not JSON (Sigstore's trusted_root.json)")
			} else if _, err := root.NewTrustedRootFromJSON([]byte(k.TrustedRootValue)); err != nil {
				v.addf(p+".keyless.trustedRoot", "not a trusted root: %v", err)
			}
			if trustedRoot != "" && trustedRoot != k.TrustedRootValue {
				v.addf(p+".keyless.trustedRoot", "differs from an earlier keyless identity's: an application's keyless identities share one trusted root")
			}
			trustedRoot = k.TrustedRootValue
		}
	}
	if a.Verify.IgnoreTlog && keys == 0 {
		v.addf(path+".ignoreTlog", "concerns key signers, and there is none")
	}
	types := map[string]bool{}
	for i, at := range a.Verify.Attestations {
		p := fmt.Sprintf("%s.attestations[%d].predicateType", path, i)
		switch u, err := url.Parse(at.PredicateType); {
		case at.PredicateType == "":
			v.addf(p, "required: the in-toto predicate type the attestation must have (a URI)")
		case err != nil || !u.IsAbs() || u.Host == "":
			v.addf(p, "%q is not a URI: want the predicate type itself (cosign's slsaprovenance1 is https://slsa.dev/provenance/v1)", at.PredicateType)
		case types[at.PredicateType]:
			v.addf(p, "%q is required twice", at.PredicateType)
		}
		types[at.PredicateType] = true
	}
}

// keyLog checks a key's trusted root, whose Rekor log its signatures must
// be in, unless the policy ignores the log.
func (v *validator) keyLog(p string, s *SignatureAuthority, ignoreTlog bool) {
	switch {
	case ignoreTlog && s.TrustedRoot != nil:
		v.addf(p+".trustedRoot", "unused: verify.ignoreTlog is true (remove one)")
	case ignoreTlog:
	case s.TrustedRoot == nil:
		v.addf(p+".trustedRoot", "required with key: Sigstore's trusted_root.json naming the Rekor log its signatures must be in, as a file (or verify.ignoreTlog: true, weaker)")
	default:
		if s.TrustedRootValue = v.resolveSecret(p+".trustedRoot", s.TrustedRoot); s.TrustedRootValue == "" {
			return
		}
		if !json.Valid([]byte(s.TrustedRootValue)) {
			v.addf(p+".trustedRoot", "not a trusted root: not JSON (Sigstore's trusted_root.json)")
			return
		}
		tr, err := root.NewTrustedRootFromJSON([]byte(s.TrustedRootValue))
		if err != nil {
			v.addf(p+".trustedRoot", "not a trusted root: %v", err)
		} else if len(tr.RekorLogs()) == 0 {
			v.addf(p+".trustedRoot", "names no Rekor log (tlogs): the key's signatures could never be found logged")
		}
	}
}

// clusterSelector checks that the selector of what (an "application", a
// "release set") parses and picks at least one cluster.
func (v *validator) clusterSelector(path, what string, a Application) {
	if a.ClusterSelector == nil {
		return
	}
	sel, err := metav1.LabelSelectorAsSelector(a.ClusterSelector)
	if err != nil {
		v.addf(path, "%v", err)
		return
	}
	if !slices.ContainsFunc(v.clusters, a.Targets) && !v.discovers {
		v.addf(path, "%s %q selects no cluster of the fleet (%s): label clusters in fleet.clusters[].labels", what, a.Name, sel)
	}
}

// validation checks Kanary's validations. Their PromQL items were turned
// into delivery metrics by the defaults, and are checked there too.
func (v *validator) validation(path string, val *Validation) {
	if val == nil {
		return
	}
	if len(val.Items) == 0 {
		v.addf(path+".items", "at least one validation: manual, labelWatch or promQL")
	}
	v.atLeast(path+".validationPeriod", val.ValidationPeriod.Duration, time.Second)
	manual := 0
	for i, it := range val.Items {
		p := fmt.Sprintf("%s.items[%d]", path, i)
		set := 0
		for _, isSet := range []bool{it.Manual != nil, it.LabelWatch != nil, it.PromQL != nil} {
			if isSet {
				set++
			}
		}
		if set != 1 {
			v.addf(p, "set exactly one of manual, labelWatch and promQL")
			continue
		}
		switch {
		case it.Manual != nil:
			manual++
			if manual == 2 {
				v.addf(p+".manual", "only one manual validation per application")
			}
			v.oneOf(p+".manual.statusAfterDeadline", "status", it.Manual.StatusAfterDeadline, ManualStatuses)
		case it.LabelWatch != nil:
			w := it.LabelWatch
			if len(w.DeploymentInvalidationLabels) == 0 && len(w.PodInvalidationLabels) == 0 {
				v.addf(p+".labelWatch", "set deploymentInvalidationLabels or podInvalidationLabels")
			}
			v.labels(p+".labelWatch.deploymentInvalidationLabels", w.DeploymentInvalidationLabels)
			v.labels(p+".labelWatch.podInvalidationLabels", w.PodInvalidationLabels)
		case it.PromQL != nil:
			if it.PromQL.Query == "" {
				v.addf(p+".promQL.query", "required: a PromQL query that returns 1 (true) for a healthy canary")
			}
			if it.PromQL.PrometheusURL != "" {
				v.httpURL(p+".promQL.prometheusURL", it.PromQL.PrometheusURL)
			}
		}
	}
}

func tracks() []string {
	s := make([]string, len(Tracks))
	for i, t := range Tracks {
		s[i] = string(t)
	}
	return s
}

func (v *validator) image(path, img string) {
	const want = "want a repository host[:port]/path without tag or digest, such as \"registry.example.com/team/app\""
	switch {
	case img == "":
		v.addf(path, "required; %s", want)
		return
	case strings.Contains(img, "@"):
		v.addf(path, "%q includes a digest; %s", img, want)
		return
	case strings.Contains(img[strings.LastIndex(img, "/")+1:], ":") && strings.Contains(img, "/"):
		v.addf(path, "%q includes a tag; %s", img, want)
		return
	}
	if _, err := name.NewRepository(img, name.StrictValidation); err != nil {
		v.addf(path, "invalid repository %q: %v; %s", img, err, want)
	}
}

func (v *validator) workload(path string, w Workload) {
	if w.Kind != KindJob { // releaseSets checks a Job's application is a set's member
		v.oneOf(path+".kind", "workload kind", w.Kind, WorkloadKinds)
	}
	if w.Name == "" {
		v.addf(path+".name", "required")
	} else if errs := validation.IsDNS1123Subdomain(w.Name); len(errs) > 0 {
		v.addf(path+".name", "invalid name %q: %s", w.Name, strings.Join(errs, "; "))
	}
	if w.Container != "" {
		v.dnsLabel(path+".container", "container", w.Container)
	}
}

func (v *validator) atLeast(path string, d, least time.Duration) {
	if d < least {
		v.addf(path, "must be at least %s, got %s", least, d)
	}
}

// name checks the name of the list entry at path and that no earlier entry
// (recorded in seen, name to path) has it.
func (v *validator) name(path, what, n string, seen map[string]string) {
	if n == "" {
		v.addf(path+".name", "required")
		return
	}
	v.dnsLabel(path+".name", what, n)
	if first, dup := seen[n]; dup {
		v.addf(path+".name", "duplicate %s name %q (first used by %s)", what, n, first)
		return
	}
	seen[n] = path
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func (v *validator) dnsLabel(path, what, s string) {
	if len(s) > 63 || !dnsLabel.MatchString(s) {
		v.addf(path, "invalid %s name %q: want at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit", what, s)
	}
}

func (v *validator) oneOf(path, what, got string, allowed []string) {
	switch {
	case got == "":
		v.addf(path, "required; want one of %s", strings.Join(allowed, ", "))
	case !slices.Contains(allowed, got):
		v.addf(path, "unknown %s %q; want one of %s", what, got, strings.Join(allowed, ", "))
	}
}

// httpURL checks for an absolute http(s) URL. Messages do not echo the URL,
// which may hold credentials.
func (v *validator) httpURL(path, s string) {
	if s == "" {
		v.addf(path, "required: an http or https URL")
		return
	}
	u, err := url.Parse(s)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		err = ue.Err
	}
	switch {
	case err != nil:
		v.addf(path, "invalid URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		v.addf(path, "want an http or https URL, got scheme %q", u.Scheme)
	case u.Host == "":
		v.addf(path, "want an absolute URL with a host")
	}
}

// tekton checks the tekton executor's settings.
func (v *validator) tekton(f *Fleet) {
	t := f.Tekton
	switch {
	case f.Executor == ExecutorTekton && t == nil:
		v.addf("fleet.tekton", "required with executor tekton: the cluster (or kubeconfig) that runs Tekton")
		return
	case t == nil:
		return
	case f.Executor != ExecutorTekton:
		v.addf("fleet.tekton", "only the tekton executor uses it; set executor: tekton or remove it")
	}
	switch {
	case (t.Cluster == "") == (t.Kubeconfig == ""):
		v.addf("fleet.tekton", "set exactly one of cluster (a fleet cluster) and kubeconfig")
	case t.Cluster != "":
		found := false
		for _, c := range f.Clusters {
			found = found || c.Name == t.Cluster
		}
		if !found {
			v.addf("fleet.tekton.cluster", "no fleet cluster %q", t.Cluster)
		}
	default:
		v.kubeconfig("fleet.tekton.kubeconfig", t.Kubeconfig)
	}
	v.dnsLabel("fleet.tekton.namespace", "namespace", t.Namespace)
	v.labels("fleet.tekton.labels", t.Labels)
	v.podTemplate("fleet.tekton.podTemplate", t.PodTemplate)
}

// podTemplate checks what of Tekton's pod template can be checked cheaply
// here, which Kubernetes would otherwise refuse only when Tekton creates a
// step's pod, failing every rollout: node selector labels, tolerations and
// pull secret names. The rest is Kubernetes' to judge.
func (v *validator) podTemplate(path string, pt *pod.Template) {
	if pt == nil {
		return
	}
	v.labels(path+".nodeSelector", pt.NodeSelector)
	for i, tl := range pt.Tolerations {
		p := fmt.Sprintf("%s.tolerations[%d]", path, i)
		switch tl.Operator {
		case "", corev1.TolerationOpEqual:
			if tl.Key == "" {
				v.addf(p+".operator", "a toleration without a key tolerates every taint: want operator Exists")
			}
		case corev1.TolerationOpExists:
			if tl.Value != "" {
				v.addf(p+".value", "must be empty with operator Exists")
			}
		default:
			v.addf(p+".operator", "unknown operator %q; want Equal or Exists", tl.Operator)
		}
		switch tl.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule:
			if tl.TolerationSeconds != nil {
				v.addf(p+".tolerationSeconds", "only with effect NoExecute")
			}
		case corev1.TaintEffectNoExecute:
		default:
			v.addf(p+".effect", "unknown effect %q; want NoSchedule, PreferNoSchedule or NoExecute", tl.Effect)
		}
	}
	for i, s := range pt.ImagePullSecrets {
		v.subdomain(fmt.Sprintf("%s.imagePullSecrets[%d].name", path, i), s.Name)
	}
}

// gitops checks an application's deployments repository and resolves its
// credentials.
func (v *validator) gitops(path string, g *GitOps) {
	if g == nil {
		return
	}
	if g.URL == "" {
		v.addf(path+".url", "required: the deployments repository (https://, ssh://, git@host:path, file:// or a path)")
	}
	if len(g.Paths) == 0 {
		v.addf(path+".paths", "at least one file holding the image, e.g. clusters/{cluster}/app/kustomization.yaml")
	}
	for i, p := range g.Paths {
		if p == "" || strings.HasPrefix(p, "/") || slices.Contains(strings.Split(p, "/"), "..") {
			v.addf(fmt.Sprintf("%s.paths[%d]", path, i), "%q: want a path inside the repository", p)
		}
	}
	v.oneOf(path+".edit", "edit", g.Edit, GitOpsEdits)
	g.PasswordValue, g.TokenValue = v.gitCredentials(path, g.Password, g.Token, g.SSHKeyFile)
	if _, err := json.Marshal(g.Options); err != nil {
		v.addf(path+".options", "cannot be encoded: %v", err)
	}
	v.oneOf(path+".mode", "mode", g.Mode, GitOpsModes)
	switch {
	case g.Mode == GitOpsModePullRequest && g.PullRequest == nil:
		v.addf(path+".pullRequest", "required by mode pullRequest: the git host (github, gitlab, gitea or forgejo) and the pull requests' settings")
	case g.Mode != GitOpsModePullRequest && g.PullRequest != nil:
		v.addf(path+".pullRequest", "only for mode pullRequest (mode is %q)", g.Mode)
	case g.PullRequest != nil:
		v.pullRequest(path, g)
	}
}

// Bounds of a pull request's timings.
const (
	minMergeDeadline   = time.Minute
	maxMergeDeadline   = 720 * time.Hour
	minPollInterval    = 10 * time.Second
	maxPullRequestList = 20
)

// pullRequest checks gitops.pullRequest (mode pullRequest) and resolves
// its API token.
func (v *validator) pullRequest(path string, g *GitOps) {
	pr, p := g.PullRequest, path+".pullRequest"
	if pr.Host == "bitbucket" {
		v.addf(p+".host", "bitbucket has no pull request client in flotilla; use mode commit")
	} else {
		v.oneOf(p+".host", "host", pr.Host, PullRequestHosts)
	}
	if pr.APIURL == "" {
		v.addf(p+".apiURL", "required: the url names no host (file:// or a local path), so set apiURL and repository")
	} else {
		v.httpURL(p+".apiURL", pr.APIURL)
	}
	if strings.Trim(pr.Repository, "/") == "" || !strings.Contains(strings.Trim(pr.Repository, "/"), "/") {
		v.addf(p+".repository", "%q: want owner/name on the host (GitLab: the project's full path)", pr.Repository)
	}
	switch {
	case pr.Token != nil:
		pr.TokenValue = v.resolveSecret(p+".token", pr.Token)
	case g.TokenValue != "":
		pr.TokenValue = g.TokenValue
	default:
		v.addf(p+".token", "required: an API token of the host (or gitops.token, which is used when this is not set)")
	}
	v.oneOf(p+".mergeMethod", "merge method", pr.MergeMethod, MergeMethods)
	v.oneOf(p+".revert", "revert", pr.Revert, PullRequestReverts)
	if d := pr.MergeDeadline.Duration; d < minMergeDeadline || d > maxMergeDeadline {
		v.addf(p+".mergeDeadline", "%v: want %v to %v", d, minMergeDeadline, maxMergeDeadline)
	}
	if d := pr.PollInterval.Duration; d < minPollInterval || d > pr.MergeDeadline.Duration {
		v.addf(p+".pollInterval", "%v: want %v up to the merge deadline (%v)", d, minPollInterval, pr.MergeDeadline.Duration)
	}
	if d := pr.MergeRetryFor.Duration; d < 0 || d > pr.MergeDeadline.Duration {
		v.addf(p+".mergeRetryFor", "%v: want 0s up to the merge deadline (%v)", d, pr.MergeDeadline.Duration)
	}
	for _, l := range []struct {
		field string
		list  []string
	}{{"labels", pr.Labels}, {"reviewers", pr.Reviewers}} {
		field, list := l.field, l.list
		if len(list) > maxPullRequestList {
			v.addf(p+"."+field, "%d: at most %d", len(list), maxPullRequestList)
		}
		for i, s := range list {
			if strings.TrimSpace(s) == "" || strings.Contains(s, ",") {
				v.addf(fmt.Sprintf("%s.%s[%d]", p, field, i), "%q: want a non-empty name without commas", s)
			}
		}
	}
	for i, f := range g.Paths {
		if !strings.Contains(f, "{cluster}") {
			v.addf(fmt.Sprintf("%s.paths[%d]", path, i), "%q: mode pullRequest opens one pull request per wave, so each cluster needs its own file: put {cluster} in the path", f)
		}
	}
}

// gitSource checks a git application's repository, what it tracks and how
// it renders, and resolves its credentials.
func (v *validator) gitSource(path string, a Application) {
	g := a.Git()
	if g.URL == "" {
		v.addf(path+".url", "required: the deployments repository (https://, ssh://, git@host:path, file:// or a path)")
	}
	if a.GitOps != nil {
		v.addf(strings.TrimSuffix(path, ".source.git")+".gitops", "a git application's repository is its source already: gitops writes images into a repository, for image applications")
	}
	for _, field := range []struct {
		name string
		set  bool
	}{{"track", a.Track != DefaultTrack}, {"semver", a.Semver != ""}, {"tagFilter", a.TagFilter != nil}, {"denyTags", len(a.DenyTags) > 0}, {"verify", a.Verify != nil}, {"preReleases", a.PreReleases}} {
		if field.set {
			v.addf(strings.TrimSuffix(path, ".source.git")+"."+field.name, "applies to image tags: a git application rolls out every commit that changes what it tracks")
		}
	}
	if g.Tags != "" {
		if _, err := regexp.Compile(g.Tags); err != nil {
			v.addf(path+".tags", "%v", err)
		}
	}
	if (g.Render == RenderKubeCD) != (g.KubeCD != nil) {
		v.addf(path+".render", "render %s is what kubecd: makes of KubeCD's files; use kubecd.dir", RenderKubeCD)
	} else if g.KubeCD == nil {
		v.oneOf(path+".render", "render", g.Render, GitRenders)
	}
	switch h := g.Helm; {
	case g.Render == "helm" && h == nil:
		v.addf(path+".helm", "required by render helm: the chart directory and its values")
	case g.Render != "helm" && h != nil:
		v.addf(path+".helm", "only for render helm (render is %q)", g.Render)
	case h != nil:
		if h.Chart == "" {
			v.addf(path+".helm.chart", "required: the chart's directory in the repository")
		}
		v.repoPath(path+".helm.chart", h.Chart)
		v.repoPath(path+".helm.valuesFile", h.ValuesFile)
		for i, f := range h.DefaultValues {
			v.repoPath(fmt.Sprintf("%s.helm.defaultValues[%d]", path, i), f)
		}
		if _, err := json.Marshal(h.Values); err != nil {
			v.addf(path+".helm.values", "cannot be encoded: %v", err)
		}
		if h.ReleaseName != "" {
			v.dnsLabel(path+".helm.releaseName", "release", h.ReleaseName)
		}
	}
	for i, p := range g.AllowedImages {
		if p == "" {
			v.addf(fmt.Sprintf("%s.allowedImages[%d]", path, i), "empty: a regular expression of image repositories the manifests may run")
		} else if _, err := regexp.Compile(p); err != nil {
			v.addf(fmt.Sprintf("%s.allowedImages[%d]", path, i), "%v", err)
		}
	}
	if len(g.Paths) == 0 && g.Render != "helm" && g.Render != RenderKubeCD {
		v.addf(path+".paths", "at least one file or directory of the cluster's objects, e.g. clusters/{cluster}/podinfo")
	}
	for i, p := range g.Paths {
		if p == "" {
			v.addf(fmt.Sprintf("%s.paths[%d]", path, i), "empty: want a path inside the repository")
		}
		v.repoPath(fmt.Sprintf("%s.paths[%d]", path, i), p)
	}
	g.PasswordValue, g.TokenValue = v.gitCredentials(path, g.Password, g.Token, g.SSHKeyFile)
}

// repoPath checks a path inside a repository ("" passes).
func (v *validator) repoPath(path, p string) {
	if strings.HasPrefix(p, "/") || slices.Contains(strings.Split(p, "/"), "..") {
		v.addf(path, "%q: want a path inside the repository", p)
	}
}

// gitCredentials checks a repository's credentials and resolves them.
func (v *validator) gitCredentials(path string, password, token *Secret, sshKeyFile string) (pw, tok string) {
	if password != nil && token != nil {
		v.addf(path, "set at most one of password and token")
	}
	if sshKeyFile != "" && (password != nil || token != nil) {
		v.addf(path+".sshKeyFile", "set either sshKeyFile or password/token")
	}
	if password != nil {
		pw = v.resolveSecret(path+".password", password)
	}
	if token != nil {
		tok = v.resolveSecret(path+".token", token)
	}
	return pw, tok
}

// freezeWindows checks a list of freeze windows: names unique, each one
// compiles.
func (v *validator) freezeWindows(path string, ws []FreezeWindow) {
	seen := map[string]string{}
	for i, w := range ws {
		p := fmt.Sprintf("%s[%d]", path, i)
		v.name(p, "freeze window", w.Name, seen)
		if _, err := w.Window(); err != nil {
			v.addf(p, "%v", err)
		}
	}
}

// discovery checks fleet.discovery: a source named, its selector parses,
// its kubeconfig exists, and a ClusterProfiles' providers can run.
func (v *validator) discovery(path string, d *Discovery) {
	if d == nil {
		return
	}
	if d.ArgoCD == nil && d.ClusterProfiles == nil && d.ClusterAPI == nil {
		v.addf(path, "names no source: want argocd, clusterProfiles or clusterAPI")
		return
	}
	if a := d.ArgoCD; a != nil {
		p := path + ".argocd"
		v.selectorString(p+".selector", a.Selector)
		v.namespace(p+".namespace", a.Namespace)
		if a.Kubeconfig != "" {
			v.file(p+".kubeconfig", a.Kubeconfig)
		}
	}
	if cp := d.ClusterProfiles; cp != nil {
		p := path + ".clusterProfiles"
		v.selectorString(p+".selector", cp.Selector)
		for i, ns := range cp.Namespaces {
			v.namespace(fmt.Sprintf("%s.namespaces[%d]", p, i), ns)
		}
		if cp.Kubeconfig != "" {
			v.file(p+".kubeconfig", cp.Kubeconfig)
		}
		v.accessProviders(p+".providers", cp.Providers)
	}
	if ca := d.ClusterAPI; ca != nil {
		p := path + ".clusterAPI"
		v.selectorString(p+".selector", ca.Selector)
		for i, ns := range ca.Namespaces {
			v.namespace(fmt.Sprintf("%s.namespaces[%d]", p, i), ns)
		}
		if ca.Kubeconfig != "" {
			v.file(p+".kubeconfig", ca.Kubeconfig)
		}
	}
}

func (v *validator) selectorString(path, sel string) {
	if _, err := labels.Parse(sel); err != nil {
		v.addf(path, "%v", err)
	}
}

func (v *validator) namespace(path, ns string) {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		v.addf(path, "invalid namespace %q: %s", ns, strings.Join(errs, "; "))
	}
}

// accessProviders checks a ClusterProfiles' provider config: at least
// one, names unique, each with a command and known policies.
func (v *validator) accessProviders(path string, ps []AccessProvider) {
	if len(ps) == 0 {
		v.addf(path, "is empty: name the access providers whose exec plugin gives the clusters' credentials")
	}
	seen := map[string]bool{}
	for i, ap := range ps {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case strings.TrimSpace(ap.Name) == "":
			v.addf(p+".name", "is empty")
		case seen[ap.Name]:
			v.addf(p+".name", "duplicate provider %q", ap.Name)
		}
		seen[ap.Name] = true
		if strings.TrimSpace(ap.ExecConfig.Command) == "" {
			v.addf(p+".execConfig.command", "is empty")
		}
		if !slices.Contains([]string{"", "Append", "Ignore"}, ap.ProfileSourcedCLIArgsPolicy) {
			v.addf(p+".profileSourcedCLIArgsPolicy", "unknown policy %q: want Append or Ignore", ap.ProfileSourcedCLIArgsPolicy)
		}
		if !slices.Contains([]string{"", "AppendIfNotExists", "Replace", "Ignore"}, ap.ProfileSourcedEnvVarsPolicy) {
			v.addf(p+".profileSourcedEnvVarsPolicy", "unknown policy %q: want AppendIfNotExists, Replace or Ignore", ap.ProfileSourcedEnvVarsPolicy)
		}
		for j, e := range ap.ExecConfig.Env {
			if e.Name == "" {
				v.addf(fmt.Sprintf("%s.execConfig.env[%d].name", p, j), "is empty")
			}
		}
	}
}
