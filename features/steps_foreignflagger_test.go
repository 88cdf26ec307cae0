package features

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cucumber/godog"
	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-cd/flotilla/pkg/bootstrap"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/kube"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
)

// foreignFlagger is a Flagger a step installed as Helm would: its
// Deployment as it was created, and Flagger's CRDs.
type foreignFlagger struct {
	cluster, version, release string
	deployment                *appsv1.Deployment
	crds                      []string
}

// helmManager is the field manager Helm 3 creates objects with.
const helmManager = "helm"

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func (s *scenario) registerForeignFlaggerSteps(sc *godog.ScenarioContext) {
	sc.Step(`^Flagger "([^"]*)" installed by Helm as release "([^"]*)" runs in namespace "([^"]*)" of cluster "([^"]*)"$`, s.helmInstalledFlagger)
	sc.Step(`^it left the Flagger Helm installed in cluster "([^"]*)" as it was and applied none of Flagger's own objects there$`, s.foreignFlaggerLeftAlone)
	sc.Step("^`flotilla fleet check` reports the Flagger of cluster \"([^\"]*)\" newer than the tested one, not outdated$", s.checkForeignNewer)
	sc.Step("^`flotilla fleet bootstrap --manage-flagger` runs$", s.bootstrapManageFlagger)
	sc.Step(`^it applied flotilla's Flagger and Flagger's CRDs in cluster "([^"]*)" as bootstrap renders them, and left the Deployment of Helm's as it was$`, s.flaggerManaged)
	sc.Step("^`flotilla fleet check --manage-flagger` reports flotilla's Flagger ok and clusters \"([^\"]*)\" ready$", s.checkManagedReady)
	sc.Step(`^it replaced the Flagger Helm installed in cluster "([^"]*)" by flotilla's, as bootstrap renders it$`, s.flaggerReplaced)
}

// helmInstalledFlagger creates, as `helm install` of Flagger's chart
// would (field manager helm, Helm's labels and annotations), Flagger's
// CRDs (bootstrap's embedded ones, which Helm's chart ships too) and a
// Flagger Deployment at version in namespace. Nothing runs Flagger's
// process: bootstrap and check only read the Deployment.
func (s *scenario) helmInstalledFlagger(ctx context.Context, version, release, namespace, cluster string) error {
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	ts, err := bootstrap.Plan(&config.Config{Fleet: config.Fleet{Clusters: []config.Cluster{{Name: cluster}}}}, nil, bootstrap.Options{})
	if err != nil {
		return err
	}
	f := &foreignFlagger{cluster: cluster, version: version, release: release}
	created := metav1.CreateOptions{FieldManager: helmManager}
	for _, o := range ts[0].Objects {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		if _, err := c.Dynamic.Resource(crdResource).Create(ctx, o, created); err != nil {
			return fmt.Errorf("creating CRD %s in %s: %w", o.GetName(), cluster, err)
		}
		f.crds = append(f.crds, o.GetName())
	}
	crdCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := kube.WaitCRDsEstablished(crdCtx, c.Config, f.crds...); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, created); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s in %s: %w", namespace, cluster, err)
	}
	selector := map[string]string{"app.kubernetes.io/name": "flagger", "app.kubernetes.io/instance": release}
	labels := maps.Clone(selector)
	labels["app.kubernetes.io/managed-by"] = "Helm"
	labels["helm.sh/chart"] = "flagger-" + version
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: release, Namespace: namespace, Labels: labels,
			Annotations: map[string]string{"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": namespace},
		},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: selector},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "flagger", Image: "ghcr.io/fluxcd/flagger:" + version,
					Args: []string{"-log-level=info", "-mesh-provider=kubernetes", "-metrics-server=http://prometheus:9090"},
				}}},
			},
		},
	}
	if f.deployment, err = c.Kube.AppsV1().Deployments(namespace).Create(ctx, d, created); err != nil {
		return fmt.Errorf("creating Helm's Flagger in %s: %w", cluster, err)
	}
	s.w.foreignFlagger = f
	return nil
}

// foreignFlaggerLeftAlone reads the cluster: Helm's Deployment has the
// same spec (generation), image and labels and no field of bootstrap's;
// neither have Flagger's CRDs; bootstrap's own Flagger is not there; and
// bootstrap said what it found and still gave flotilla its identity there.
// It catches a bootstrap that applies its Flagger over Helm's, or next to
// it, or Flagger's CRDs over Helm's.
func (s *scenario) foreignFlaggerLeftAlone(ctx context.Context, cluster string) error {
	f, c, err := s.foreignIn(cluster)
	if err != nil {
		return err
	}
	was := f.deployment
	d, err := c.Kube.AppsV1().Deployments(was.Namespace).Get(ctx, was.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading Helm's Flagger in %s: %w", cluster, err)
	}
	var errs []error
	if got, want := d.Spec.Template.Spec.Containers[0].Image, was.Spec.Template.Spec.Containers[0].Image; got != want {
		errs = append(errs, fmt.Errorf("image %s, want %s", got, want))
	}
	if diff := cmp.Diff(was.Labels, d.Labels); diff != "" {
		errs = append(errs, fmt.Errorf("labels changed (-before +after)\n%s", diff))
	}
	if d.Generation != was.Generation {
		errs = append(errs, fmt.Errorf("generation %d, was %d: its spec changed", d.Generation, was.Generation))
	}
	if m := bootstrapManaged(d.ManagedFields); m != "" {
		errs = append(errs, fmt.Errorf("Helm's Flagger has fields of %s", m))
	}
	for _, name := range f.crds {
		crd, err := c.Dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading CRD %s in %s: %w", name, cluster, err)
		}
		if m := bootstrapManaged(crd.GetManagedFields()); m != "" {
			errs = append(errs, fmt.Errorf("CRD %s has fields of %s", name, m))
		}
	}
	if _, err := c.Kube.AppsV1().Deployments(bootstrap.DefaultFlaggerNamespace).Get(ctx, "flagger", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("bootstrap's Flagger %s/flagger next to Helm's: %w, want NotFound", bootstrap.DefaultFlaggerNamespace, err))
	}
	if _, err := c.Kube.RbacV1().ClusterRoles().Get(ctx, "flagger", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("bootstrap's ClusterRole flagger: %w, want NotFound", err))
	}
	out := s.w.lastOutput
	for _, want := range []string{
		fmt.Sprintf("%s\tFlagger %s installed by Helm (release %s in %s, Deployment %s/%s) found: left alone (--manage-flagger to apply flotilla's %s over it)",
			cluster, f.version, f.release, was.Namespace, was.Namespace, was.Name, bootstrap.FlaggerVersion),
		cluster + "\tServiceAccount " + s.w.bootstrap.identity + "/" + bootstrap.ServiceAccount + "\tcreated",
	} {
		if !strings.Contains(out, want) {
			errs = append(errs, fmt.Errorf("fleet bootstrap does not say %q", want))
		}
	}
	for _, l := range bootstrapLines(out) {
		if len(l) == 3 && l[0] == cluster && slices.Contains(flaggerOwnRefs(f), l[1]) {
			errs = append(errs, fmt.Errorf("fleet bootstrap applied %s to %s", l[1], cluster))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster %s: %w\n%s", cluster, err, out)
	}
	return nil
}

// flaggerOwnRefs are Flagger's own objects, which bootstrap must not
// apply where Helm's Flagger runs, as its output names them.
func flaggerOwnRefs(f *foreignFlagger) []string {
	out := []string{"Namespace " + bootstrap.DefaultFlaggerNamespace, "ServiceAccount " + bootstrap.DefaultFlaggerNamespace + "/flagger",
		"ClusterRole flagger", "ClusterRoleBinding flagger", "Deployment " + bootstrap.DefaultFlaggerNamespace + "/flagger"}
	for _, crd := range f.crds {
		out = append(out, "CustomResourceDefinition "+crd)
	}
	return out
}

// bootstrapManaged names bootstrap's field manager when it owns fields.
func bootstrapManaged(ms []metav1.ManagedFieldsEntry) string {
	for _, m := range ms {
		if m.Manager == bootstrap.FieldManager {
			return m.Manager
		}
	}
	return ""
}

// checkForeignNewer runs fleet check until it reports Helm's Flagger ok
// and newer than the tested version (kwok makes its pod Ready a moment
// after bootstrap; until then it is not ready, never outdated). It catches
// a check that compares Helm's Deployment with bootstrap's rendering.
func (s *scenario) checkForeignNewer(ctx context.Context, cluster string) error {
	f := s.w.foreignFlagger
	if f == nil || f.cluster != cluster {
		return fmt.Errorf("no Flagger installed by Helm in %s", cluster)
	}
	want := fmt.Sprintf("%s\tDeployment %s/%s\tok: Flagger %s (installed by Helm), newer than the tested %s",
		cluster, f.deployment.Namespace, f.deployment.Name, f.version, bootstrap.FlaggerVersion)
	var out string
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		if out, _, err = runFlotilla(ctx, s.w.bootstrap.args("check")...); err != nil {
			return false, err
		}
		for _, l := range bootstrapLines(out) {
			if len(l) == 3 && l[0] == cluster && strings.HasPrefix(l[2], string(bootstrap.Outdated)) {
				return false, fmt.Errorf("fleet check reports %s %s", l[1], l[2])
			}
		}
		return strings.Contains(out, want), nil
	})
	if err != nil {
		return fmt.Errorf("fleet check does not say %q: %w\n%s", want, err, out)
	}
	return nil
}

// bootstrapManageFlagger runs fleet bootstrap --manage-flagger, which
// applies flotilla's Flagger even where another runs.
func (s *scenario) bootstrapManageFlagger(ctx context.Context) error {
	b := s.w.bootstrap
	out, code, err := runFlotilla(ctx, append(b.args("bootstrap"), "--manage-flagger", "--write-kubeconfigs", b.kubeconfigs)...)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("fleet bootstrap --manage-flagger exited %d:\n%s", code, out)
	}
	s.w.lastOutput = out
	return nil
}

// renderedFlagger is bootstrap's Flagger Deployment for cluster as
// `fleet bootstrap --output yaml` with the scenario's flags renders it.
func (s *scenario) renderedFlagger(ctx context.Context, cluster string) (*appsv1.Deployment, error) {
	out, code, err := runFlotilla(ctx, append(s.w.bootstrap.args("bootstrap"), "--manage-flagger", "--output", "yaml")...)
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, fmt.Errorf("fleet bootstrap --output yaml exited %d:\n%s", code, out)
	}
	// Each document is headed by its cluster.
	for _, doc := range strings.Split("\n"+out, "\n---\n") {
		head, body, _ := strings.Cut(doc, "\n")
		if head != "# cluster: "+cluster {
			continue
		}
		objs, err := kube.Decode([]byte(body))
		if err != nil || len(objs) != 1 {
			return nil, fmt.Errorf("reading fleet bootstrap --output yaml: %d objects, %w\n%s", len(objs), err, doc)
		}
		if o := objs[0]; o.GetKind() == "Deployment" && o.GetNamespace() == bootstrap.DefaultFlaggerNamespace && o.GetName() == "flagger" {
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
				return nil, fmt.Errorf("reading bootstrap's Flagger: %w", err)
			}
			return &d, nil
		}
	}
	return nil, fmt.Errorf("fleet bootstrap --output yaml renders no Deployment %s/flagger:\n%s", bootstrap.DefaultFlaggerNamespace, out)
}

// flaggerManaged reads the cluster: bootstrap's Flagger Deployment is
// there, its fields applied by bootstrap's field manager, its containers'
// images and arguments as bootstrap renders them; Flagger's CRDs Helm
// created have fields of bootstrap's now; Helm's Deployment, in another
// namespace, is as Helm created it; and bootstrap said nothing of leaving a
// Flagger alone. It catches a --manage-flagger that still leaves Flagger's
// objects out where another Flagger runs, or applies them otherwise than
// bootstrap renders them (another namespace, another image or arguments).
func (s *scenario) flaggerManaged(ctx context.Context, cluster string) error {
	f, c, err := s.foreignIn(cluster)
	if err != nil {
		return err
	}
	want, err := s.renderedFlagger(ctx, cluster)
	if err != nil {
		return err
	}
	d, err := c.Kube.AppsV1().Deployments(want.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading bootstrap's Flagger %s/%s in %s: %w", want.Namespace, want.Name, cluster, err)
	}
	var errs []error
	if !appliedBy(d.ManagedFields, bootstrap.FieldManager) {
		errs = append(errs, fmt.Errorf("Deployment %s/%s has no fields applied by %s: %v", d.Namespace, d.Name, bootstrap.FieldManager, managers(d.ManagedFields)))
	}
	type container struct {
		Name, Image string
		Args        []string
	}
	containers := func(d *appsv1.Deployment) []container {
		var out []container
		for _, c := range d.Spec.Template.Spec.Containers {
			out = append(out, container{c.Name, c.Image, c.Args})
		}
		return out
	}
	if diff := cmp.Diff(containers(want), containers(d)); diff != "" {
		errs = append(errs, fmt.Errorf("Flagger's containers are not bootstrap's rendering (-rendered +cluster)\n%s", diff))
	}
	for _, name := range f.crds {
		crd, err := c.Dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading CRD %s in %s: %w", name, cluster, err)
		}
		if !appliedBy(crd.GetManagedFields(), bootstrap.FieldManager) {
			errs = append(errs, fmt.Errorf("CRD %s has no fields applied by %s: %v", name, bootstrap.FieldManager, managers(crd.GetManagedFields())))
		}
	}
	helm, err := c.Kube.AppsV1().Deployments(f.deployment.Namespace).Get(ctx, f.deployment.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading Helm's Flagger in %s: %w", cluster, err)
	}
	if helm.Generation != f.deployment.Generation || bootstrapManaged(helm.ManagedFields) != "" {
		errs = append(errs, fmt.Errorf("Helm's Flagger changed: generation %d (was %d), managers %v", helm.Generation, f.deployment.Generation, managers(helm.ManagedFields)))
	}
	out := s.w.lastOutput
	if strings.Contains(out, "left alone") {
		errs = append(errs, errors.New("fleet bootstrap --manage-flagger left a Flagger alone"))
	}
	if line := cluster + "\tDeployment " + want.Namespace + "/" + want.Name + "\tcreated"; !strings.Contains(out, line) {
		errs = append(errs, fmt.Errorf("fleet bootstrap does not say %q", line))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster %s: %w\n%s", cluster, err, out)
	}
	return nil
}

// flaggerReplaced reads the cluster: the Deployment where Helm's Flagger
// stood (bootstrap's own place) is a new object (another UID), applied by
// bootstrap's field manager and by no one else, its selector, strategy and
// containers bootstrap's rendering; and bootstrap said it replaced it. It
// catches a --manage-flagger that fails on Helm's immutable selector or
// strategy there, or leaves Helm's fields in the object.
func (s *scenario) flaggerReplaced(ctx context.Context, cluster string) error {
	f, c, err := s.foreignIn(cluster)
	if err != nil {
		return err
	}
	want, err := s.renderedFlagger(ctx, cluster)
	if err != nil {
		return err
	}
	if want.Namespace != f.deployment.Namespace || want.Name != f.deployment.Name {
		return fmt.Errorf("Helm's Flagger %s/%s is not where bootstrap's goes (%s/%s)", f.deployment.Namespace, f.deployment.Name, want.Namespace, want.Name)
	}
	d, err := c.Kube.AppsV1().Deployments(want.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading Deployment %s/%s in %s: %w", want.Namespace, want.Name, cluster, err)
	}
	var errs []error
	if d.UID == f.deployment.UID {
		errs = append(errs, fmt.Errorf("Deployment %s/%s is still Helm's object (UID %s)", d.Namespace, d.Name, d.UID))
	}
	if ms := managers(d.ManagedFields); !appliedBy(d.ManagedFields, bootstrap.FieldManager) || slices.ContainsFunc(d.ManagedFields, func(m metav1.ManagedFieldsEntry) bool { return m.Manager == helmManager }) {
		errs = append(errs, fmt.Errorf("Deployment %s/%s managed by %v; want %s's alone", d.Namespace, d.Name, ms, bootstrap.FieldManager))
	}
	if diff := cmp.Diff(want.Spec.Selector, d.Spec.Selector); diff != "" {
		errs = append(errs, fmt.Errorf("selector is not bootstrap's (-rendered +cluster)\n%s", diff))
	}
	if d.Spec.Strategy.Type != want.Spec.Strategy.Type || (want.Spec.Strategy.RollingUpdate == nil) != (d.Spec.Strategy.RollingUpdate == nil) {
		errs = append(errs, fmt.Errorf("strategy %+v, want bootstrap's %+v", d.Spec.Strategy, want.Spec.Strategy))
	}
	if diff := cmp.Diff(want.Spec.Template.Spec.Containers[0].Args, d.Spec.Template.Spec.Containers[0].Args); diff != "" || want.Spec.Template.Spec.Containers[0].Image != d.Spec.Template.Spec.Containers[0].Image {
		errs = append(errs, fmt.Errorf("Flagger's container is not bootstrap's rendering: image %s, args (-rendered +cluster)\n%s", d.Spec.Template.Spec.Containers[0].Image, diff))
	}
	out := s.w.lastOutput
	if line := cluster + "\tDeployment " + want.Namespace + "/" + want.Name + "\treplaced"; !strings.Contains(out, line) {
		errs = append(errs, fmt.Errorf("fleet bootstrap does not say %q", line))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster %s: %w\n%s", cluster, err, out)
	}
	return nil
}

// foreignIn is the Flagger a step installed as Helm would in cluster, and
// the cluster's clients.
func (s *scenario) foreignIn(cluster string) (*foreignFlagger, *fleettest.Clients, error) {
	f := s.w.foreignFlagger
	if f == nil || f.cluster != cluster {
		return nil, nil, fmt.Errorf("no Flagger installed by Helm in %s", cluster)
	}
	c, err := s.clientsFor(cluster)
	return f, c, err
}

// appliedBy tells whether manager applied fields (server-side apply).
func appliedBy(ms []metav1.ManagedFieldsEntry, manager string) bool {
	return slices.ContainsFunc(ms, func(m metav1.ManagedFieldsEntry) bool {
		return m.Manager == manager && m.Operation == metav1.ManagedFieldsOperationApply
	})
}

// managers names the field managers of an object, for messages.
func managers(ms []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Manager+" ("+string(m.Operation)+")")
	}
	return out
}

// checkManagedReady runs fleet check --manage-flagger until it exits 0
// (kwok makes the pod of bootstrap's Flagger Ready a moment after
// bootstrap), then reads that it reported every cluster ready: it compared
// flotilla's Flagger with bootstrap's rendering and found it current and
// available. It catches a check --manage-flagger that still judges Helm's
// Flagger instead, or calls the Flagger bootstrap applied outdated.
func (s *scenario) checkManagedReady(ctx context.Context, clusters string) error {
	var out string
	var code int
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		out, code, err = runFlotilla(ctx, append(s.w.bootstrap.args("check"), "--manage-flagger")...)
		return code == 0, err
	})
	if err != nil {
		return fmt.Errorf("fleet check --manage-flagger exited %d: %w:\n%s", code, err, out)
	}
	for _, c := range strings.Split(clusters, ",") {
		if !strings.Contains(out, c+"\tready (") {
			return fmt.Errorf("fleet check --manage-flagger does not report %s ready:\n%s", c, out)
		}
	}
	if strings.Contains(out, "installed by Helm") {
		return fmt.Errorf("fleet check --manage-flagger judged Helm's Flagger:\n%s", out)
	}
	return nil
}
