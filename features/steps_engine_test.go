package features

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
)

func (s *scenario) registerEngineSteps(sc *godog.ScenarioContext) {
	sc.Step(`^flotilla reaches cluster "([^"]*)" through a connection that can freeze$`, s.proxyCluster)
	sc.Step(`^flotilla's connection to cluster "([^"]*)" freezes, as if its API server stopped$`, s.freezeCluster)
	sc.Step(`^flotilla's connection to cluster "([^"]*)" comes back$`, s.thawCluster)
	sc.Step(`^every cluster step has a deadline of (\d+) seconds$`, s.stepDeadline)
	sc.Step(`^a second application "([^"]*)" that tracks "([^"]*)" in the same waves$`, s.secondApplication)
	sc.Step(`^version "([^"]*)" of "([^"]*)" is pushed$`, s.pushVersionOf)
	sc.Step(`^version "([^"]*)" of "([^"]*)" has been rolled out to every cluster$`, s.rolledOutOf)
	sc.Step(`^the primary of "([^"]*)" in every cluster runs version "([^"]*)" by digest$`, s.primariesOfRun)
	sc.Step(`^every change to the workload "([^"]*)" in cluster "([^"]*)" hangs$`, s.hangChanges)
	sc.Step(`^the rollout of "([^"]*)" fails, naming cluster "([^"]*)" and its deadline$`, s.rolloutFailsAtDeadline)
	sc.Step(`^the rollout of "([^"]*)" ended before the rollout of "([^"]*)" failed$`, s.endedBeforeFailed)
	sc.Step(`^the rollout of "([^"]*)" ends RollbackFailed, naming cluster "([^"]*)"$`, s.rollbackFailed)
	sc.Step("^`flotilla retry` is run for the rollout of \"([^\"]*)\"$", s.retryRollout)
	sc.Step(`^the canary in cluster "([^"]*)" has waited for promotion for (\d+) seconds$`, s.heldFor)
	sc.Step(`^the rollout of "([^"]*)" is still in flight$`, s.stillInFlight)
	sc.Step(`^wave 1 of the rollouts of "([^"]*)" and "([^"]*)" has been applied$`, s.wave1AppliedBoth)
	sc.Step(`^no cluster was applied twice for one step, as its API server recorded$`, s.noDoubleApplies)
	sc.Step(`^cluster "([^"]*)" has taken the rollout of "([^"]*)"$`, s.clusterApplied)
	sc.Step(`^flotilla keeps handled events for (\d+) seconds and remembers event ids for (\d+) seconds$`, s.journalBounds)
	sc.Step(`^flotilla's journal has deleted the events it handled$`, s.journalRetired)
}

func (s *scenario) journalBounds(retention, window int) error {
	s.w.retention, s.w.dedupeWindow = fmt.Sprintf("%ds", retention), fmt.Sprintf("%ds", window)
	return nil
}

// journalRetired waits until retention has deleted journal segments, as
// flotilla's metrics say.
func (s *scenario) journalRetired(ctx context.Context) error {
	if s.scaleOut {
		return s.streamRetired(ctx)
	}
	deadline := time.Now().Add(60 * time.Second)
	var last map[string]float64
	for time.Now().Before(deadline) {
		m, err := s.metrics(ctx, "flotilla_journal_first_seq", "flotilla_journal_retired_events_total")
		if err == nil && m["flotilla_journal_first_seq"] > 1 && m["flotilla_journal_retired_events_total"] > 0 {
			return nil
		}
		last = m
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("after 60 s the journal still starts at its first event: %v", last)
}

// streamRetired waits, in scale-out mode, until the scenario's stream on
// NATS holds fewer events than were appended to it: retention purged what
// every cursor had passed.
func (s *scenario) streamRetired(ctx context.Context) error {
	nc, err := nats.Connect(natsCluster.URL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	var last jetstream.StreamState
	for time.Now().Before(deadline) {
		st, err := js.Stream(ctx, s.w.namespace)
		if err == nil {
			info, err := st.Info(ctx)
			if err == nil {
				last = info.State
				if last.LastSeq > 0 && last.Msgs < last.LastSeq {
					return nil
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("after 60 s the stream still holds every event appended: %d of %d (first %d)", last.Msgs, last.LastSeq, last.FirstSeq)
}

// metrics reads the named unlabelled metrics from flotilla's /metrics.
func (s *scenario) metrics(ctx context.Context, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.w.flotilla.url()+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	got := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !slices.Contains(names, name) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(value, &v); err == nil {
			got[name] = v
		}
	}
	return got, sc.Err()
}

// secondApp is a second application of the scenario.
type secondApp struct{ name, repo string }

func (s *scenario) secondApplication(app, repo string) error {
	s.w.second = &secondApp{name: app, repo: repo}
	return nil
}

func (s *scenario) stepDeadline(seconds int) error {
	s.w.deadline = fmt.Sprintf("%ds", seconds)
	return nil
}

// repoOf is the repository of an application of the scenario.
func (s *scenario) repoOf(app string) (string, error) {
	switch {
	case app == s.w.app:
		return s.w.repo, nil
	case s.w.second != nil && app == s.w.second.name:
		return s.w.second.repo, nil
	}
	return "", fmt.Errorf("the scenario has no application %q", app)
}

// withRepo runs f with the scenario's image repository set to app's.
func (s *scenario) withRepo(app string, f func() error) error {
	repo, err := s.repoOf(app)
	if err != nil {
		return err
	}
	saved := s.w.repo
	s.w.repo = repo
	defer func() { s.w.repo = saved }()
	return f()
}

func (s *scenario) pushVersionOf(ctx context.Context, version, app string) error {
	return s.withRepo(app, func() error { return s.pushVersion(ctx, version) })
}

func (s *scenario) rolledOutOf(ctx context.Context, version, app string) error {
	if err := s.pushVersionOf(ctx, version, app); err != nil {
		return err
	}
	if err := s.rolloutSucceeds(ctx, version); err != nil {
		return err
	}
	return s.primariesOfRun(ctx, app, version)
}

func (s *scenario) primariesOfRun(ctx context.Context, app, version string) error {
	saved := s.w.workload
	s.w.workload = app
	defer func() { s.w.workload = saved }()
	return s.withRepo(app, func() error { return s.primariesRun(ctx, version) })
}

// rolloutEvent waits for an event of typ of the rollout of version.
func (s *scenario) rolloutEvent(ctx context.Context, version, typ string) (cloudevents.Event, error) {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return cloudevents.Event{}, err
	}
	return s.w.sink.waitFor(ctx, typ+" of rollout "+id, func(e cloudevents.Event) bool {
		return e.Type() == typ && events.RolloutID(e) == id
	})
}

func (s *scenario) rolloutFailsAtDeadline(ctx context.Context, version, cluster string) error {
	e, err := s.rolloutEvent(ctx, version, events.TypeRolloutFailed)
	if err != nil {
		return err
	}
	r, err := events.Decode[events.RolloutResult](e)
	if err != nil {
		return err
	}
	if !strings.Contains(r.Reason, "cluster "+cluster+" failed") || !strings.Contains(r.Reason, "deadline") {
		return fmt.Errorf("the rollout of %s failed because %q: want cluster %s named, and its deadline", version, r.Reason, cluster)
	}
	return nil
}

// endedBeforeFailed checks the order of two ends in flotilla's journal: the
// first rollout did not wait for the second's failing cluster.
func (s *scenario) endedBeforeFailed(ctx context.Context, first, second string) error {
	if err := s.rolloutSucceeds(ctx, first); err != nil {
		return err
	}
	if _, err := s.rolloutEvent(ctx, second, events.TypeRolloutFailed); err != nil {
		return err
	}
	firstID, err := s.rolloutID(ctx, first)
	if err != nil {
		return err
	}
	secondID, err := s.rolloutID(ctx, second)
	if err != nil {
		return err
	}
	for _, e := range s.w.sink.all() {
		switch {
		case e.Type() == events.TypeRolloutSucceeded && events.RolloutID(e) == firstID:
			return nil
		case e.Type() == events.TypeRolloutFailed && events.RolloutID(e) == secondID:
			return fmt.Errorf("the rollout of %s failed before the rollout of %s ended: the one waited for the other", second, first)
		}
	}
	return errors.New("neither end is in the journal")
}

func (s *scenario) rollbackFailed(ctx context.Context, version, cluster string) error {
	e, err := s.rolloutEvent(ctx, version, events.TypeRolloutRollbackFailed)
	if err != nil {
		return err
	}
	r, err := events.Decode[events.RolloutResult](e)
	if err != nil {
		return err
	}
	if !strings.Contains(r.Reason, "rollback failed: cluster "+cluster+":") {
		return fmt.Errorf("the rollback of %s failed because %q: want cluster %s named", version, r.Reason, cluster)
	}
	return nil
}

func (s *scenario) retryRollout(ctx context.Context, version string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	out, err := s.flotillaCLI(ctx, "retry", id, "--token", s.w.apiToken)
	if err != nil {
		return err
	}
	if !strings.Contains(out, "retry 1 requested") {
		return fmt.Errorf("flotilla retry printed %q", out)
	}
	return nil
}

func (s *scenario) heldFor(ctx context.Context, cluster string, seconds int) error {
	if err := s.canaryWaitsForPromotion(ctx, cluster); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(seconds) * time.Second):
	}
	return s.canaryWaitsForPromotion(ctx, cluster)
}

func (s *scenario) stillInFlight(ctx context.Context, version string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	for _, e := range s.w.sink.all() {
		if events.RolloutID(e) == id && (e.Type() == events.TypeRolloutSucceeded || e.Type() == events.TypeRolloutFailed) {
			return fmt.Errorf("the rollout of %s ended: %s", version, e.Type())
		}
	}
	return nil
}

func (s *scenario) wave1AppliedBoth(ctx context.Context, a, b string) error {
	if err := s.wave1Applied(ctx, a); err != nil {
		return err
	}
	return s.wave1Applied(ctx, b)
}

// noDoubleApplies reads, from the audit log of every cluster of the
// waves, each patch flotilla made to the scenario's workloads: one step
// applies one image for one rollout, so no (rollout, image, restart
// token) may be patched twice into one workload of one cluster. A retry
// and a nudge (a revision Flagger missed, applied again) are steps of
// their own, each with its own restart token on the pod template.
func (s *scenario) noDoubleApplies() error {
	apps := []string{s.w.app}
	if s.w.second != nil {
		apps = append(apps, s.w.second.name)
	}
	total := 0
	for _, names := range s.w.waves {
		for _, n := range names {
			cl, ok := s.fleet().Cluster(n)
			if !ok {
				return fmt.Errorf("the fleet has no cluster %s", n)
			}
			for _, app := range apps {
				patches, err := fleettest.Patches(cl.AuditLog, "deployments", s.w.namespace, app)
				if err != nil {
					return err
				}
				seen := map[string]int{}
				first := map[string]fleettest.Patch{}
				for _, p := range patches {
					if p.FieldManager != tasks.FieldManager || p.Code >= 300 {
						continue
					}
					var body struct {
						Metadata struct {
							Annotations map[string]string `json:"annotations"`
						} `json:"metadata"`
						Spec struct {
							Template struct {
								Metadata struct {
									Annotations map[string]string `json:"annotations"`
								} `json:"metadata"`
								Spec struct {
									Containers []struct {
										Image string `json:"image"`
									} `json:"containers"`
								} `json:"spec"`
							} `json:"template"`
						} `json:"spec"`
					}
					if err := json.Unmarshal(p.Body, &body); err != nil {
						return fmt.Errorf("cluster %s: a patch of %s that is not JSON: %w", n, app, err)
					}
					for _, c := range body.Spec.Template.Spec.Containers {
						id := body.Metadata.Annotations[tasks.AnnotationRollout]
						key := id + " " + c.Image + " " + body.Spec.Template.Metadata.Annotations[tasks.AnnotationRestart]
						if seen[key]++; seen[key] > 1 {
							// Both patches and what flotilla logged of the
							// rollout in that cluster: which replica ran
							// each, and why the second.
							return fmt.Errorf("cluster %s: %s/%s was patched with %s for rollout %s %d times (the last at %s)\n"+
								"first: %s %s %s\nlast:  %s %s %s\nflotilla's log of %s in %s:\n%s",
								n, s.w.namespace, app, c.Image, id, seen[key], p.Time.Format(time.RFC3339Nano),
								first[key].Time.Format(time.RFC3339Nano), first[key].UserAgent, first[key].Body,
								p.Time.Format(time.RFC3339Nano), p.UserAgent, p.Body,
								id, n, s.w.flotilla.logLines(id, `"cluster":"`+n+`"`))
						}
						first[key] = p
						total++
					}
				}
			}
		}
	}
	if total == 0 {
		return errors.New("no cluster's audit log has a patch by flotilla of the scenario's workloads")
	}
	return nil
}

// clusterProxy forwards TCP connections to a cluster's API server. Frozen,
// it holds every connection, old and new, without a byte through, as a
// stopped API server does; thawed, traffic flows again.
type clusterProxy struct {
	l          net.Listener
	target     string
	kubeconfig string

	mu     sync.Mutex
	thawed chan struct{} // closed while traffic flows
	conns  []net.Conn
}

func (s *scenario) proxyCluster(ctx context.Context, name string) error {
	cl, ok := fleet.Cluster(name)
	if !ok {
		return fmt.Errorf("the fleet has no cluster %s", name)
	}
	cfg, err := clientcmd.LoadFromFile(cl.Kubeconfig)
	if err != nil {
		return err
	}
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	p := &clusterProxy{l: l, thawed: make(chan struct{})}
	close(p.thawed)
	for _, c := range cfg.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			return err
		}
		p.target = u.Host
		u.Host = l.Addr().String()
		c.Server = u.String()
	}
	p.kubeconfig = filepath.Join(s.w.dir, name+"-proxied.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p.kubeconfig); err != nil {
		return err
	}
	// The proxy outlives this step; the scenario's cleanup closes it.
	go p.serve(context.WithoutCancel(ctx))
	s.onCleanup(p.close)
	if s.w.proxied == nil {
		s.w.proxied = map[string]*clusterProxy{}
	}
	s.w.proxied[name] = p
	return nil
}

func (p *clusterProxy) serve(ctx context.Context) {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		go p.forward(ctx, c)
	}
}

func (p *clusterProxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.thawed
}

func (p *clusterProxy) forward(ctx context.Context, c net.Conn) {
	<-p.gate()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	up, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.target)
	cancel()
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, up)
	p.mu.Unlock()
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			<-p.gate() // frozen: hold what arrived
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = dst.Close()
		_ = src.Close()
	}
	go pipe(up, c)
	pipe(c, up)
}

func (p *clusterProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
		p.thawed = make(chan struct{})
	default:
	}
}

func (p *clusterProxy) thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
	default:
		close(p.thawed)
	}
}

func (p *clusterProxy) close() {
	_ = p.l.Close()
	p.thaw()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

func (s *scenario) proxyOf(name string) (*clusterProxy, error) {
	p, ok := s.w.proxied[name]
	if !ok {
		return nil, fmt.Errorf("flotilla does not reach cluster %s through a proxy", name)
	}
	return p, nil
}

func (s *scenario) freezeCluster(name string) error {
	p, err := s.proxyOf(name)
	if err != nil {
		return err
	}
	p.freeze()
	return nil
}

func (s *scenario) thawCluster(name string) error {
	p, err := s.proxyOf(name)
	if err != nil {
		return err
	}
	p.thaw()
	return nil
}

// hangChanges registers an admission webhook in the cluster for the
// workload (by its app label) whose server never answers: every change
// to the workload waits the webhook's full 30 s timeout and then fails, as
// an apply to a cluster in trouble does. Flagger and other workloads are
// untouched.
func (s *scenario) hangChanges(ctx context.Context, workload, cluster string) error {
	c, err := s.waveCluster(cluster)
	if err != nil {
		return err
	}
	hang := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done() // never answers
	}))
	hang.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	hang.StartTLS()
	s.onCleanup(hang.Close)
	name := "hang-" + s.w.namespace + "." + "flotilla.test"
	cfg := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name: name,
			ClientConfig: admissionv1.WebhookClientConfig{
				URL:      ptr.To(hang.URL + "/validate"),
				CABundle: certPEM(hang),
			},
			Rules: []admissionv1.RuleWithOperations{{
				Operations: []admissionv1.OperationType{admissionv1.Update, admissionv1.Create},
				Rule:       admissionv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": s.w.namespace}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": workload}},
			FailurePolicy:           ptr.To(admissionv1.Fail),
			SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To[int32](30),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := c.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("registering the hanging webhook in %s: %w", cluster, err)
	}
	s.onCleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = c.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return nil
}

// certPEM is the PEM of a TLS test server's certificate, a CA bundle for it.
func certPEM(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// clusterApplied waits until the pipeline of the rollout of version
// applied it to cluster.
func (s *scenario) clusterApplied(ctx context.Context, cluster, version string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	_, err = s.w.sink.waitFor(ctx, "rollout of "+version+" applied in "+cluster, func(e cloudevents.Event) bool {
		if e.Type() != events.TypeClusterApplied || events.RolloutID(e) != id {
			return false
		}
		p, err := events.Decode[events.ClusterResult](e)
		return err == nil && p.Cluster == cluster
	})
	return err
}
