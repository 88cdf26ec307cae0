package features

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

func (s *scenario) registerWorkloadsSteps(sc *godog.ScenarioContext) {
	sc.Step(`^the chart also renders the Deployment "([^"]*)"$`, s.chartRendersDeployment)
	sc.Step(`^the analysis gate fails for the canary "([^"]*)" in cluster "([^"]*)"$`, s.gateFailsForCanary)
	sc.Step(`^the analysis gate answers the canary "([^"]*)" after (\d+) seconds$`, s.gateDelaysCanary)
	sc.Step(`^in every cluster Flagger analysed the canaries "([^"]*)"$`, s.canariesAnalysed)
	sc.Step(`^in cluster "([^"]*)" Flagger failed the canary "([^"]*)" and not the canary "([^"]*)"$`, s.canaryFailedAlone)
	sc.Step(`^the primary and the workload of "([^"]*)" in every cluster run (that|the first) commit, greeting "([^"]*)"$`, s.workloadsRun)
	sc.Step(`^in every cluster flotilla counted the cluster succeeded only after the primary of "([^"]*)" ran that commit, at least (\d+) seconds after "([^"]*)"'s$`, s.succeededAfterLater)
	sc.Step(`^flotilla's rollout of that commit says cluster "([^"]*)" failed because of the workload "([^"]*)"$`, s.clusterFailedBecauseOf)
	sc.Step(`^flotilla's rollout of that commit shows in cluster "([^"]*)" the workloads "([^"]*)"$`, s.clusterShowsWorkloads)
}

// workerTemplate is a second Deployment of the chart, greeting with the
// same value as the release's first.
func workerTemplate(name string) string {
	return strings.NewReplacer("name: {{ .Release.Name }}", "name: "+name, "app: {{ .Release.Name }}", "app: "+name).Replace(gitChartDeployment)
}

// chartRendersDeployment adds a second Deployment to the chart and amends
// the repository's first commit with it (before flotilla serves it).
func (s *scenario) chartRendersDeployment(ctx context.Context, name string) error {
	r := s.w.git
	if r == nil {
		return errors.New("no deployments repository: a step making one comes first")
	}
	if err := writeFile(filepath.Join(r.work, "charts", r.chart, "templates", name+".yaml"), workerTemplate(name)); err != nil {
		return err
	}
	for _, args := range [][]string{{"add", "."}, {"commit", "--amend", "--no-edit"}, {"push", "-f", "origin", "main"}} {
		if _, err := git(ctx, r.work, args...); err != nil {
			return err
		}
	}
	head, err := git(ctx, r.work, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	r.commits["first"] = strings.TrimSpace(head)
	return nil
}

func (s *scenario) gateFailsForCanary(canaryName, cluster string) error {
	g := s.w.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	g.failCanary[cluster+"/"+canaryName] = true
	return nil
}

func (s *scenario) gateDelaysCanary(canaryName string, seconds int) error {
	g := s.w.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	g.delay[canaryName] = time.Duration(seconds) * time.Second
	return nil
}

// canaryEvents lists what Flagger recorded of the canary name in cluster
// (Kubernetes events of kind Canary): type and message.
func (s *scenario) canaryEvents(ctx context.Context, cluster, name string) ([]string, error) {
	c, err := s.clientsFor(cluster)
	if err != nil {
		return nil, err
	}
	evs, err := c.Kube.CoreV1().Events(s.w.namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.kind", "Canary"),
			fields.OneTermEqualSelector("involvedObject.name", name)).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("listing the events of canary %s in %s: %w", name, cluster, err)
	}
	var out []string
	for _, e := range evs.Items {
		out = append(out, e.Type+": "+e.Message)
	}
	return out, nil
}

func hasEvent(evs []string, prefix string) bool {
	for _, e := range evs {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}

// canariesAnalysed reads, in every cluster of the waves, that each Canary
// exists and that Flagger started an analysis of it: "Starting canary
// analysis" comes only from an analysis (a first deployment initializes,
// a revert skips the analysis).
func (s *scenario) canariesAnalysed(ctx context.Context, names string) error {
	for _, c := range s.w.clusters {
		for _, n := range strings.Split(names, ",") {
			if _, err := c.Flagger.FlaggerV1beta1().Canaries(s.w.namespace).Get(ctx, n, metav1.GetOptions{}); err != nil {
				return fmt.Errorf("the Canary %s in %s: %w", n, c.Name, err)
			}
			evs, err := s.canaryEvents(ctx, c.Name, n)
			if err != nil {
				return err
			}
			if want := corev1.EventTypeNormal + ": Starting canary analysis for " + n + "." + s.w.namespace; !hasEvent(evs, want) {
				return fmt.Errorf("Flagger in %s never analysed the canary %s: its events are %q", c.Name, n, evs)
			}
		}
	}
	return nil
}

// canaryFailedAlone reads Flagger's events in cluster: the failing canary
// failed ("Canary failed! Scaling down ..."), the other did not.
func (s *scenario) canaryFailedAlone(ctx context.Context, cluster, failing, other string) error {
	evs, err := s.canaryEvents(ctx, cluster, failing)
	if err != nil {
		return err
	}
	if want := corev1.EventTypeWarning + ": Canary failed! Scaling down " + failing + "." + s.w.namespace; !hasEvent(evs, want) {
		return fmt.Errorf("Flagger in %s did not fail the canary %s: its events are %q", cluster, failing, evs)
	}
	if evs, err = s.canaryEvents(ctx, cluster, other); err != nil {
		return err
	}
	if hasEvent(evs, corev1.EventTypeWarning+": Canary failed!") {
		return fmt.Errorf("Flagger in %s failed the canary %s too: its events are %q", cluster, other, evs)
	}
	return nil
}

// workloadsRun reads each named Deployment and its primary in every
// cluster: the commit's revision and greeting.
func (s *scenario) workloadsRun(ctx context.Context, names, which, greeting string) error {
	name := map[string]string{"that": "that", "the first": "first"}[which]
	for _, c := range s.w.clusters {
		for _, n := range strings.Split(names, ",") {
			for _, d := range []string{n + "-primary", n} {
				if err := s.runs(ctx, c.Name, d, s.w.git.commits[name], greeting); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// succeededAfterLater reads, for every cluster, when the watch saw each
// primary run that commit and when flotilla decided the cluster succeeded
// (the time of its cluster.succeeded): the later primary's change came at
// least gap after the earlier's (so the check below can tell them apart),
// and the cluster's success not before it (1 s of slack for the watch's
// delivery).
func (s *scenario) succeededAfterLater(ctx context.Context, later string, gap int, earlier string) error {
	w := s.w.git.workloads
	if w == nil {
		return errors.New("the workloads are not watched: the watching step comes first")
	}
	version := commitVersion(s.w.git.commits["that"])
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	rev := s.w.git.url + "@" + s.w.git.commits["that"]
	for _, c := range s.w.clusters {
		e, err := s.w.sink.waitFor(ctx, "cluster "+c.Name+" succeeded", func(e cloudevents.Event) bool {
			if e.Type() != events.TypeClusterSucceeded || events.RolloutID(e) != id {
				return false
			}
			p, err := events.Decode[events.ClusterResult](e)
			return err == nil && p.Cluster == c.Name
		})
		if err != nil {
			return err
		}
		lateAt, ok := w.firstSeen(c.Name, later+"-primary", rev)
		if !ok {
			return fmt.Errorf("the watch never saw %s-primary in %s run %s", later, c.Name, rev)
		}
		earlyAt, ok := w.firstSeen(c.Name, earlier+"-primary", rev)
		if !ok {
			return fmt.Errorf("the watch never saw %s-primary in %s run %s", earlier, c.Name, rev)
		}
		if d := lateAt.Sub(earlyAt); d < time.Duration(gap)*time.Second {
			return fmt.Errorf("in %s %s-primary ran the commit %s after %s-primary, want at least %ds: the scenario cannot tell them apart", c.Name, later, d, earlier, gap)
		}
		if at := e.Time(); at.Before(lateAt.Add(-time.Second)) {
			return fmt.Errorf("flotilla counted %s succeeded at %s, %s before %s-primary ran the commit (%s; %s-primary at %s)",
				c.Name, at.Format(time.RFC3339Nano), lateAt.Sub(at), later, lateAt.Format(time.RFC3339Nano), earlier, earlyAt.Format(time.RFC3339Nano))
		}
	}
	return nil
}

// rolloutOfThatCommit reads the rollout of that commit from flotilla's API.
func (s *scenario) rolloutOfThatCommit(ctx context.Context) (rollout.Rollout, error) {
	var ro rollout.Rollout
	id, err := s.rolloutID(ctx, commitVersion(s.w.git.commits["that"]))
	if err != nil {
		return ro, err
	}
	return ro, s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro)
}

func (s *scenario) clusterFailedBecauseOf(ctx context.Context, cluster, workload string) error {
	ro, err := s.rolloutOfThatCommit(ctx)
	if err != nil {
		return err
	}
	cl, _, err := ro.Cluster(cluster)
	if err != nil {
		return err
	}
	if !strings.Contains(cl.Failure, workload) {
		return fmt.Errorf("the API says cluster %s failed because %q, which names no %s", cluster, cl.Failure, workload)
	}
	return nil
}

func (s *scenario) clusterShowsWorkloads(ctx context.Context, cluster, want string) error {
	ro, err := s.rolloutOfThatCommit(ctx)
	if err != nil {
		return err
	}
	cl, _, err := ro.Cluster(cluster)
	if err != nil {
		return err
	}
	wantMap := map[string]string{}
	for _, kv := range strings.Split(want, ",") {
		k, v, _ := strings.Cut(kv, "=")
		wantMap[k] = v
	}
	if d := cmp.Diff(wantMap, cl.Workloads); d != "" {
		return fmt.Errorf("the API's cluster %s shows the workloads (-want +got):\n%s", cluster, d)
	}
	return nil
}
