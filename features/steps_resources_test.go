package features

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/resources/v1alpha1"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
)

// Applications as resources of the management cluster (#35 item 1): a
// team applies, edits and deletes them with kubectl in its namespace of
// the fleet's cluster that stands for the management cluster; the steps
// read what follows from the clusters and from the resources' status.
func (s *scenario) registerResourcesSteps(sc *godog.ScenarioContext) {
	sc.Step(`^flotilla watches the Application resources of a team's namespace in cluster "([^"]*)"$`, s.watchResources)
	sc.Step("^`kubectl apply` of the Application \"([^\"]*)\" that tracks \"([^\"]*)\" in the team's namespace$", s.applyResource)
	sc.Step("^`kubectl apply` of the Application \"([^\"]*)\" that tracks \"([^\"]*)\" whose clusterSelector matches no cluster$", s.applyResourceNoCluster)
	sc.Step("^`kubectl apply` of the Application \"([^\"]*)\" on track \"([^\"]*)\" is refused, naming \"([^\"]*)\"$", s.applyResourceRefused)
	sc.Step("^`kubectl delete` of the Application \"([^\"]*)\"$", s.deleteResource)
	sc.Step(`^the Application "([^"]*)" is Ready$`, s.resourceReady)
	sc.Step(`^the Application "([^"]*)" is not Ready, reason "([^"]*)", its message naming "([^"]*)"$`, s.resourceNotReady)
	sc.Step(`^the status of the Application "([^"]*)" shows the rollout of "([^"]*)" "([^"]*)" and "([^"]*)" deployed$`, s.resourceShowsRollout)
	sc.Step("^`kubectl get applications.flotilla.dev` lists \"([^\"]*)\" Ready with \"([^\"]*)\" deployed$", s.kubectlListsResource)
	sc.Step(`^flotilla tracks no application "([^"]*)"$`, s.tracksNoApplication)
	sc.Step(`^flotilla rejects the push of "([^"]*)" as not tracked by any application$`, s.pushNotTracked)
	sc.Step(`^flotilla watches the Application resources of a team's namespace and the Cluster resources of a platform namespace in cluster "([^"]*)"$`, s.watchPlatform)
	sc.Step("^`kubectl apply` of a Cluster \"([^\"]*)\" labelled \"([^\"]*)\" and its kubeconfig Secret in the (platform|team's) namespace$", s.applyCluster)
	sc.Step(`^the Cluster "([^"]*)" is Ready in wave "([^"]*)"$`, s.clusterReady)
	sc.Step(`^the Cluster "([^"]*)" is not Ready, reason "([^"]*)", its message naming "([^"]*)"$`, s.clusterNotReady)
	sc.Step(`^flotilla lists no cluster "([^"]*)"$`, s.listsNoCluster)
	sc.Step("^`kubectl apply` of a WavePolicy in the platform namespace whose waves are \"first\", the clusters labelled \"([^\"]*)\", then \"second\", those labelled \"([^\"]*)\" after (\\d+) approvals?$", s.applyWavePolicy)
	sc.Step(`^the WavePolicy is Ready with the waves "([^"]*)"$`, s.wavePolicyReady)
	sc.Step(`^the team's namespace is project "([^"]*)"'s, and project "([^"]*)" lists the application "([^"]*)"$`, s.teamProjects)
	sc.Step("^`kubectl apply` of the WavePolicy with only the wave \"first\", the clusters labelled \"([^\"]*)\"$", s.editWavePolicy)
	sc.Step(`^the WavePolicy is not Ready, reason "([^"]*)", its message naming "([^"]*)"$`, s.wavePolicyNotReady)
	sc.Step("^`kubectl delete` of the Cluster \"([^\"]*)\"$", s.deleteCluster)
}

// resourcesWorld is where a scenario's Application resources live.
type resourcesWorld struct {
	cluster    string
	kubeconfig string
	namespace  string
	platform   string            // the platform's namespace, "" when none
	clusters   map[string]string // a Cluster resource's namespace, by name
	client     dynamic.Interface
}

// resourceWorlds are each scenario's, by world.
var resourceWorlds sync.Map // *world -> *resourcesWorld

func (s *scenario) resourcesWorld() (*resourcesWorld, error) {
	v, ok := resourceWorlds.Load(s.w)
	if !ok {
		return nil, errors.New("no step had flotilla watch Application resources")
	}
	return v.(*resourcesWorld), nil
}

// watchResources applies the chart's Application CRD to cluster (as
// `helm install` does), makes a team's namespace there and has the
// flotilla the scenario configures watch it (server.resources).
func (s *scenario) watchResources(ctx context.Context, cluster string) error {
	return s.watchResourcesOf(ctx, cluster, false)
}

// watchPlatform is watchResources with a platform namespace too, whose
// Cluster resources flotilla honours (server.resources.platformNamespaces),
// and the chart's Cluster CRD.
func (s *scenario) watchPlatform(ctx context.Context, cluster string) error {
	return s.watchResourcesOf(ctx, cluster, true)
}

func (s *scenario) watchResourcesOf(ctx context.Context, cluster string, platform bool) error {
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	cl, _ := s.fleet().Cluster(cluster)
	// the chart's crds/applications.yaml (deploy/chart's test)
	if err := installCRD(ctx, c.Config, v1alpha1.CRD, "applications.flotilla.dev"); err != nil {
		return err
	}
	ns, err := s.ownNamespace(ctx, c, "team")
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	rw := &resourcesWorld{cluster: cluster, kubeconfig: cl.Kubeconfig, namespace: ns, client: dyn, clusters: map[string]string{}}
	resources := map[string]any{"namespaces": []string{ns}, "kubeconfig": cl.Kubeconfig}
	if platform {
		// the chart's crds/clusters.yaml and wavepolicies.yaml
		if err := installCRD(ctx, c.Config, v1alpha1.ClusterCRD, "clusters.flotilla.dev"); err != nil {
			return err
		}
		if err := installCRD(ctx, c.Config, v1alpha1.WavePolicyCRD, "wavepolicies.flotilla.dev"); err != nil {
			return err
		}
		if rw.platform, err = s.ownNamespace(ctx, c, "platform"); err != nil {
			return err
		}
		resources["platformNamespaces"] = []string{rw.platform}
	}
	resourceWorlds.Store(s.w, rw)
	s.onCleanup(func() { resourceWorlds.Delete(s.w) })
	s.w.configEdits = append(s.w.configEdits, func(cfg map[string]any) error {
		cfg["server"].(map[string]any)["resources"] = resources
		return nil
	})
	return nil
}

// applyCluster applies, as a platform team (or a team) would, a Secret
// holding cluster's kubeconfig and a Cluster resource naming it, labelled,
// in the platform's namespace (or the team's). In the platform's, the
// scenario's last wave has the cluster from then on (its Then steps read
// it).
func (s *scenario) applyCluster(ctx context.Context, cluster, list, where string) error {
	rw, err := s.resourcesWorld()
	if err != nil {
		return err
	}
	ns := rw.namespace
	if where == "platform" {
		if ns = rw.platform; ns == "" {
			return errors.New("no platform namespace in this scenario")
		}
	}
	labels, err := parseLabels(list)
	if err != nil {
		return err
	}
	fc, ok := s.fleet().Cluster(cluster)
	if !ok {
		return fmt.Errorf("the fleet has no cluster %s", cluster)
	}
	kubeconfig, err := os.ReadFile(fc.Kubeconfig)
	if err != nil {
		return err
	}
	secret := map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": cluster + "-kubeconfig", "namespace": ns},
		"stringData": map[string]any{"value": string(kubeconfig)}}
	res := map[string]any{"apiVersion": v1alpha1.GroupVersion.String(), "kind": "Cluster",
		"metadata": map[string]any{"name": cluster, "namespace": ns},
		"spec": map[string]any{"labels": labels,
			"kubeconfig": map[string]any{"secretRef": map[string]any{"name": cluster + "-kubeconfig"}}}}
	for _, obj := range []map[string]any{secret, res} {
		doc, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		if _, err := rw.kubectl(ctx, doc, "apply", "-f", "-"); err != nil {
			return err
		}
	}
	rw.clusters[cluster] = ns
	if where != "platform" {
		return nil
	}
	target, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	w := s.w
	w.clusters = append(w.clusters, target)
	if !slices.Contains(w.waves[len(w.waves)-1], cluster) {
		w.waves[len(w.waves)-1] = append(w.waves[len(w.waves)-1], cluster)
	}
	return nil
}

// deleteCluster deletes the Cluster resource; the scenario's waves no
// longer have the cluster (its Then steps leave it out).
func (s *scenario) deleteCluster(ctx context.Context, name string) error {
	rw, err := s.resourcesWorld()
	if err != nil {
		return err
	}
	ns, known := rw.clusters[name]
	if !known {
		return fmt.Errorf("no step applied the Cluster %s", name)
	}
	if _, err := rw.kubectl(ctx, nil, "delete", "-n", ns, "clusters.flotilla.dev", name, "--wait=true"); err != nil {
		return err
	}
	w := s.w
	w.clusters = slices.DeleteFunc(w.clusters, func(c *fleettest.Clients) bool { return c.Name == name })
	for i := range w.waves {
		w.waves[i] = slices.DeleteFunc(w.waves[i], func(n string) bool { return n == name })
	}
	return nil
}

// clusterStatus waits until ok holds of the Cluster resource's status, for
// its current generation.
func (s *scenario) clusterStatus(ctx context.Context, name, what string, ok func(v1alpha1.ClusterStatus) bool) error {
	rw, err := s.resourcesWorld()
	if err != nil {
		return err
	}
	ns, known := rw.clusters[name]
	if !known {
		return fmt.Errorf("no step applied the Cluster %s", name)
	}
	deadline := time.Now().Add(time.Minute)
	var last v1alpha1.ClusterStatus
	for {
		u, err := rw.client.Resource(v1alpha1.Clusters).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading the Cluster %s/%s: %w", ns, name, err)
		}
		last = v1alpha1.ClusterStatus{}
		if b, err := yaml.Marshal(u.Object["status"]); err == nil {
			_ = yaml.Unmarshal(b, &last)
		}
		if last.ObservedGeneration == u.GetGeneration() && ok(last) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the Cluster %s/%s's status never showed %s; it is %+v (generation %d)\n%s", ns, name, what, last, u.GetGeneration(), s.w.flotilla.logs(20))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func readyOf(conds []metav1.Condition) *metav1.Condition {
	for i, c := range conds {
		if c.Type == v1alpha1.ConditionReady {
			return &conds[i]
		}
	}
	return nil
}

// clusterReady waits for the Cluster's Ready condition and its wave, then
// reads them as the platform team does: kubectl get clusters.flotilla.dev.
func (s *scenario) clusterReady(ctx context.Context, name, wave string) error {
	err := s.clusterStatus(ctx, name, "Ready=True in wave "+wave, func(st v1alpha1.ClusterStatus) bool {
		c := readyOf(st.Conditions)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonApplied && st.Wave == wave
	})
	if err != nil {
		return err
	}
	rw, _ := s.resourcesWorld()
	out, err := rw.kubectl(ctx, nil, "get", "clusters.flotilla.dev", "-n", rw.clusters[name])
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], "READY") || !strings.Contains(lines[0], "WAVE") {
		return fmt.Errorf("kubectl get clusters.flotilla.dev printed no table of Clusters:\n%s", out)
	}
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 3 && f[0] == name && f[1] == "True" && f[2] == "Applied" && f[3] == wave {
			return nil
		}
	}
	return fmt.Errorf("kubectl get clusters.flotilla.dev lists no %s Ready (Applied) in wave %s:\n%s", name, wave, out)
}

func (s *scenario) clusterNotReady(ctx context.Context, name, reason, names string) error {
	return s.clusterStatus(ctx, name, "Ready=False "+reason+" naming "+names, func(st v1alpha1.ClusterStatus) bool {
		c := readyOf(st.Conditions)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == reason && strings.Contains(c.Message, names)
	})
}

// listsNoCluster: the API lists no cluster of that name (read after the
// Cluster's status said flotilla judged it).
func (s *scenario) listsNoCluster(ctx context.Context, cluster string) error {
	var got []struct{ Name string }
	if err := s.getJSON(ctx, "/api/v1/clusters", &got); err != nil {
		return err
	}
	for _, c := range got {
		if c.Name == cluster {
			return fmt.Errorf("the API lists cluster %s: %+v", cluster, got)
		}
	}
	return nil
}

// kubectl runs kubectl on the resources' cluster.
func (rw *resourcesWorld) kubectl(ctx context.Context, stdin []byte, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, kubectl(), append([]string{"--kubeconfig", rw.kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = strings.NewReader(string(stdin))
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// resourceOf is the Application app as a team writes it: the scenario's
// application config (a canary with the scenario's gate, reporting to
// flotilla), its name the resource's, edit applied to the spec.
func (s *scenario) resourceOf(rw *resourcesWorld, app, repo string, edit func(spec map[string]any)) ([]byte, error) {
	spec := s.w.appConfig(app, repo, "MinorVersion", s.w.flotilla.listen)
	delete(spec, "name")
	if edit != nil {
		edit(spec)
	}
	return yaml.Marshal(map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": "Application",
		"metadata": map[string]any{"name": app, "namespace": rw.namespace},
		"spec":     spec,
	})
}

func (s *scenario) applyResourceWith(ctx context.Context, app, repo string, edit func(spec map[string]any)) error {
	rw, err := s.resourcesWorld()
	if err != nil {
		return err
	}
	doc, err := s.resourceOf(rw, app, repo, edit)
	if err != nil {
		return err
	}
	s.w.second = &secondApp{name: app, repo: repo} // its pushes and workload (steps_engine_test.go)
	_, err = rw.kubectl(ctx, doc, "apply", "-f", "-")
	return err
}

func (s *scenario) applyResource(ctx context.Context, app, repo string) error {
	return s.applyResourceWith(ctx, app, repo, nil)
}

func (s *scenario) applyResourceNoCluster(ctx context.Context, app, repo string) error {
	return s.applyResourceWith(ctx, app, repo, func(spec map[string]any) {
		spec["clusterSelector"] = map[string]any{"matchLabels": map[string]any{"flotilla.dev/features": "nowhere"}}
	})
}

// applyResourceRefused applies an Application the CRD's schema refuses:
// kubectl fails, naming the field, and the resource does not exist.
func (s *scenario) applyResourceRefused(ctx context.Context, app, track, names string) error {
	rw, err := s.resourcesWorld()
	if err != nil {
		return err
	}
	doc, err := s.resourceOf(rw, app, "demo/"+app, func(spec map[string]any) { spec["track"] = track })
	if err != nil {
		return err
	}
	out, err := rw.kubectl(ctx, doc, "apply", "-f", "-")
	if err == nil {
		return fmt.Errorf("kubectl apply of an Application on track %s succeeded: %s", track, out)
	}
	if !strings.Contains(out, names) {
		return fmt.Errorf("kubectl apply was refused without naming %q: %s", names, out)
	}
	_, err = rw.client.Resource(v1alpha1.Applications).Namespace(rw.namespace).Get(ctx, app, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("the refused Application %s exists (or cannot be read): %v", app, err)
	}
	return nil
}

func (s *scenario) deleteResource(ctx context.Context, app string) error {
	rw, err := s.resourcesWorld()
	if err != nil {
		return err
	}
	_, err = rw.kubectl(ctx, nil, "delete", "-n", rw.namespace, "applications.flotilla.dev", app, "--wait=true")
	return err
}

// resourceStatus waits until ok holds of the Application's status as the
// management cluster's API server has it, for its current generation.
func (s *scenario) resourceStatus(ctx context.Context, app, what string, ok func(v1alpha1.ApplicationStatus) bool) (v1alpha1.ApplicationStatus, error) {
	rw, err := s.resourcesWorld()
	if err != nil {
		return v1alpha1.ApplicationStatus{}, err
	}
	deadline := time.Now().Add(time.Minute)
	var last v1alpha1.ApplicationStatus
	for {
		u, err := rw.client.Resource(v1alpha1.Applications).Namespace(rw.namespace).Get(ctx, app, metav1.GetOptions{})
		if err != nil {
			return last, fmt.Errorf("reading the Application %s: %w", app, err)
		}
		last = statusOf(u)
		if last.ObservedGeneration == u.GetGeneration() && ok(last) {
			return last, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return last, fmt.Errorf("the Application %s's status never showed %s; it is %+v (generation %d)\n%s", app, what, last, u.GetGeneration(), s.w.flotilla.logs(20))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func statusOf(u *unstructured.Unstructured) v1alpha1.ApplicationStatus {
	var st v1alpha1.ApplicationStatus
	if b, err := yaml.Marshal(u.Object["status"]); err == nil {
		_ = yaml.Unmarshal(b, &st)
	}
	return st
}

func ready(st v1alpha1.ApplicationStatus) *metav1.Condition {
	for i, c := range st.Conditions {
		if c.Type == v1alpha1.ConditionReady {
			return &st.Conditions[i]
		}
	}
	return nil
}

func (s *scenario) resourceReady(ctx context.Context, app string) error {
	_, err := s.resourceStatus(ctx, app, "Ready=True", func(st v1alpha1.ApplicationStatus) bool {
		c := ready(st)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonApplied
	})
	return err
}

func (s *scenario) resourceNotReady(ctx context.Context, app, reason, names string) error {
	_, err := s.resourceStatus(ctx, app, "Ready=False "+reason+" naming "+names, func(st v1alpha1.ApplicationStatus) bool {
		c := ready(st)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == reason && strings.Contains(c.Message, names)
	})
	return err
}

// resourceShowsRollout waits for the status to show the rollout of
// version (flotilla's id of it) in phase, and deployed the version.
func (s *scenario) resourceShowsRollout(ctx context.Context, app, version, phase, deployed string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	_, err = s.resourceStatus(ctx, app, "the rollout "+id+" "+phase, func(st v1alpha1.ApplicationStatus) bool {
		return st.Rollout != nil && st.Rollout.ID == id && st.Rollout.Tag == version && st.Rollout.Phase == phase &&
			st.Deployed != nil && st.Deployed.Tag == deployed && st.Deployed.Digest == s.w.digests[deployed] &&
			st.LastSeen != nil && st.LastSeen.Tag == version
	})
	return err
}

// kubectlListsResource reads the printer columns as a team sees them.
func (s *scenario) kubectlListsResource(ctx context.Context, app, deployed string) error {
	rw, err := s.resourcesWorld()
	if err != nil {
		return err
	}
	out, err := rw.kubectl(ctx, nil, "get", "applications.flotilla.dev", "-n", rw.namespace)
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "READY") || !strings.Contains(lines[0], "DEPLOYED") {
		return fmt.Errorf("kubectl get applications.flotilla.dev printed no table of Applications:\n%s", out)
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) > 0 && f[0] == app && slices.Contains(f, "True") && slices.Contains(f, deployed) && slices.Contains(f, "Applied") {
			return nil
		}
	}
	return fmt.Errorf("kubectl get applications.flotilla.dev lists no %s Ready (Applied) with %s deployed:\n%s", app, deployed, out)
}

// tracksNoApplication waits until flotilla's API no longer lists app.
func (s *scenario) tracksNoApplication(ctx context.Context, app string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var apps []struct{ Name string }
		if err := s.getJSON(ctx, "/api/v1/applications", &apps); err != nil {
			return err
		}
		if !slices.ContainsFunc(apps, func(a struct{ Name string }) bool { return a.Name == app }) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("flotilla still tracks the application %s:\n%s", app, s.w.flotilla.logs(20))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// pushNotTracked waits for verify's verdict on the push of version: its
// repository is tracked by no application (so no rollout may follow).
func (s *scenario) pushNotTracked(ctx context.Context, version string) error {
	_, err := s.w.sink.waitFor(ctx, "the push of "+version+" rejected", func(e cloudevents.Event) bool {
		if e.Type() != events.TypeImageRejected {
			return false
		}
		p, err := events.Decode[events.ImageRejected](e)
		return err == nil && p.Tag == version && strings.Contains(p.Reason, "not tracked by any application")
	})
	if err != nil {
		return err
	}
	return s.noRollout(version)
}

// wavePolicyName is the name of the scenario's WavePolicy.
const wavePolicyName = "fleet"

// applyWavePolicy applies, as the platform team would, a WavePolicy of two
// waves by label, the second needing approvals.
func (s *scenario) applyWavePolicy(ctx context.Context, first, second string, approvals int) error {
	rw, err := s.resourcesWorld()
	if err != nil {
		return err
	}
	if rw.platform == "" {
		return errors.New("no platform namespace in this scenario")
	}
	wave := func(name, list string) (map[string]any, error) {
		labels, err := parseLabels(list)
		if err != nil {
			return nil, err
		}
		return map[string]any{"name": name, "selector": map[string]any{"matchLabels": labels}}, nil
	}
	w1, err := wave("first", first)
	if err != nil {
		return err
	}
	w2, err := wave("second", second)
	if err != nil {
		return err
	}
	w2["approvals"] = approvals
	doc, err := yaml.Marshal(map[string]any{"apiVersion": v1alpha1.GroupVersion.String(), "kind": "WavePolicy",
		"metadata": map[string]any{"name": wavePolicyName, "namespace": rw.platform},
		"spec":     map[string]any{"waves": []any{w1, w2}}})
	if err != nil {
		return err
	}
	_, err = rw.kubectl(ctx, doc, "apply", "-f", "-")
	return err
}

// editWavePolicy applies the scenario's WavePolicy again with one wave by
// label.
func (s *scenario) editWavePolicy(ctx context.Context, first string) error {
	rw, err := s.resourcesWorld()
	if err != nil {
		return err
	}
	labels, err := parseLabels(first)
	if err != nil {
		return err
	}
	doc, err := yaml.Marshal(map[string]any{"apiVersion": v1alpha1.GroupVersion.String(), "kind": "WavePolicy",
		"metadata": map[string]any{"name": wavePolicyName, "namespace": rw.platform},
		"spec":     map[string]any{"waves": []any{map[string]any{"name": "first", "selector": map[string]any{"matchLabels": labels}}}}})
	if err != nil {
		return err
	}
	_, err = rw.kubectl(ctx, doc, "apply", "-f", "-")
	return err
}

// wavePolicyNotReady waits for the WavePolicy's current generation to be
// judged not Ready for reason, its message naming names.
func (s *scenario) wavePolicyNotReady(ctx context.Context, reason, names string) error {
	rw, err := s.resourcesWorld()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		u, err := rw.client.Resource(v1alpha1.WavePolicies).Namespace(rw.platform).Get(ctx, wavePolicyName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading the WavePolicy: %w", err)
		}
		var st v1alpha1.WavePolicyStatus
		if b, err := yaml.Marshal(u.Object["status"]); err == nil {
			_ = yaml.Unmarshal(b, &st)
		}
		c := readyOf(st.Conditions)
		if st.ObservedGeneration == u.GetGeneration() && c != nil && c.Status == metav1.ConditionFalse && c.Reason == reason && strings.Contains(c.Message, names) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the WavePolicy's status never showed Ready=False %s naming %s; it is %+v (generation %d)\n%s", reason, names, st, u.GetGeneration(), s.w.flotilla.logs(20))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// wavePolicyReady waits for the WavePolicy's Ready condition and the waves
// in force its status names, then reads them as the platform team does:
// kubectl get wavepolicies.flotilla.dev.
func (s *scenario) wavePolicyReady(ctx context.Context, waves string) error {
	rw, err := s.resourcesWorld()
	if err != nil {
		return err
	}
	want := strings.Split(waves, ",")
	deadline := time.Now().Add(time.Minute)
	for {
		u, err := rw.client.Resource(v1alpha1.WavePolicies).Namespace(rw.platform).Get(ctx, wavePolicyName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading the WavePolicy: %w", err)
		}
		var st v1alpha1.WavePolicyStatus
		if b, err := yaml.Marshal(u.Object["status"]); err == nil {
			_ = yaml.Unmarshal(b, &st)
		}
		c := readyOf(st.Conditions)
		if st.ObservedGeneration == u.GetGeneration() && c != nil && c.Status == metav1.ConditionTrue && slices.Equal(st.Waves, want) {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the WavePolicy's status never showed Ready with the waves %v; it is %+v\n%s", want, st, s.w.flotilla.logs(20))
		}
		time.Sleep(250 * time.Millisecond)
	}
	out, err := rw.kubectl(ctx, nil, "get", "wavepolicies.flotilla.dev", "-n", rw.platform)
	if err != nil {
		return err
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if f := strings.Fields(l); len(f) > 3 && f[0] == wavePolicyName && f[1] == "True" && f[2] == "Applied" && strings.Contains(f[3], want[0]) {
			return nil
		}
	}
	return fmt.Errorf("kubectl get wavepolicies.flotilla.dev lists no %s Ready (Applied) with its waves:\n%s", wavePolicyName, out)
}

// teamProjects puts the team's namespace in project team and has project
// other (with a namespace of its own) list app by name; the steps' token
// stays admin in every project.
func (s *scenario) teamProjects(ctx context.Context, team, other, app string) error {
	rw, err := s.resourcesWorld()
	if err != nil {
		return err
	}
	admin := map[string]any{"name": "admin", "subjects": []string{"token:default"}}
	s.w.configEdits = append(s.w.configEdits, func(cfg map[string]any) error {
		cfg["projects"] = []map[string]any{
			{"name": team, "namespaces": []string{rw.namespace}, "roles": []any{admin}},
			{"name": other, "applications": []string{app}, "namespaces": []string{rw.namespace + "-" + other}, "roles": []any{admin}},
			{"name": "default", "roles": []any{admin}},
		}
		resources := cfg["server"].(map[string]any)["resources"].(map[string]any)
		resources["namespaces"] = []string{rw.namespace, rw.namespace + "-" + other}
		return nil
	})
	return nil
}
