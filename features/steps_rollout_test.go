package features

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/freeport"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
	"github.com/flotilla-cd/flotilla/pkg/testkit/otlptest"
)

// world is the state of a rollout scenario: a registry, a flotilla process,
// a sink of its events, a gate, and the clusters of its waves.
type world struct {
	// promotedSpecs are Flagger's last promoted specs kept by a step, by
	// "<cluster>/<version>" (steps_revertmissed_test.go).
	promotedSpecs map[string]string
	dir           string
	// deployed is the flotilla the Helm chart installed, when a step did.
	deployed *deployed
	// lastError is the error a step expected, for a later step to read.
	lastError string
	registry  *httptest.Server
	regHost   string
	// listen is flotilla's address when a step chose it before flotilla
	// was configured (a registry notifying it); registries its config's
	// registry credentials.
	listen     string
	registries map[string]any
	regLog     string // the log of a registry the scenario runs as a process
	// realNode is the real node a step started, whose pods reach the
	// host's loopback at its address.
	realNode *localfleet.RealNode
	image    string // flotilla's image on the real node, by digest (flotillaImage)
	killed   string // the scale-out replica a step killed, by name
	repo     string
	digests  map[string]string // version -> digest
	pushes   map[string][]byte // version -> notification body

	app       string
	workload  string
	namespace string
	waves     [][]string
	clusters  []*fleettest.Clients

	flotilla *flotillaProcess
	sink     *sink
	gate     *clusterGate

	registryToken, githubSecret, flaggerToken string
	lastStatus                                int
	// registryRateLimit is the registry receiver's rateLimit, when a step
	// set one before flotilla started.
	registryRateLimit map[string]any
	// stuckApp is a second application, whose registry (stuckRegistry)
	// accepts connections and never answers, when a step made one.
	stuckApp, stuckRegistry string

	// validation is the application's Kanary validation, when a step set
	// one before flotilla started; apiToken authenticates `flotilla approve`.
	validation map[string]any
	apiToken   string

	// gitops is the application's deployments repository config, when a
	// step made one (repoDir, a bare repository).
	gitops  map[string]any
	repoDir string

	// tekton is where flotilla runs its pipelines with executor tekton,
	// when a step installed them there; nil for the embedded executor.
	tekton *tektonExecutor

	// second is a second application with a registry of its own repository,
	// when a step made one; deadline is every application's
	// delivery.deadline, when a step set one; proxied are the clusters
	// flotilla reaches through a connection that can freeze.
	second   *secondApp
	imageSet *imageSetSpec // the application and the second, a release set of image members
	deadline string
	proxied  map[string]*clusterProxy
	// retention and dedupeWindow are flotilla's server.retention and
	// server.dedupeWindow, when a step set them.
	retention, dedupeWindow string
	// clusterLabels, appSelector and wavePolicies are the clusters'
	// labels, the application's clusterSelector and the waves' policy
	// fields, when steps set them; canaries records the phases of the
	// canaries a step watches.
	clusterLabels map[string]map[string]string
	appSelector   map[string]any
	wavePolicies  map[int]map[string]any
	// confirm, when set, is a confirm-rollout gate the canaries ask first.
	confirm *confirmGate
	// verify is the application's verify section; signing the cosign
	// signer and Rekor stand-in the scenario signs with.
	verify   map[string]any
	signing  *signingKit
	canaries *canaryLog
	// onNewVersion is the application's onNewVersion, when a step set it.
	onNewVersion string
	// approverTokens are named API tokens (server.apiTokens) by name.
	approverTokens map[string]string
	// configEdits change flotilla's config before it is written, in
	// order: steps of their own files (steps_sso_test.go).
	configEdits []func(cfg map[string]any) error
	// semver is the application's semver constraint, tagFilter its tag
	// filter, denyTags its denied tag patterns, when a step set them.
	semver    string
	tagFilter map[string]string
	denyTags  []string
	// git is the scenario's deployments repository and gitSource the git
	// application's source, when steps made them.
	git *gitRepo
	// set is the scenario's release set, when a step made one (sets steps).
	set       *releaseSet
	gitSource map[string]any
	// kubecd is the scenario's KubeCD repository (steps_kubecd_test.go).
	kubecd *kubecdState
	// pr is the scenario's Gitea repository, when the application rolls
	// out by pull request.
	pr *pullRequests
	// mergeFaults fails Gitea's merges for flotilla, when a step asked;
	// waiting records what the rollouts said they waited for.
	mergeFaults *mergeFaults
	waiting     *waitingLog
	// ownFleet is the scenario's own fleet, when a step started one (nil:
	// the package's); bootstrap is what `flotilla fleet bootstrap` made.
	ownFleet  *localfleet.Fleet
	bootstrap *bootstrapRun
	// foreignFlagger is a Flagger a step installed as Helm would.
	foreignFlagger *foreignFlagger
	// lastOutput is the output of the last flotilla command a step ran.
	lastOutput string
	// delivery is laid over the application's default delivery, when a
	// step set it (a null removes a default); routes are the routing
	// objects steps watch, by cluster; loadTarget stands for the canary's
	// service in load tests.
	delivery map[string]any
	kurator  map[string]any
	// cdSink receives the CDEvents, when a step made one.
	cdSink *sink
	// otlp receives flotilla's traces, when a step made it.
	otlp *otlptest.Receiver
	// browser shows the web UI, when a step opened it.
	browser *browser
	// anonymousRead is server.anonymousRead, when a step set it; session
	// is the web UI's session cookie a step logged in for (#31).
	anonymousRead bool
	session       *http.Cookie
	// trustedProxies is server.trustedProxies, and audit what the audit's
	// steps sent and through which proxy, when steps set them
	// (steps_audit_test.go, #31).
	trustedProxies []string
	audit          *auditWorld
	// createdTokens are the secrets of the tokens `flotilla token create`
	// made, by name, and revokedAt when one was revoked
	// (steps_tokens_test.go, #31).
	createdTokens map[string]string
	revokedAt     time.Time
	routes        map[string]*routeLog
	loadTarget    *loadTarget
	// natsDown is the NATS node a step killed, until it is started again;
	// acked the versions whose push flotilla acknowledged in a burst.
	natsDown *int
	acked    []string
	// discovery is fleet.discovery (steps_discovery_test.go).
	discovery map[string]any
	// fleetRollouts is server.fleetRollouts, kept in cluster
	// fleetRolloutsIn; kubectlOut what `kubectl get --watch` printed.
	fleetRollouts   map[string]any
	fleetRolloutsIn string
	kubectlOut      *lockedBuffer
	// pollInterval is fleet.poll.interval, when a step set it; else 0s:
	// the other scenarios drive flotilla by their webhooks alone, and a
	// poll at a time of its own would race their steps.
	pollInterval string
	// watch is what the clusters' API servers reported of the scenario's
	// objects, when a step watched them (steps_clusterwatch_test.go).
	watch *clusterWatch
	// reconcile is fleet.reconcile and the application's driftPolicy,
	// when steps set them (steps_catchup_test.go); else the interval is
	// 0s, for the same reason as the poll's.
	reconcile *reconcileWorld
	// approvers are the API tokens' groups and automation, when steps set
	// them (steps_approvers_test.go, #31 item 4).
	approvers *approversWorld
}

func (s *scenario) registerRolloutSteps(sc *godog.ScenarioContext) {
	sc.Step(`^a registry$`, s.aRegistry)
	sc.Step(`^flotilla serving the application "([^"]*)" that tracks "([^"]*)" on track "([^"]*)" in waves "([^"]*)" then "([^"]*)"$`, s.flotillaServing)
	sc.Step(`^flotilla is configured for the application "([^"]*)" that tracks "([^"]*)" on track "([^"]*)" in waves "([^"]*)" then "([^"]*)"$`, s.configure)
	sc.Step(`^the workload "([^"]*)" runs in every cluster of the waves$`, s.workloadEverywhere)
	sc.Step(`^version "([^"]*)" has been rolled out to every cluster$`, s.rolledOut)
	sc.Step(`^version "([^"]*)" is pushed$`, s.pushVersion)
	sc.Step(`^the registry notification of version "([^"]*)" is delivered (\d+) times$`, s.pushRedelivered)
	sc.Step(`^the rollout of "([^"]*)" succeeds$`, s.rolloutSucceeds)
	sc.Step(`^the rollout of "([^"]*)" is rolled back$`, s.rolloutRolledBack)
	sc.Step(`^the primary in every cluster runs version "([^"]*)" by digest$`, s.primariesRun)
	sc.Step(`^Flagger reported "([^"]*)" for "([^"]*)" through its post-rollout hook in every cluster$`, s.postRolloutReported)
	sc.Step(`^no workload in any cluster runs version "([^"]*)"$`, s.noWorkloadRuns)
	sc.Step(`^the analysis gate fails in cluster "([^"]*)"$`, s.gateFailsIn)
	sc.Step(`^wave 1 of the rollout of "([^"]*)" has been applied$`, s.wave1Applied)
	sc.Step(`^flotilla is killed with SIGKILL$`, s.killFlotilla)
	sc.Step(`^flotilla is started again$`, s.restartFlotilla)
	sc.Step(`^exactly (\d+) rollouts? of "([^"]*)" (?:was|were) started$`, s.rolloutsStarted)
	sc.Step(`^flotilla records that "([^"]*)" was skipped because "([^"]*)"$`, s.skippedBecause)
	sc.Step(`^no rollout of "([^"]*)" was started$`, s.noRollout)
	sc.Step(`^a GitHub push signed with the wrong secret is delivered$`, s.forgedGitHubPush)
	sc.Step(`^flotilla answers (\d+)$`, s.flotillaAnswers)
	sc.Step(`^flotilla recorded no git push$`, s.noGitPush)
	sc.Step(`^the registry receiver takes (\d+) deliveries at once and (\d+) a second$`, s.registryRateLimited)
	sc.Step(`^the registry notification of version "([^"]*)" is dated "([^"]*)"$`, s.pushDated)
	sc.Step(`^(\d+) registry notifications with a wrong token are delivered$`, s.wrongTokenFlood)
	sc.Step(`^one byte of the first record of flotilla's journal is flipped$`, s.damageJournal)
	sc.Step(`^a second application "([^"]*)" whose registry never answers$`, s.stuckApplication)
	sc.Step(`^(\d+) pushes of "([^"]*)" are notified$`, s.stuckPushes)
	sc.Step("^`flotilla serve` refuses to start, naming the journal segment and `flotilla store repair`$", s.serveRefusesDamagedJournal)
	sc.Step("^`flotilla store repair` is run on flotilla's data directory$", s.repairJournal)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *scenario) aRegistry() error {
	if s.w == nil { // else a real node's step made it
		dir, err := os.MkdirTemp("", "flotilla-scenario-*")
		if err != nil {
			return err
		}
		s.w = &world{dir: dir, digests: map[string]string{}, pushes: map[string][]byte{}}
	}
	s.w.registry = httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	s.w.regHost = strings.TrimPrefix(s.w.registry.URL, "http://")
	if n := s.w.realNode; n != nil {
		// Named so that a pod on the node reaches it too.
		s.w.regHost = strings.Replace(s.w.regHost, "127.0.0.1", n.Gateway, 1)
	}
	s.onCleanup(s.w.registry.Close)
	return nil
}

// clusterGate answers Flagger's rollout gate: 500 for the clusters told to
// fail (flotilla puts the cluster in every gate call's metadata), 200 otherwise.
type clusterGate struct {
	srv  *httptest.Server
	mu   sync.Mutex
	fail map[string]bool
	// failCanary fails one canary of a cluster ("<cluster>/<canary>"),
	// delay answers a canary (by name) that much later (workloads steps).
	failCanary map[string]bool
	delay      map[string]time.Duration
}

func newClusterGate() *clusterGate {
	g := &clusterGate{fail: map[string]bool{}, failCanary: map[string]bool{}, delay: map[string]time.Duration{}}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p struct {
			Name     string            `json:"name"`
			Metadata map[string]string `json:"metadata"`
		}
		_ = json.NewDecoder(r.Body).Decode(&p)
		g.mu.Lock()
		fail := g.fail[p.Metadata["cluster"]] || g.failCanary[p.Metadata["cluster"]+"/"+p.Name]
		delay := g.delay[p.Name]
		g.mu.Unlock()
		time.Sleep(delay)
		if fail {
			http.Error(w, "gate closed for "+p.Metadata["cluster"], http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	return g
}

// freePort is an address for a server the scenario starts as a process
// (freeport: not one the kernel may hand to another process meanwhile).
func freePort(ctx context.Context) (string, error) { return freeport.Addr(ctx) }

func (s *scenario) flotillaServing(ctx context.Context, app, repo, track, wave1, wave2 string) error {
	if err := s.configure(ctx, app, repo, track, wave1, wave2); err != nil {
		return err
	}
	return s.w.flotilla.start(ctx)
}

// configure writes the scenario's flotilla config (and makes what it
// refers to: sink, gate, secrets) without starting flotilla.
func (s *scenario) configure(ctx context.Context, app, repo, track, wave1, wave2 string) error {
	w := s.w
	w.app, w.workload, w.repo = app, app, repo
	w.waves = [][]string{strings.Split(wave1, ","), strings.Split(wave2, ",")}
	w.namespace = "ro-" + randomHex(4)
	// Flagger's token has the characters of a base64 secret ('/', '+',
	// '='): flotilla escapes it in every canary's hook URL.
	// A registry a step started before may already send its notifications
	// with a token to an address: they are kept.
	w.registryToken, w.githubSecret, w.flaggerToken = cmp.Or(w.registryToken, randomHex(16)), randomHex(16), randomHex(6)+"/+"+randomHex(6)+"=="
	var err error
	// The sink outlives this step; the scenario's cleanup closes it.
	if w.sink, err = newSink(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	s.onCleanup(w.sink.close)
	w.gate = newClusterGate()
	s.onCleanup(w.gate.srv.Close)
	listen := w.listen
	if listen == "" {
		if listen, err = freePort(ctx); err != nil {
			return err
		}
	}
	secret := func(name, value string) (map[string]string, error) {
		p := filepath.Join(w.dir, name)
		return map[string]string{"file": p}, os.WriteFile(p, []byte(value+"\n"), 0o600)
	}
	regSecret, err := secret("registry.token", w.registryToken)
	if err != nil {
		return err
	}
	ghSecret, err := secret("github.secret", w.githubSecret)
	if err != nil {
		return err
	}
	flSecret, err := secret("flagger.token", w.flaggerToken)
	if err != nil {
		return err
	}
	w.apiToken = randomHex(16)
	apiSecret, err := secret("api.token", w.apiToken)
	if err != nil {
		return err
	}
	var clusters []map[string]any
	var waves []map[string]any
	for i, names := range w.waves {
		wave := map[string]any{"name": fmt.Sprintf("wave-%d", i+1), "clusters": names}
		for k, v := range w.wavePolicies[i] {
			wave[k] = v
		}
		waves = append(waves, wave)
		for _, n := range names {
			cl, ok := s.fleet().Cluster(n)
			if !ok {
				return fmt.Errorf("the fleet has no cluster %s", n)
			}
			kubeconfig := cl.Kubeconfig
			if p, ok := w.proxied[n]; ok {
				kubeconfig = p.kubeconfig
			}
			entry := map[string]any{"name": n, "kubeconfig": kubeconfig}
			if l := w.clusterLabels[n]; l != nil {
				entry["labels"] = l
			}
			clusters = append(clusters, entry)
			c, err := s.clientsFor(n)
			if err != nil {
				return err
			}
			w.clusters = append(w.clusters, c)
		}
	}
	cfg := map[string]any{
		// Scenarios share the fleet: each flotilla prunes only its own objects.
		"server": map[string]any{"listen": listen, "dataDir": filepath.Join(w.dir, "data"), "apiToken": apiSecret, "instance": w.namespace},
		"events": eventsConfig(w),
		"receivers": []map[string]any{
			{"name": "registry", "type": "distribution", "secret": regSecret, "rateLimit": w.registryRateLimit},
			{"name": "github", "type": "github", "secret": ghSecret},
			{"name": "flagger", "type": "flagger", "secret": flSecret},
		},
		"fleet": map[string]any{"clusters": clusters, "waves": waves, "metricsServer": cmp.Or(s.fleet().PrometheusURL, config.DefaultMetricsServer),
			"poll": map[string]any{"interval": cmp.Or(w.pollInterval, "0s")}, "reconcile": w.reconcileConfig()},
		"applications": []map[string]any{w.appConfig(app, repo, track, listen)},
	}
	if s.scaleOut {
		cfg["server"].(map[string]any)["bus"] = busConfig(w.namespace)
	}
	if w.fleetRollouts != nil {
		cfg["server"].(map[string]any)["fleetRollouts"] = w.fleetRollouts
	}
	if w.discovery != nil {
		cfg["fleet"].(map[string]any)["discovery"] = w.discovery
	}
	if w.anonymousRead {
		cfg["server"].(map[string]any)["anonymousRead"] = true
	}
	if len(w.trustedProxies) > 0 {
		cfg["server"].(map[string]any)["trustedProxies"] = w.trustedProxies
	}
	if w.registries != nil {
		cfg["registries"] = w.registries
	}
	if w.otlp != nil {
		cfg["telemetry"] = tracingConfig(w)
	}
	if len(w.approverTokens) > 0 {
		var tokens []map[string]any
		for name, tok := range w.approverTokens {
			sec, err := secret("token-"+name, tok)
			if err != nil {
				return err
			}
			tokens = append(tokens, map[string]any{"name": name, "secret": sec})
		}
		cfg["server"].(map[string]any)["apiTokens"] = tokens
	}
	if w.tagFilter != nil {
		cfg["applications"].([]map[string]any)[0]["tagFilter"] = w.tagFilter
	}
	if w.semver != "" {
		cfg["applications"].([]map[string]any)[0]["semver"] = w.semver
	}
	if len(w.denyTags) > 0 {
		cfg["applications"].([]map[string]any)[0]["denyTags"] = w.denyTags
	}
	if w.onNewVersion != "" {
		cfg["applications"].([]map[string]any)[0]["onNewVersion"] = w.onNewVersion
	}
	if w.approvers != nil {
		w.approvers.configure(cfg)
	}
	if r := w.reconcile; r != nil && r.driftPolicy != "" {
		cfg["applications"].([]map[string]any)[0]["driftPolicy"] = r.driftPolicy
	}
	if w.appSelector != nil {
		cfg["applications"].([]map[string]any)[0]["clusterSelector"] = w.appSelector
	}
	if w.retention != "" {
		server := cfg["server"].(map[string]any)
		server["retention"], server["dedupeWindow"] = w.retention, w.dedupeWindow
	}
	if w.validation != nil {
		cfg["applications"].([]map[string]any)[0]["validation"] = w.validation
	}
	if w.verify != nil {
		cfg["applications"].([]map[string]any)[0]["verify"] = w.verify
	}
	if w.second != nil {
		cfg["applications"] = append(cfg["applications"].([]map[string]any), w.appConfig(w.second.name, w.second.repo, track, listen))
	}
	if w.imageSet != nil {
		w.imageSet.configure(cfg)
	}
	if w.stuckApp != "" {
		cfg["applications"] = append(cfg["applications"].([]map[string]any), map[string]any{
			"name": w.stuckApp, "image": w.stuckRegistry + "/stuck/" + w.stuckApp, "track": track, "namespace": w.namespace,
			"workload": map[string]any{"kind": "Deployment", "name": w.stuckApp},
			"service":  map[string]any{"port": 9898},
		})
	}
	if w.gitops != nil {
		cfg["applications"].([]map[string]any)[0]["gitops"] = w.gitops
	}
	if w.pr != nil {
		hookSecret, err := secret("gitea.secret", w.pr.hookSecret)
		if err != nil {
			return err
		}
		cfg["receivers"] = append(cfg["receivers"].([]map[string]any), map[string]any{"name": "gitea", "type": "gitea", "secret": hookSecret})
	}
	if w.gitSource != nil {
		a := cfg["applications"].([]map[string]any)[0]
		delete(a, "image")
		delete(a, "track")
		a["source"] = map[string]any{"git": w.gitSource}
	}
	if w.tekton != nil {
		f := cfg["fleet"].(map[string]any)
		f["executor"], f["tekton"] = "tekton", w.tekton.config()
	}
	for _, edit := range w.configEdits {
		if err := edit(cfg); err != nil {
			return err
		}
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(w.dir, "flotilla.yaml")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		return err
	}
	if s.scaleOut {
		w.flotilla = newReplicas(cfgPath, listen, w.dir, w.namespace)
	} else {
		w.flotilla = &flotillaProcess{config: cfgPath, listen: listen, logPath: filepath.Join(w.dir, "flotilla.log")}
	}
	s.onCleanup(func() { //nolint:contextcheck // a cleanup: it runs once the scenario's context has ended
		if s.failed {
			w.flotilla.dumpGoroutines()
		}
		w.flotilla.stop()
		if w.flotilla.proxy != nil {
			w.flotilla.proxy.close()
		}
		if s.scaleOut {
			deleteStream(w.namespace)
		}
		if s.failed {
			fmt.Fprintf(os.Stderr, "scenario files kept in %s\n--- flotilla log tail:\n%s\n", w.dir, w.flotilla.logs(40))
			return
		}
		_ = os.RemoveAll(w.dir)
	})
	return nil
}

// appConfig is the configuration of an application of the scenario: a
// blue/green canary with the scenario's gate, reporting to flotilla.
func (w *world) appConfig(app, repo, track, listen string) map[string]any {
	delivery := map[string]any{
		"strategy": "blueGreen", "interval": "1s", "iterations": 2, "threshold": 1, "progressDeadline": "2m",
		"webhooks": []map[string]any{
			{"name": "gate", "type": "rollout", "url": w.gate.srv.URL, "timeout": "5s"},
			// Flagger reports the outcome to flotilla's flagger receiver too.
			{"name": "report", "type": "post-rollout", "url": "http://" + listen + "/hooks/flagger/" + url.PathEscape(w.flaggerToken) + "?gate=post-rollout", "timeout": "5s"},
		},
	}
	if w.confirm != nil {
		delivery["webhooks"] = append(delivery["webhooks"].([]map[string]any),
			map[string]any{"name": "confirm", "type": "confirm-rollout", "url": w.confirm.srv.URL, "timeout": "5s"})
	}
	if w.deadline != "" {
		delivery["deadline"] = w.deadline
	}
	mergeDelivery(delivery, w.delivery)
	a := map[string]any{
		"name": app, "image": w.regHost + "/" + repo, "track": track, "namespace": w.namespace,
		"workload": map[string]any{"kind": "Deployment", "name": app},
		"service":  map[string]any{"port": 9898},
		"delivery": delivery,
	}
	if app == w.app {
		w.applyKurator(a)
	}
	return a
}

func (s *scenario) workloadEverywhere(ctx context.Context, name string) error {
	w := s.w
	for _, c := range w.clusters {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.namespace}}
		_, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil // a second workload of the scenario
		} else if err == nil {
			s.onCleanup(func() {
				// Runs in the After hook, when the step's ctx may have ended.
				ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				defer cancel()
				_ = c.Kube.CoreV1().Namespaces().Delete(ctx, w.namespace, metav1.DeleteOptions{})
			})
		}
		if err != nil {
			return fmt.Errorf("creating namespace in %s: %w", c.Name, err)
		}
		repo := w.repo
		if w.second != nil && name == w.second.name {
			repo = w.second.repo
		}
		labels := map[string]string{"app": name}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.namespace, Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: name, Image: w.regHost + "/" + repo + ":0.1.0",
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 9898}},
					}}},
				},
			},
		}
		if _, err := c.Kube.AppsV1().Deployments(w.namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating deployment in %s: %w", c.Name, err)
		}
	}
	return nil
}

// push writes a new random image as repo:version into the registry and
// returns the notification the registry would send for it.
func (s *scenario) push(version string) ([]byte, error) {
	return s.pushBuiltAt(version, time.Time{})
}

// pushBuiltAt is push of an image whose config says it was built at built
// (zero: the random image's own, none).
func (s *scenario) pushBuiltAt(version string, built time.Time) ([]byte, error) {
	w := s.w
	if b, ok := w.pushes[version]; ok {
		return b, nil
	}
	img, err := random.Image(256, 1)
	if err != nil {
		return nil, err
	}
	if !built.IsZero() {
		if img, err = mutate.CreatedAt(img, v1.Time{Time: built}); err != nil {
			return nil, err
		}
	}
	ref, err := name.NewTag(w.regHost + "/" + w.repo + ":" + version)
	if err != nil {
		return nil, err
	}
	if err := remote.Write(ref, img); err != nil {
		return nil, fmt.Errorf("pushing %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return nil, err
	}
	mt, err := img.MediaType()
	if err != nil {
		return nil, err
	}
	size, err := img.Size()
	if err != nil {
		return nil, err
	}
	w.digests[version] = d.String()
	body, err := json.Marshal(map[string]any{"events": []map[string]any{{
		"id": randomHex(8), "timestamp": time.Now().UTC().Format(time.RFC3339Nano), "action": "push",
		"target": map[string]any{
			"mediaType": string(mt), "digest": d.String(), "size": size, "length": size,
			"repository": w.repo, "url": fmt.Sprintf("http://%s/v2/%s/manifests/%s", w.regHost, w.repo, d), "tag": version,
		},
		"request": map[string]any{"id": randomHex(8), "addr": "127.0.0.1:40000", "host": w.regHost, "method": "PUT", "useragent": "go-containerregistry"},
		"actor":   map[string]any{"name": "ci"},
		"source":  map[string]any{"addr": "registry:5000", "instanceID": "features"},
	}}})
	if err != nil {
		return nil, err
	}
	w.pushes[version] = body
	return body, nil
}

func (s *scenario) post(ctx context.Context, path string, header http.Header, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.w.flotilla.url()+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	s.w.lastStatus = resp.StatusCode
	return resp.StatusCode, nil
}

// notify delivers a registry notification as distribution does: an answer
// of 5xx (flotilla could not journal it durably in time, as a scale-out
// replica whose NATS is busy answers) is delivered again after a second,
// for up to 30 s, as distribution's retrying sink would; the duplicate
// window drops a delivery that had been journaled after all.
func (s *scenario) notify(ctx context.Context, body []byte) error {
	h := http.Header{}
	h.Set("Content-Type", "application/vnd.docker.distribution.events.v2+json")
	h.Set("Authorization", "Bearer "+s.w.registryToken)
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, err := s.post(ctx, "/hooks/registry", h, body)
		if err != nil {
			return err
		}
		if status == http.StatusAccepted {
			return nil
		}
		if status < 500 || ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("registry notification answered %d, want 202", status)
		}
		time.Sleep(time.Second)
	}
}

func (s *scenario) pushVersion(ctx context.Context, version string) error {
	body, err := s.push(version)
	if err != nil {
		return err
	}
	return s.notify(ctx, body)
}

func (s *scenario) pushRedelivered(ctx context.Context, version string, times int) error {
	body, err := s.push(version)
	if err != nil {
		return err
	}
	for range times {
		if err := s.notify(ctx, body); err != nil {
			return err
		}
	}
	return nil
}

func (s *scenario) rolledOut(ctx context.Context, version string) error {
	if err := s.pushVersion(ctx, version); err != nil {
		return err
	}
	if err := s.rolloutSucceeds(ctx, version); err != nil {
		return err
	}
	return s.primariesRun(ctx, version)
}

// rolloutID waits for the rollout of a version to start and returns its id.
func (s *scenario) rolloutID(ctx context.Context, version string) (string, error) {
	e, err := s.w.sink.waitFor(ctx, "rollout of "+version+" started", func(e cloudevents.Event) bool {
		if e.Type() != events.TypeRolloutStarted {
			return false
		}
		p, err := events.Decode[events.RolloutStarted](e)
		return err == nil && p.Tag == version
	})
	if err != nil {
		return "", err
	}
	p, _ := events.Decode[events.RolloutStarted](e)
	return p.RolloutID, nil
}

func (s *scenario) rolloutEnds(ctx context.Context, version, want string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	ends := map[string]bool{events.TypeRolloutSucceeded: true, events.TypeRolloutRolledBack: true}
	e, err := s.w.sink.waitFor(ctx, "end of rollout "+id, func(e cloudevents.Event) bool {
		return ends[e.Type()] && events.RolloutID(e) == id
	})
	if err != nil {
		return err
	}
	if e.Type() != want {
		return fmt.Errorf("rollout %s of %s ended %s, want %s: %s", id, version, e.Type(), want, e.Data())
	}
	return nil
}

func (s *scenario) rolloutSucceeds(ctx context.Context, version string) error {
	return s.rolloutEnds(ctx, version, events.TypeRolloutSucceeded)
}

func (s *scenario) rolloutRolledBack(ctx context.Context, version string) error {
	return s.rolloutEnds(ctx, version, events.TypeRolloutRolledBack)
}

func (s *scenario) ref(version string) (string, error) {
	d, ok := s.w.digests[version]
	if !ok {
		return "", fmt.Errorf("version %s was never pushed", version)
	}
	return s.w.regHost + "/" + s.w.repo + "@" + d, nil
}

func (s *scenario) imageOf(ctx context.Context, c *fleettest.Clients, deployment string) (string, error) {
	d, err := c.Kube.AppsV1().Deployments(s.w.namespace).Get(ctx, deployment, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading %s in %s: %w", deployment, c.Name, err)
	}
	return d.Spec.Template.Spec.Containers[0].Image, nil
}

func (s *scenario) primariesRun(ctx context.Context, version string) error {
	want, err := s.ref(version)
	if err != nil {
		return err
	}
	for _, c := range s.w.clusters {
		got, err := s.imageOf(ctx, c, s.w.workload+"-primary")
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("primary in %s runs %s, want %s (version %s)", c.Name, got, want, version)
		}
	}
	return nil
}

func (s *scenario) noWorkloadRuns(ctx context.Context, version string) error {
	bad, err := s.ref(version)
	if err != nil {
		return err
	}
	for _, c := range s.w.clusters {
		for _, d := range []string{s.w.workload, s.w.workload + "-primary"} {
			got, err := s.imageOf(ctx, c, d)
			if apierrors.IsNotFound(err) && d != s.w.workload {
				continue // no canary was ever applied here: no primary runs anything
			}
			if err != nil {
				return err
			}
			if got == bad {
				return fmt.Errorf("%s in %s still runs %s (version %s)", d, c.Name, got, version)
			}
		}
	}
	return nil
}

func (s *scenario) gateFailsIn(cluster string) error {
	s.w.gate.mu.Lock()
	defer s.w.gate.mu.Unlock()
	s.w.gate.fail[cluster] = true
	return nil
}

func (s *scenario) wave1Applied(ctx context.Context, version string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	_, err = s.w.sink.waitFor(ctx, "wave 1 applied", func(e cloudevents.Event) bool {
		if e.Type() != events.TypeClusterApplied || events.RolloutID(e) != id {
			return false
		}
		p, err := events.Decode[events.ClusterResult](e)
		return err == nil && p.Wave == 0
	})
	return err
}

func (s *scenario) killFlotilla() error { return s.w.flotilla.kill() }

func (s *scenario) restartFlotilla(ctx context.Context) error { return s.w.flotilla.start(ctx) }

func (s *scenario) startedRollouts(version string) []string {
	var ids []string
	for _, e := range s.w.sink.all() {
		if e.Type() != events.TypeRolloutStarted {
			continue
		}
		if p, err := events.Decode[events.RolloutStarted](e); err == nil && p.Tag == version {
			ids = append(ids, p.RolloutID)
		}
	}
	return ids
}

func (s *scenario) rolloutsStarted(ctx context.Context, n int, version string) error {
	if ids := s.startedRollouts(version); len(ids) != n {
		return fmt.Errorf("%d rollouts of %s started (%v), want %d", len(ids), version, ids, n)
	}
	var ros []struct{ Tag string }
	if err := s.getJSON(ctx, "/api/v1/rollouts", &ros); err != nil {
		return err
	}
	count := 0
	for _, r := range ros {
		if r.Tag == version {
			count++
		}
	}
	if count != n {
		return fmt.Errorf("the API lists %d rollouts of %s, want %d", count, version, n)
	}
	return nil
}

// getJSON reads path from flotilla's API into v. An answer of 502, 503 or
// 504 (flotilla said it could not answer now: its state store busy, as a
// NATS cluster under the whole suite's load can be), or a refused
// connection (a Service still routing to the pod an upgrade replaced), is
// asked again, for up to 30 s, as a client would; the last answer is the
// error.
func (s *scenario) getJSON(ctx context.Context, path string, v any) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, err := s.getJSONOnce(ctx, path, v)
		busy := code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout ||
			errors.Is(err, syscall.ECONNREFUSED)
		if !busy || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Second)
	}
}

func (s *scenario) getJSONOnce(ctx context.Context, path string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.w.flotilla.url()+path, nil)
	if err != nil {
		return 0, err
	}
	// Every read needs an identity (#31): the scenario's own API token.
	req.Header.Set("Authorization", "Bearer "+s.w.apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return resp.StatusCode, fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(v)
}

func (s *scenario) skippedBecause(ctx context.Context, version, reason string) error {
	_, err := s.w.sink.waitFor(ctx, version+" skipped", func(e cloudevents.Event) bool {
		if e.Type() != events.TypeRolloutSkipped {
			return false
		}
		p, err := events.Decode[events.RolloutSkipped](e)
		return err == nil && p.Tag == version && strings.Contains(p.Reason, reason)
	})
	return err
}

func (s *scenario) noRollout(version string) error {
	// plan handles a push in one step: once it recorded the skip, it has
	// decided, so a rollout would already have been journaled before it.
	if ids := s.startedRollouts(version); len(ids) != 0 {
		return fmt.Errorf("rollouts of %s started: %v", version, ids)
	}
	return nil
}

func (s *scenario) githubPush(ctx context.Context, delivery, secret string) (int, error) {
	body := []byte(`{"ref":"refs/heads/main","before":"` + strings.Repeat("a", 40) + `","after":"` + strings.Repeat("b", 40) + `",` +
		`"created":false,"deleted":false,"commits":[{"id":"` + strings.Repeat("b", 40) + `","added":["apps/podinfo.yaml"],"removed":[],"modified":[]}],` +
		`"repository":{"full_name":"demo/deploy","clone_url":"https://github.com/demo/deploy.git"},"pusher":{"name":"ci"},"sender":{"login":"ci"}}`)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-GitHub-Event", "push")
	h.Set("X-GitHub-Delivery", delivery)
	h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	return s.post(ctx, "/hooks/github", h, body)
}

func (s *scenario) forgedGitHubPush(ctx context.Context) error {
	_, err := s.githubPush(ctx, "forged-"+randomHex(4), "not-"+s.w.githubSecret)
	return err
}

func (s *scenario) registryRateLimited(burst, perSecond int) error {
	s.w.registryRateLimit = map[string]any{"burst": burst, "perSecond": perSecond}
	return nil
}

// pushDated pushes version and notifies flotilla with the notification's
// timestamp replaced by at.
func (s *scenario) pushDated(ctx context.Context, version, at string) error {
	body, err := s.push(version)
	if err != nil {
		return err
	}
	var n map[string][]map[string]any
	if err := json.Unmarshal(body, &n); err != nil {
		return err
	}
	for _, e := range n["events"] {
		e["timestamp"] = at
	}
	if body, err = json.Marshal(n); err != nil {
		return err
	}
	return s.notify(ctx, body)
}

// wrongTokenFlood posts n notifications of a push that never happened with
// a wrong token; each must be refused with 401 (not 429: refusals must not
// spend the registry's rate limit).
func (s *scenario) wrongTokenFlood(ctx context.Context, n int) error {
	body, err := json.Marshal(map[string]any{"events": []map[string]any{{"id": randomHex(8), "action": "push"}}})
	if err != nil {
		return err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/vnd.docker.distribution.events.v2+json")
	h.Set("Authorization", "Bearer not-"+s.w.registryToken)
	for i := range n {
		status, err := s.post(ctx, "/hooks/registry", h, body)
		if err != nil {
			return err
		}
		if status != http.StatusUnauthorized && status != http.StatusTooManyRequests {
			return fmt.Errorf("wrong-token notification %d answered %d, want 401 or 429", i+1, status)
		}
	}
	return nil
}

// stuckApplication starts a registry that accepts connections and never
// answers (a frozen registry: the failure is injected, the rest is real),
// for a second application flotilla serves.
func (s *scenario) stuckApplication(ctx context.Context, app string) error {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never read, never answered
			mu.Unlock()
		}
	}()
	s.onCleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	s.w.stuckApp, s.w.stuckRegistry = app, l.Addr().String()
	return nil
}

// stuckPushes notifies n pushes of the stuck application's image: verifying
// each waits on its registry.
func (s *scenario) stuckPushes(ctx context.Context, n int, app string) error {
	if app != s.w.stuckApp {
		return fmt.Errorf("no application %q whose registry never answers", app)
	}
	for i := range n {
		digest := "sha256:" + strings.Repeat(fmt.Sprintf("%x", i%16), 64)
		body, err := json.Marshal(map[string]any{"events": []map[string]any{{
			"id": randomHex(8), "timestamp": time.Now().UTC().Format(time.RFC3339Nano), "action": "push",
			"target": map[string]any{
				"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest, "size": 1000,
				"repository": "stuck/" + app, "tag": fmt.Sprintf("2.0.%d", i),
				"url": fmt.Sprintf("http://%s/v2/stuck/%s/manifests/%s", s.w.stuckRegistry, app, digest),
			},
			"request": map[string]any{"id": randomHex(8), "addr": "127.0.0.1:40000", "host": s.w.stuckRegistry, "method": "PUT"},
		}}})
		if err != nil {
			return err
		}
		if err := s.notify(ctx, body); err != nil {
			return err
		}
	}
	return nil
}

// journalSegment is the first segment of the journal of the scenario's
// flotilla.
func (s *scenario) journalSegment() string {
	return filepath.Join(s.w.dir, "data", "flotilla.db.journal", fmt.Sprintf("%020d.log", 1))
}

// damageJournal flips a byte inside the first record's event (past the
// 8-byte frame and the 10-byte record header): intact records follow it,
// so it is damage, not a torn write.
func (s *scenario) damageJournal() error {
	f, err := os.OpenFile(s.journalSegment(), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, 40); err != nil {
		return err
	}
	b[0] ^= 0x20
	_, err = f.WriteAt(b, 40)
	return err
}

func (s *scenario) serveRefusesDamagedJournal(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, flotillaBin, "serve", "--config", s.w.flotilla.config, "--listen", s.w.flotilla.listen).CombinedOutput()
	if err == nil {
		return fmt.Errorf("flotilla serve started on a damaged journal:\n%s", out)
	}
	for _, want := range []string{filepath.Base(s.journalSegment()), "flotilla store repair"} {
		if !strings.Contains(string(out), want) {
			return fmt.Errorf("flotilla serve's refusal does not name %q:\n%s", want, out)
		}
	}
	return nil
}

func (s *scenario) repairJournal(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, flotillaBin, "store", "repair", "--data-dir", filepath.Join(s.w.dir, "data")).CombinedOutput()
	if err != nil {
		return fmt.Errorf("flotilla store repair: %w\n%s", err, out)
	}
	return nil
}

func (s *scenario) flotillaAnswers(status int) error {
	if s.w.lastStatus != status {
		return fmt.Errorf("flotilla answered %d, want %d", s.w.lastStatus, status)
	}
	return nil
}

func (s *scenario) noGitPush(ctx context.Context) error {
	// A genuine push after the forged one: the sink sees the journal in order,
	// so when the genuine push arrives, anything the forged one recorded would
	// have arrived before it.
	genuine := "genuine-" + randomHex(4)
	status := s.w.lastStatus
	code, err := s.githubPush(ctx, genuine, s.w.githubSecret)
	if err != nil {
		return fmt.Errorf("genuine push: %w", err)
	}
	if code != http.StatusAccepted {
		return fmt.Errorf("genuine push answered %d, want 202", code)
	}
	s.w.lastStatus = status
	if _, err := s.w.sink.waitFor(ctx, "the genuine git push", func(e cloudevents.Event) bool { return e.Type() == events.TypeGitPushed }); err != nil {
		return err
	}
	for _, e := range s.w.sink.all() {
		if e.Type() != events.TypeGitPushed {
			continue
		}
		p, err := events.Decode[events.GitPushed](e)
		if err != nil || p.DeliveryID != genuine {
			return fmt.Errorf("a git push other than the genuine one was recorded: %s", e.Data())
		}
	}
	return nil
}

// postRolloutReported waits for the canary event each cluster's Flagger
// posts through the post-rollout hook flotilla's receiver answers.
func (s *scenario) postRolloutReported(ctx context.Context, phase, version string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	for _, names := range s.w.waves {
		for _, cluster := range names {
			_, err := s.w.sink.waitFor(ctx, "post-rollout of "+cluster, func(e cloudevents.Event) bool {
				if e.Type() != events.TypeCanary {
					return false
				}
				c, err := events.Decode[events.Canary](e)
				return err == nil && c.Cluster == cluster && c.RolloutID == id && c.Message == "post-rollout hook: "+phase
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// eventsConfig sends flotilla's events to the scenario's sink, and its
// CDEvents to the CDEvents sink when a step made one.
func eventsConfig(w *world) map[string]any {
	ev := map[string]any{"sink": w.sink.srv.URL}
	if w.cdSink != nil {
		ev["cdevents"] = []string{w.cdSink.srv.URL}
	}
	return ev
}
