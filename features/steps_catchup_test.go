package features

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
)

// reconcileWorld is what the catch-up and drift steps set and found.
type reconcileWorld struct {
	// interval is fleet.reconcile.interval, driftPolicy the application's.
	interval, driftPolicy string
	// rolloutID is the catch-up's or revert's rollout a step found.
	rolloutID string
	// changed is when a step changed a primary by hand; member, of a
	// release set, the member whose primary it changed.
	changed time.Time
	member  string
}

func (w *world) reconcileConfig() map[string]any {
	interval := "0s"
	if w.reconcile != nil {
		interval = cmp.Or(w.reconcile.interval, interval)
	}
	return map[string]any{"interval": interval}
}

func (w *world) reconcileState() *reconcileWorld {
	if w.reconcile == nil {
		w.reconcile = &reconcileWorld{}
	}
	return w.reconcile
}

func (s *scenario) registerCatchUpSteps(sc *godog.ScenarioContext) {
	sc.Step(`^flotilla checks the clusters against the validated digest every "([^"]*)"$`, s.reconcileEvery)
	sc.Step(`^the application's drift policy is "([^"]*)"$`, s.driftPolicy)
	sc.Step(`^the workload "([^"]*)" runs its old version in cluster "([^"]*)"$`, s.workloadOldIn)
	sc.Step(`^flotilla is restarted with cluster "([^"]*)" added to the last wave$`, s.restartWithCluster)
	sc.Step(`^a rollout of kind "([^"]*)" of "([^"]*)" to "([^"]*)" succeeds$`, s.kindRolloutSucceeds)
	sc.Step(`^the primary in cluster "([^"]*)" runs version "([^"]*)" by digest$`, s.primaryInRuns)
	sc.Step("^`flotilla describe rollout` of that rollout says kind \"([^\"]*)\"$", s.describeSaysKind)
	sc.Step(`^the API says that rollout is of kind "([^"]*)" and goes to "([^"]*)" only$`, s.apiSaysKind)
	sc.Step(`^after flotilla is restarted again and checks (\d+) more times, exactly (\d+) rollouts? of kind "([^"]*)" (?:was|were) started$`, s.restartedNoSecond)
	sc.Step(`^the primary of "([^"]*)" in cluster "([^"]*)" is set by hand to its old version$`, s.primarySetByHand)
	sc.Step(`^the canary of "([^"]*)" in cluster "([^"]*)" is deleted with its primary$`, s.canaryDeleted)
	sc.Step(`^flotilla journals the drift of cluster "([^"]*)" to its old version$`, s.driftJournaled)
	sc.Step(`^flotilla journals the drift of cluster "([^"]*)" to its old version within (\d+) seconds$`, s.driftJournaledWithin)
	sc.Step(`^flotilla's metric says (\d+) clusters? of "([^"]*)" drifted$`, s.driftMetric)
	sc.Step(`^the API's application "([^"]*)" names cluster "([^"]*)" drifted, running its old version$`, s.apiNamesDrift)
	sc.Step(`^in (\d+) seconds no rollout of kind "([^"]*)" was started$`, s.noKindRolloutWithin)
	sc.Step(`^the API's application "([^"]*)" names no drifted cluster within (\d+) seconds$`, s.apiNamesNoDrift)
	sc.Step(`^the primary in cluster "([^"]*)" still runs its old version$`, s.primaryStillOld)
	sc.Step(`^the application's namespace exists in cluster "([^"]*)"$`, s.namespaceIn)
	sc.Step(`^a rollout of kind "([^"]*)" of (that|the first) commit to "([^"]*)" succeeds$`, s.kindCommitRolloutSucceeds)
	sc.Step(`^the primary of "([^"]*)" in cluster "([^"]*)" is set by hand to image "([^"]*)"$`, s.primarySetByHandTo)
	sc.Step(`^flotilla journals the drift of cluster "([^"]*)" to image "([^"]*)" from (that|the first) commit within (\d+) seconds$`, s.gitDriftJournaledWithin)
	sc.Step(`^the API's application "([^"]*)" names cluster "([^"]*)" drifted, running image "([^"]*)"$`, s.apiNamesDriftTo)
	sc.Step(`^the primary in cluster "([^"]*)" (?:still )?runs image "([^"]*)"$`, s.primaryRunsImage)
}

func (s *scenario) reconcileEvery(interval string) error {
	if s.w == nil {
		return fmt.Errorf("no scenario world: a registry first")
	}
	s.w.reconcileState().interval = interval
	return nil
}

func (s *scenario) driftPolicy(policy string) error {
	s.w.reconcileState().driftPolicy = policy
	return nil
}

// oldImage is what the scenario's workloads run before flotilla touches
// them (workloadEverywhere's), by tag.
func (s *scenario) oldImage() string { return s.w.regHost + "/" + s.w.repo + ":0.1.0" }

// workloadOldIn creates the scenario's namespace and workload in a cluster
// that is not in the waves yet, running the old version (no canary, no
// primary: flotilla never delivered there).
func (s *scenario) workloadOldIn(ctx context.Context, name, cluster string) error {
	w := s.w
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.namespace}}
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace in %s: %w", cluster, err)
	}
	s.onCleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = c.Kube.CoreV1().Namespaces().Delete(ctx, w.namespace, metav1.DeleteOptions{})
	})
	image := s.oldImage()
	if w.second != nil && name == w.second.name {
		image = w.regHost + "/" + w.second.repo + ":0.1.0"
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
					Name: name, Image: image,
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 9898}},
				}}},
			},
		},
	}
	if _, err := c.Kube.AppsV1().Deployments(w.namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating deployment in %s: %w", cluster, err)
	}
	return nil
}

// restartWithCluster stops flotilla, adds cluster to its config's fleet
// and last wave, and starts it again: a cluster new in the config at
// start-up.
func (s *scenario) restartWithCluster(ctx context.Context, cluster string) error {
	w := s.w
	cl, ok := s.fleet().Cluster(cluster)
	if !ok {
		return fmt.Errorf("the fleet has no cluster %s", cluster)
	}
	w.flotilla.stop()
	b, err := os.ReadFile(w.flotilla.config)
	if err != nil {
		return err
	}
	cfg := map[string]any{}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return err
	}
	fl := cfg["fleet"].(map[string]any)
	fl["clusters"] = append(fl["clusters"].([]any), map[string]any{"name": cluster, "kubeconfig": cl.Kubeconfig})
	waves := fl["waves"].([]any)
	last := waves[len(waves)-1].(map[string]any)
	last["clusters"] = append(last["clusters"].([]any), cluster)
	if b, err = yaml.Marshal(cfg); err != nil {
		return err
	}
	if err := os.WriteFile(w.flotilla.config, b, 0o600); err != nil {
		return err
	}
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	w.clusters = append(w.clusters, c)
	w.waves[len(w.waves)-1] = append(w.waves[len(w.waves)-1], cluster)
	return w.flotilla.start(ctx)
}

// kindStarted is the rollout.started of a rollout of kind of version to
// exactly clusters, once the sink has it.
func (s *scenario) kindStarted(ctx context.Context, kind, version, clusters string) (events.RolloutStarted, error) {
	want := strings.Split(clusters, ",")
	slices.Sort(want)
	e, err := s.w.sink.waitFor(ctx, "a rollout of kind "+kind+" of "+version+" to "+clusters, func(e cloudevents.Event) bool {
		if e.Type() != events.TypeRolloutStarted {
			return false
		}
		p, err := events.Decode[events.RolloutStarted](e)
		return err == nil && p.Kind == kind && p.Tag == version && slices.Equal(want, slices.Sorted(slices.Values(slices.Concat(p.Waves...))))
	})
	if err != nil {
		return events.RolloutStarted{}, err
	}
	return events.Decode[events.RolloutStarted](e)
}

func (s *scenario) kindRolloutSucceeds(ctx context.Context, kind, version, clusters string) error {
	p, err := s.kindStarted(ctx, kind, version, clusters)
	if err != nil {
		return err
	}
	s.w.reconcileState().rolloutID = p.RolloutID
	want, ok := s.w.digests[version]
	if !ok && (s.w.imageSet != nil || s.w.set != nil && s.w.set.imageFrontend) {
		// A set's version tuple: the digest its rollout that succeeded carried.
		if want, err = s.setVersionDigest(version, p.RolloutID); err != nil {
			return err
		}
	}
	if p.Digest != want {
		return fmt.Errorf("the %s rollout %s carries %s, want %s's validated digest %s", kind, p.RolloutID, p.Digest, version, want)
	}
	ends := map[string]bool{events.TypeRolloutSucceeded: true, events.TypeRolloutRolledBack: true}
	e, err := s.w.sink.waitFor(ctx, "end of rollout "+p.RolloutID, func(e cloudevents.Event) bool {
		return ends[e.Type()] && events.RolloutID(e) == p.RolloutID
	})
	if err != nil {
		return err
	}
	if e.Type() != events.TypeRolloutSucceeded {
		return fmt.Errorf("the %s rollout %s ended %s: %s", kind, p.RolloutID, e.Type(), e.Data())
	}
	fmt.Printf("%s rollout %s of %s to %s succeeded %v after it started\n", kind, p.RolloutID, version, clusters,
		e.Time().Sub(s.startedAt(p.RolloutID)).Round(time.Millisecond))
	return nil
}

// startedAt is when the sink's rollout.started of rollout id was made.
func (s *scenario) startedAt(id string) time.Time {
	for _, e := range s.w.sink.all() {
		if e.Type() == events.TypeRolloutStarted && events.RolloutID(e) == id {
			return e.Time()
		}
	}
	return time.Time{}
}

func (s *scenario) primaryInRuns(ctx context.Context, cluster, version string) error {
	want, err := s.ref(version)
	if err != nil {
		return err
	}
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	got, err := s.imageOf(ctx, c, s.w.workload+"-primary")
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("primary in %s runs %s, want %s (version %s)", cluster, got, want, version)
	}
	return nil
}

func (s *scenario) describeSaysKind(ctx context.Context, kind string) error {
	id := s.w.reconcileState().rolloutID
	out, err := s.flotillaCLI(ctx, "describe", "rollout", id)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == "Kind" {
			if got := strings.TrimSpace(v); got != kind {
				return fmt.Errorf("flotilla describe rollout %s says kind %q, want %q", id, got, kind)
			}
			return nil
		}
	}
	return fmt.Errorf("flotilla describe rollout %s names no kind:\n%s", id, out)
}

func (s *scenario) apiSaysKind(ctx context.Context, kind, clusters string) error {
	id := s.w.reconcileState().rolloutID
	var ro struct {
		Kind, Phase string
		Waves       []struct {
			Clusters []struct{ Name, Phase string }
		}
	}
	if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
		return err
	}
	var got []string
	for _, w := range ro.Waves {
		for _, c := range w.Clusters {
			got = append(got, c.Name)
		}
	}
	slices.Sort(got)
	want := strings.Split(clusters, ",")
	slices.Sort(want)
	if ro.Kind != kind || !slices.Equal(got, want) {
		return fmt.Errorf("the API has rollout %s of kind %q to %v, want kind %q to %v", id, ro.Kind, got, kind, want)
	}
	return nil
}

// kindRollouts are the ids of the rollouts of kind the sink saw start.
func (s *scenario) kindRollouts(kind string) []string {
	var ids []string
	for _, e := range s.w.sink.all() {
		if e.Type() != events.TypeRolloutStarted {
			continue
		}
		if p, err := events.Decode[events.RolloutStarted](e); err == nil && p.Kind == kind && !slices.Contains(ids, p.RolloutID) {
			ids = append(ids, p.RolloutID)
		}
	}
	return ids
}

// restartedNoSecond restarts flotilla (a catch-up found again at start-up
// must not start twice), waits for n checks of the clusters, and counts
// the rollouts of kind, in the sink and in the API.
func (s *scenario) restartedNoSecond(ctx context.Context, n, want int, kind string) error {
	s.w.flotilla.stop()
	if err := s.w.flotilla.start(ctx); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		checks, err := s.reconcileMetric(ctx, "flotilla_reconcile_checks_total{")
		if err != nil {
			return err
		}
		if checks >= float64(n) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after a minute flotilla checked the clusters %v times, want %d", checks, n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	if ids := s.kindRollouts(kind); len(ids) != want {
		return fmt.Errorf("%d rollouts of kind %s started (%v), want %d", len(ids), kind, ids, want)
	}
	var ros []struct{ ID, Kind string }
	if err := s.getJSON(ctx, "/api/v1/rollouts", &ros); err != nil {
		return err
	}
	count := 0
	for _, r := range ros {
		if r.Kind == kind {
			count++
		}
	}
	if count != want {
		return fmt.Errorf("the API lists %d rollouts of kind %s, want %d", count, kind, want)
	}
	return nil
}

// reconcileMetric sums the series of flotilla's metrics whose line starts
// with prefix, over the replicas in scale-out mode (each checks the
// applications of the partitions it holds).
func (s *scenario) reconcileMetric(ctx context.Context, prefix string) (float64, error) {
	sum := 0.0
	for _, p := range s.processes() {
		v, err := processMetric(ctx, p, prefix)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// processes are the flotilla processes of the scenario: its replicas in
// scale-out mode, else the one.
func (s *scenario) processes() []*flotillaProcess {
	if procs := s.w.flotilla.replicas; len(procs) > 0 {
		return procs
	}
	return []*flotillaProcess{s.w.flotilla}
}

// processMetric sums the series of p's /metrics that start with prefix.
func processMetric(ctx context.Context, p *flotillaProcess, prefix string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url()+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		series, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(series, prefix) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(value, &v); err == nil {
			sum += v
		}
	}
	return sum, sc.Err()
}

// primarySetByHand changes the image of the workload's primary, which
// Flagger manages, as someone with kubectl would.
func (s *scenario) primarySetByHand(ctx context.Context, name, cluster string) error {
	return s.primarySetByHandTo(ctx, name, cluster, s.oldImage())
}

// primarySetByHandTo sets the image of the primary's first container to
// image, as someone with kubectl would.
func (s *scenario) primarySetByHandTo(ctx context.Context, name, cluster, image string) error {
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := c.Kube.AppsV1().Deployments(s.w.namespace).Get(ctx, name+"-primary", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Template.Spec.Containers[0].Image = image
		_, err = c.Kube.AppsV1().Deployments(s.w.namespace).Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
	s.w.reconcileState().changed = time.Now()
	if s.w.set != nil || s.w.imageSet != nil {
		s.w.reconcileState().member = name
	}
	return err
}

// canaryDeleted deletes the workload's Flagger canary and waits until its
// primary, which the canary owns, is gone too: the cluster is empty of
// what flotilla delivered, its workload left as it was.
func (s *scenario) canaryDeleted(ctx context.Context, name, cluster string) error {
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	fg := metav1.DeletePropagationForeground
	if err := c.Flagger.FlaggerV1beta1().Canaries(s.w.namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		return fmt.Errorf("deleting canary %s in %s: %w", name, cluster, err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := c.Kube.AppsV1().Deployments(s.w.namespace).Get(ctx, name+"-primary", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("reading the primary %s-primary in %s a minute after its canary was deleted: %w", name, cluster, err)
			}
			return fmt.Errorf("the primary %s-primary in %s is still there a minute after its canary was deleted", name, cluster)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *scenario) driftJournaled(ctx context.Context, cluster string) error {
	return s.driftJournaledOf(ctx, cluster, s.oldImage(), s.w.digests["1.0.0"])
}

// driftJournaledOf waits for the drift.detected of cluster's primary
// running image, held against the validated digest (a git application's
// commit).
func (s *scenario) driftJournaledOf(ctx context.Context, cluster, image, digest string) error {
	e, err := s.w.sink.waitFor(ctx, "the drift of "+cluster, func(e cloudevents.Event) bool {
		if e.Type() != events.TypeDriftDetected {
			return false
		}
		p, err := events.Decode[events.DriftDetected](e)
		return err == nil && p.Cluster == cluster && p.Image == image && p.Application == s.w.app && p.Digest == digest && p.Member == s.w.reconcileState().member
	})
	if err == nil {
		// What the watch buys over the interval: the event's time is when
		// flotilla found the drift.
		fmt.Printf("drift journaled %v after the primary was changed (interval %s)\n",
			e.Time().Sub(s.w.reconcileState().changed).Round(time.Millisecond), s.w.reconcile.interval)
	}
	return err
}

func (s *scenario) driftJournaledWithin(ctx context.Context, cluster string, seconds int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Until(s.w.reconcileState().changed.Add(time.Duration(seconds)*time.Second)))
	defer cancel()
	if err := s.driftJournaled(ctx, cluster); err != nil {
		return fmt.Errorf("no drift journaled within %d s of the change (the interval is %s: the watch must find it): %w", seconds, s.w.reconcile.interval, err)
	}
	return nil
}

func (s *scenario) driftMetric(ctx context.Context, n int, app string) error {
	got, err := s.reconcileMetric(ctx, `flotilla_drift_clusters{application="`+app+`"}`)
	if err != nil {
		return err
	}
	if got != float64(n) {
		return fmt.Errorf("flotilla_drift_clusters of %s is %v, want %d", app, got, n)
	}
	detected, err := s.reconcileMetric(ctx, `flotilla_drift_detected_total{application="`+app+`"}`)
	if err != nil {
		return err
	}
	if detected < float64(n) {
		return fmt.Errorf("flotilla_drift_detected_total of %s is %v, want at least %d", app, detected, n)
	}
	return nil
}

func (s *scenario) apiNamesDrift(ctx context.Context, app, cluster string) error {
	return s.apiNamesDriftOf(ctx, app, cluster, s.oldImage(), s.w.digests["1.0.0"])
}

// apiNamesDriftTo is apiNamesDrift for a git application whose first
// commit is the validated one.
func (s *scenario) apiNamesDriftTo(ctx context.Context, app, cluster, image string) error {
	return s.apiNamesDriftOf(ctx, app, cluster, image, s.w.git.commits["first"])
}

func (s *scenario) apiNamesDriftOf(ctx context.Context, app, cluster, image, digest string) error {
	var v struct {
		Drift *struct {
			Digest   string
			Clusters []struct{ Cluster, State, Image string }
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := s.getJSON(ctx, "/api/v1/applications/"+app, &v); err != nil {
			return err
		}
		if d := v.Drift; d != nil && d.Digest == digest {
			for _, c := range d.Clusters {
				if c.Cluster == cluster && c.State == "drifted" && c.Image == image {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after 30 s GET /api/v1/applications/%s says drift %+v, want %s drifted to %s", app, v.Drift, cluster, image)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (s *scenario) noKindRolloutWithin(ctx context.Context, seconds int, kind string) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(seconds) * time.Second):
	}
	if ids := s.kindRollouts(kind); len(ids) != 0 {
		return fmt.Errorf("rollouts of kind %s started: %v", kind, ids)
	}
	return nil
}

func (s *scenario) primaryStillOld(ctx context.Context, cluster string) error {
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	got, err := s.imageOf(ctx, c, s.w.workload+"-primary")
	if err != nil {
		return err
	}
	if got != s.oldImage() {
		return fmt.Errorf("primary in %s runs %s, want %s (set by hand, reported only)", cluster, got, s.oldImage())
	}
	return nil
}

// namespaceIn creates the scenario's namespace, empty, in a cluster that
// is not in the waves yet (a new cluster bootstrapped with its
// namespaces): a git application's commit renders its workload there.
func (s *scenario) namespaceIn(ctx context.Context, cluster string) error {
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.w.namespace}}
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace in %s: %w", cluster, err)
	}
	s.onCleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = c.Kube.CoreV1().Namespaces().Delete(ctx, s.w.namespace, metav1.DeleteOptions{})
	})
	return nil
}

// kindCommitRolloutSucceeds is kindRolloutSucceeds for a git
// application's "that" commit: the rollout carries the commit.
func (s *scenario) kindCommitRolloutSucceeds(ctx context.Context, kind, which, clusters string) error {
	commit := s.w.git.commits[map[string]string{"that": "that", "the first": "first"}[which]]
	version := commitVersion(commit)
	s.w.digests[version] = commit
	return s.kindRolloutSucceeds(ctx, kind, version, clusters)
}

func (s *scenario) gitDriftJournaledWithin(ctx context.Context, cluster, image, which string, seconds int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Until(s.w.reconcileState().changed.Add(time.Duration(seconds)*time.Second)))
	defer cancel()
	if err := s.driftJournaledOf(ctx, cluster, image, s.w.git.commits[map[string]string{"that": "that", "the first": "first"}[which]]); err != nil {
		return fmt.Errorf("no drift journaled within %d s of the change (the interval is %s): %w", seconds, s.w.reconcile.interval, err)
	}
	return nil
}

// primaryRunsImage reads the image the primary's first container runs in
// a cluster, waiting up to 30 s for it to be image.
func (s *scenario) primaryRunsImage(ctx context.Context, cluster, image string) error {
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	return s.waitImage(ctx, c, cluster, s.w.workload+"-primary", image)
}

// waitImage waits up to 30 s for Deployment name's first container in a
// cluster to run image.
func (s *scenario) waitImage(ctx context.Context, c *fleettest.Clients, cluster, name, image string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := s.imageOf(ctx, c, name)
		if err == nil && got == image {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return err
			}
			return fmt.Errorf("%s in %s runs %s, want %s", name, cluster, got, image)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// apiNamesNoDrift waits up to seconds for GET /api/v1/applications/{app}
// to name no cluster drifted: a revert that succeeded ended the drift.
func (s *scenario) apiNamesNoDrift(ctx context.Context, app string, seconds int) error {
	var v struct {
		Drift *struct {
			Clusters []struct{ Cluster, State, Image string }
		}
	}
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	for {
		v.Drift = nil
		if err := s.getJSON(ctx, "/api/v1/applications/"+app, &v); err != nil {
			return err
		}
		drifted := 0
		if v.Drift != nil {
			for _, c := range v.Drift.Clusters {
				if c.State == "drifted" {
					drifted++
				}
			}
		}
		if drifted == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d s after the revert GET /api/v1/applications/%s still names drift %+v", seconds, app, v.Drift)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
