package features

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cucumber/godog"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/bootstrap"
	"github.com/flotilla-cd/flotilla/pkg/kube"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

// bootstrapRun is what the scenario's `flotilla fleet bootstrap` used and
// made: its flags, the namespace of flotilla's identity, the kubeconfigs
// it wrote, and the Tekton namespace and steps' ServiceAccount when the
// config it ran on had the Tekton executor.
type bootstrapRun struct {
	config, identity, kubeconfigs string
	tektonNamespace, stepAccount  string
	// admin are --admin-kubeconfig flags: once flotilla runs with its own
	// identity, the config's kubeconfigs are that identity's.
	admin []string
	// loadTester is --load-tester-namespace, when the scenario installs
	// Flagger's load tester.
	loadTester string
}

// args are the flags every fleet bootstrap and check of the scenario gets:
// Flagger reaches no Prometheus here, and checks its canaries every 2s as
// the fleet's own Flaggers do.
func (b *bootstrapRun) args(cmd string) []string {
	args := append([]string{"fleet", cmd, "--config", b.config, "--namespace", b.identity,
		"--metrics-server", "http://127.0.0.1:1", "--flagger-arg=-control-loop-interval=2s"}, b.admin...)
	if b.loadTester != "" {
		args = append(args, "--load-tester-namespace", b.loadTester)
	}
	return args
}

func (s *scenario) registerBootstrapSteps(sc *godog.ScenarioContext) {
	sc.Step(`^a fleet of (\d+) clusters without Flagger$`, s.fleetWithoutFlagger)
	sc.Step("^`flotilla fleet check` reports clusters \"([^\"]*)\" not ready, Flagger's Deployment missing$", s.checkNotReady)
	sc.Step("^`flotilla fleet bootstrap` runs$", s.bootstrapRuns)
	sc.Step(`^it created Flagger, its CRDs, its load tester and flotilla's identity in clusters "([^"]*)" and wrote their kubeconfigs$`, s.bootstrapCreated)
	sc.Step(`^Flagger runs in every cluster as bootstrap installed it$`, s.flaggerFromBootstrap)
	sc.Step("^`flotilla fleet check` reports clusters \"([^\"]*)\" ready$", s.checkReady)
	sc.Step(`^flotilla starts with the kubeconfigs bootstrap wrote$`, s.startWithIdentity)
	sc.Step("^a second `flotilla fleet bootstrap` leaves every object unchanged$", s.bootstrapUnchanged)
	sc.Step("^`flotilla fleet bootstrap` has given flotilla its identity in clusters \"([^\"]*)\" and the Tekton executor's Role in \"([^\"]*)\"$", s.bootstrapIdentity)
	sc.Step(`^flotilla is restarted with the application naming the workload "([^"]*)"$`, s.restartRenamed)
	sc.Step(`^the canary "([^"]*)" is pruned from every cluster of the waves$`, s.canaryPruned)
	sc.Step(`^flotilla's identity may patch Deployments in the application's namespace, and may not read Secrets, patch Deployments outside it, delete Namespaces or create ClusterRoleBindings$`, s.identityBounded)
	sc.Step(`^flotilla's identity may run PipelineRuns in the Tekton namespace of "([^"]*)" and nowhere else, and the steps' ServiceAccount may do nothing$`, s.tektonBounded)
	sc.Step(`^listing Secrets with flotilla's token is denied$`, s.tokenDenied)
	sc.Step("^`flotilla fleet bootstrap` without --allow has given flotilla its identity in clusters \"([^\"]*)\"$", s.bootstrapIdentityOnly)
	sc.Step(`^flotilla's identity may get, create, patch and delete ConfigMaps in the application's namespace, and may not list them, write them outside it, or read Secrets$`, s.inventoryGranted)
}

// fleetWithoutFlagger starts the scenario's own fleet, without Flagger.
func (s *scenario) fleetWithoutFlagger(ctx context.Context, n int) error {
	dir, err := os.MkdirTemp("", "flotilla-bootfleet-*")
	if err != nil {
		return err
	}
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	f, err := localfleet.Up(startCtx, localfleet.Options{
		Dir: dir, Clusters: n, NoFlagger: true, DieWithParent: true,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return fmt.Errorf("starting a fleet without Flagger (logs in %s): %w", dir, err)
	}
	s.w.ownFleet = f
	s.onCleanup(func() {
		// Runs in the After hook, when the step's ctx may have ended.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = f.Down(ctx)
		if s.failed {
			fmt.Fprintf(os.Stderr, "the scenario's fleet logs are kept in %s\n", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	b := &bootstrapRun{config: s.configPath(), identity: bootstrap.DefaultNamespace, kubeconfigs: filepath.Join(s.w.dir, "kubeconfigs"), loadTester: "loadtester"}
	for _, c := range f.Clusters {
		b.admin = append(b.admin, "--admin-kubeconfig", c.Name+"="+c.Kubeconfig)
	}
	s.w.bootstrap = b
	return nil
}

// configPath is where configure writes the scenario's config.
func (s *scenario) configPath() string { return filepath.Join(s.w.dir, "flotilla.yaml") }

// runFlotilla runs the flotilla binary and returns its output and exit code.
func runFlotilla(ctx context.Context, args ...string) (string, int, error) {
	cmd := exec.CommandContext(ctx, flotillaBin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), ee.ExitCode(), nil
	}
	return out.String(), 0, err
}

// lines of a fleet bootstrap or check: cluster, then object and state.
func bootstrapLines(out string) [][]string {
	var ls [][]string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		ls = append(ls, strings.Split(l, "\t"))
	}
	return ls
}

func (s *scenario) checkNotReady(ctx context.Context, clusters string) error {
	out, code, err := runFlotilla(ctx, s.w.bootstrap.args("check")...)
	if err != nil {
		return err
	}
	if code != 1 {
		return fmt.Errorf("fleet check exited %d, want 1:\n%s", code, out)
	}
	for _, c := range strings.Split(clusters, ",") {
		for _, want := range []string{c + "\tDeployment flagger-system/flagger\tmissing", c + "\tCustomResourceDefinition canaries.flagger.app\tmissing", c + "\tnot ready"} {
			if !strings.Contains(out, want) {
				return fmt.Errorf("fleet check does not say %q:\n%s", want, out)
			}
		}
	}
	return nil
}

func (s *scenario) bootstrapRuns(ctx context.Context) error {
	b := s.w.bootstrap
	out, code, err := runFlotilla(ctx, append(b.args("bootstrap"), "--write-kubeconfigs", b.kubeconfigs)...)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("fleet bootstrap exited %d:\n%s", code, out)
	}
	s.w.lastOutput = out
	return nil
}

func (s *scenario) bootstrapCreated(clusters string) error {
	out := s.w.lastOutput
	for _, c := range strings.Split(clusters, ",") {
		for _, obj := range []string{
			"CustomResourceDefinition canaries.flagger.app", "Deployment flagger-system/flagger", "ClusterRole flagger",
			"ServiceAccount flotilla-system/flotilla", "ClusterRole " + bootstrap.ReaderRole, "ClusterRole " + bootstrap.DeliverRole,
			"ClusterRoleBinding " + bootstrap.ReaderRole, "RoleBinding " + s.w.namespace + "/" + bootstrap.DeliverRole,
			"Deployment loadtester/flagger-loadtester", "Service loadtester/flagger-loadtester",
		} {
			if want := c + "\t" + obj + "\tcreated"; !strings.Contains(out, want) {
				return fmt.Errorf("fleet bootstrap does not say %q:\n%s", want, out)
			}
		}
		if _, err := os.Stat(filepath.Join(s.w.bootstrap.kubeconfigs, c+".kubeconfig")); err != nil {
			return fmt.Errorf("bootstrap wrote no kubeconfig for %s: %w\n%s", c, err, out)
		}
	}
	for _, l := range bootstrapLines(out) {
		if len(l) == 3 && l[2] != string(bootstrap.Created) {
			return fmt.Errorf("on a fleet without Flagger, bootstrap %s %s, want created:\n%s", l[2], l[1], out)
		}
	}
	return nil
}

func (s *scenario) flaggerFromBootstrap(ctx context.Context) error {
	for _, c := range s.w.ownFleet.Clusters {
		if _, err := s.w.ownFleet.StartFlagger(ctx, c.Name, bootstrap.DefaultFlaggerNamespace, "flagger"); err != nil {
			return fmt.Errorf("starting Flagger in %s as bootstrap installed it: %w", c.Name, err)
		}
	}
	return nil
}

func (s *scenario) checkReady(ctx context.Context, clusters string) error {
	var out string
	var code int
	// Flagger's Deployment becomes available once kwok has its pod Ready.
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		out, code, err = runFlotilla(ctx, s.w.bootstrap.args("check")...)
		return code == 0, err
	})
	if err != nil {
		return fmt.Errorf("fleet check exited %d: %w:\n%s", code, err, out)
	}
	for _, c := range strings.Split(clusters, ",") {
		if !strings.Contains(out, c+"\tready (") {
			return fmt.Errorf("fleet check does not report %s ready:\n%s", c, out)
		}
	}
	return nil
}

// startWithIdentity points the config's clusters at the kubeconfigs
// bootstrap wrote (flotilla's ServiceAccount token, nothing else) and
// starts flotilla.
func (s *scenario) startWithIdentity(ctx context.Context) error {
	path := s.configPath()
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return err
	}
	f, _ := cfg["fleet"].(map[string]any)
	clusters, _ := f["clusters"].([]any)
	for _, c := range clusters {
		m, _ := c.(map[string]any)
		m["kubeconfig"] = filepath.Join(s.w.bootstrap.kubeconfigs, fmt.Sprint(m["name"])+".kubeconfig")
	}
	if b, err = yaml.Marshal(cfg); err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return err
	}
	return s.w.flotilla.start(ctx)
}

func (s *scenario) bootstrapUnchanged(ctx context.Context) error {
	out, code, err := runFlotilla(ctx, s.w.bootstrap.args("bootstrap")...)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("fleet bootstrap exited %d:\n%s", code, out)
	}
	n := 0
	for _, l := range bootstrapLines(out) {
		if len(l) != 3 || l[2] != string(bootstrap.Unchanged) {
			return fmt.Errorf("a second bootstrap changed something (%q):\n%s", strings.Join(l, " "), out)
		}
		n++
	}
	if n < 20 {
		return fmt.Errorf("a second bootstrap reported %d objects, want every one:\n%s", n, out)
	}
	return nil
}

// bootstrapIdentity runs fleet bootstrap on the package's fleet (which
// runs Flagger and Tekton already) with a copy of the scenario's config
// whose executor is Tekton in tektonCluster: flotilla's identity goes into
// a namespace of the scenario's own.
func (s *scenario) bootstrapIdentity(ctx context.Context, clusters, tektonCluster string) error {
	return s.bootstrapWith(ctx, clusters, tektonCluster)
}

// bootstrapIdentityOnly runs `flotilla fleet bootstrap` on the config as it
// is (no Tekton executor, no --allow), writing flotilla's kubeconfigs.
func (s *scenario) bootstrapIdentityOnly(ctx context.Context, clusters string) error {
	return s.bootstrapWith(ctx, clusters, "")
}

// bootstrapWith runs `flotilla fleet bootstrap`, with the Tekton
// executor's Role in tektonCluster unless it is "".
func (s *scenario) bootstrapWith(ctx context.Context, clusters, tektonCluster string) error {
	w := s.w
	b := &bootstrapRun{identity: "id-" + randomHex(4), kubeconfigs: filepath.Join(w.dir, "kubeconfigs"),
		tektonNamespace: "tk-" + randomHex(4), stepAccount: "flotilla-steps"}
	path, err := s.editedConfigOf(s.configPath(), "bootstrap.yaml", func(cfg map[string]any) error {
		if tektonCluster == "" {
			return nil
		}
		f, _ := cfg["fleet"].(map[string]any)
		f["executor"] = "tekton"
		f["tekton"] = map[string]any{"cluster": tektonCluster, "namespace": b.tektonNamespace, "serviceAccount": b.stepAccount}
		return nil
	})
	if err != nil {
		return err
	}
	b.config = path
	w.bootstrap = b
	// The namespaces bootstrap makes in the shared fleet go with the scenario.
	for _, name := range strings.Split(clusters, ",") {
		c, err := s.clientsFor(name)
		if err != nil {
			return err
		}
		// So do its cluster-scoped objects, but Flagger's CRDs, which the
		// fleet's Flaggers use.
		s.onCleanup(func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			for _, ns := range []string{b.identity, b.tektonNamespace, w.namespace, bootstrap.DefaultFlaggerNamespace} {
				_ = c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
			}
			rbac := c.Kube.RbacV1()
			for _, name := range []string{bootstrap.ReaderRole, "flagger"} {
				_ = rbac.ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
			}
			for _, name := range []string{bootstrap.ReaderRole, bootstrap.DeliverRole, "flagger"} {
				_ = rbac.ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
			}
		})
	}
	out, code, err := runFlotilla(ctx, append(b.args("bootstrap"), "--write-kubeconfigs", b.kubeconfigs)...)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("fleet bootstrap exited %d:\n%s", code, out)
	}
	if tektonCluster == "" {
		return nil
	}
	for _, want := range []string{
		tektonCluster + "\tRole " + b.tektonNamespace + "/" + bootstrap.TektonRole,
		tektonCluster + "\tPipeline " + b.tektonNamespace + "/flotilla-rollout",
		tektonCluster + "\tServiceAccount " + b.tektonNamespace + "/" + b.stepAccount,
	} {
		if !strings.Contains(out, want) {
			return fmt.Errorf("fleet bootstrap does not list %q:\n%s", want, out)
		}
	}
	return nil
}

// editedConfigOf writes a copy of the config at src changed by edit.
func (s *scenario) editedConfigOf(src, name string, edit func(cfg map[string]any) error) (string, error) {
	b, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return "", err
	}
	if err := edit(cfg); err != nil {
		return "", err
	}
	if b, err = yaml.Marshal(cfg); err != nil {
		return "", err
	}
	p := filepath.Join(s.w.dir, name)
	return p, os.WriteFile(p, b, 0o600)
}

// restartRenamed stops flotilla and starts it with the application naming
// another workload: the start-up prune removes the canary of the old one.
func (s *scenario) restartRenamed(ctx context.Context, workload string) error {
	s.w.flotilla.stop()
	path := s.configPath()
	if _, err := s.editedConfigOf(path, filepath.Base(path), func(cfg map[string]any) error {
		apps, _ := cfg["applications"].([]any)
		app, _ := apps[0].(map[string]any)
		wl, _ := app["workload"].(map[string]any)
		wl["name"] = workload
		return nil
	}); err != nil {
		return err
	}
	return s.w.flotilla.start(ctx)
}

func (s *scenario) canaryPruned(ctx context.Context, name string) error {
	for _, c := range s.w.clusters {
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := c.Flagger.FlaggerV1beta1().Canaries(s.w.namespace).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
		if err != nil {
			return fmt.Errorf("canary %s/%s in %s not pruned: %w\n%s", s.w.namespace, name, c.Name, err, tail(s.w.flotilla.logPath, 20))
		}
	}
	return nil
}

// access is one SubjectAccessReview's question and the answer wanted.
type access struct {
	verb, group, resource, namespace string
	allowed                          bool
}

func (a access) String() string {
	g := a.group
	if g == "" {
		g = "core"
	}
	return fmt.Sprintf("%s %s/%s in %q", a.verb, g, a.resource, a.namespace)
}

// reviews asks a cluster (as its admin) what a ServiceAccount may do.
func reviews(ctx context.Context, cs kubernetes.Interface, namespace, account string, as []access) error {
	user := "system:serviceaccount:" + namespace + ":" + account
	var errs []error
	for _, a := range as {
		r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:               user,
				Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: a.verb, Group: a.group, Resource: a.resource, Namespace: a.namespace},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if r.Status.Allowed != a.allowed {
			errs = append(errs, fmt.Errorf("%s may %s: %t, want %t (%s)", user, a, r.Status.Allowed, a.allowed, r.Status.Reason))
		}
	}
	return errors.Join(errs...)
}

func (s *scenario) identityBounded(ctx context.Context) error {
	ns := s.w.namespace
	as := []access{
		{"patch", "apps", "deployments", ns, true},
		{"create", "flagger.app", "canaries", ns, true},
		{"list", "flagger.app", "canaries", "", true},
		{"patch", "apps", "deployments", "kube-system", false},
		{"delete", "apps", "deployments", "default", false},
		{"get", "", "secrets", "kube-system", false},
		{"list", "", "secrets", ns, false},
		{"get", "", "secrets", s.w.bootstrap.identity, false},
		{"delete", "", "namespaces", "", false},
		{"create", "", "namespaces", "", false},
		{"create", "rbac.authorization.k8s.io", "clusterrolebindings", "", false},
		{"create", "rbac.authorization.k8s.io", "rolebindings", ns, false},
		{"escalate", "rbac.authorization.k8s.io", "clusterroles", "", false},
		{"create", "", "pods", ns, false},
	}
	for _, c := range s.w.clusters {
		if err := reviews(ctx, c.Kube, s.w.bootstrap.identity, bootstrap.ServiceAccount, as); err != nil {
			return fmt.Errorf("cluster %s: %w", c.Name, err)
		}
	}
	return nil
}

// inventoryGranted asks each cluster of the waves what flotilla's
// identity may do with ConfigMaps: what a git application's inventory
// needs in its namespace, granted without --allow, and nothing more.
func (s *scenario) inventoryGranted(ctx context.Context) error {
	ns := s.w.namespace
	as := []access{
		{"get", "", "configmaps", ns, true},
		{"create", "", "configmaps", ns, true},
		{"patch", "", "configmaps", ns, true},
		{"delete", "", "configmaps", ns, true},
		{"list", "", "configmaps", ns, false},
		{"create", "", "configmaps", "default", false},
		{"patch", "", "configmaps", "kube-system", false},
		{"get", "", "secrets", ns, false},
	}
	for _, c := range s.w.clusters {
		if err := reviews(ctx, c.Kube, s.w.bootstrap.identity, bootstrap.ServiceAccount, as); err != nil {
			return fmt.Errorf("cluster %s: %w", c.Name, err)
		}
	}
	return nil
}

func (s *scenario) tektonBounded(ctx context.Context, cluster string) error {
	b := s.w.bootstrap
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	if err := reviews(ctx, c.Kube, b.identity, bootstrap.ServiceAccount, []access{
		{"create", "tekton.dev", "pipelineruns", b.tektonNamespace, true},
		{"patch", "", "secrets", b.tektonNamespace, true},
		{"create", "tekton.dev", "pipelineruns", "default", false},
		{"get", "", "secrets", b.tektonNamespace, false},
		{"create", "", "pods", b.tektonNamespace, false},
	}); err != nil {
		return err
	}
	return reviews(ctx, c.Kube, b.tektonNamespace, b.stepAccount, []access{
		{"get", "", "secrets", b.tektonNamespace, false},
		{"create", "", "pods", b.tektonNamespace, false},
		{"create", "tekton.dev", "pipelineruns", b.tektonNamespace, false},
		{"get", "tekton.dev", "pipelineruns", b.tektonNamespace, false},
		{"patch", "apps", "deployments", s.w.namespace, false},
	})
}

func (s *scenario) tokenDenied(ctx context.Context) error {
	for _, c := range s.w.clusters {
		cfg, err := kube.RESTConfig(filepath.Join(s.w.bootstrap.kubeconfigs, c.Name+".kubeconfig"), "")
		if err != nil {
			return err
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		_, err = cs.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			return fmt.Errorf("listing Secrets in %s with flotilla's token: %w, want Forbidden", c.Name, err)
		}
		if _, err := cs.AppsV1().Deployments(s.w.namespace).List(ctx, metav1.ListOptions{}); err != nil {
			return fmt.Errorf("listing Deployments in %s with flotilla's token: %w", c.Name, err)
		}
	}
	return nil
}
