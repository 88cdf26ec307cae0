package features

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/cucumber/godog"
	"github.com/davecgh/go-spew/spew"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/flotilla-cd/flotilla/pipelines/tasks"
)

// Flagger's race with a revert, made to happen: Flagger's failed analysis
// ends by recording the workload's pod template as applied (its
// SyncStatus: the hash of the template it reads then). A revert applied
// between Flagger's decision and that write is recorded as seen, and
// Flagger never takes it up. These steps write into the real Flagger's
// canary status what that write leaves (the hash computed by Flagger's own
// code), then let the real Flagger and flotilla go on.
func (s *scenario) registerRevertMissedSteps(sc *godog.ScenarioContext) {
	sc.Step(`^Flagger in cluster "([^"]*)" has recorded the workload at version "([^"]*)" as applied$`, s.flaggerRecordsVersionApplied)
	sc.Step(`^Flagger in cluster "([^"]*)" fails the canary after the revert of "([^"]*)" ended there$`, s.flaggerFailsAfterRevert)
	sc.Step(`^the revert in cluster "([^"]*)" was applied again with a restart$`, s.revertRestarted)
}

// flaggerRecordsVersionApplied sets the canary's last applied spec to the
// hash of the workload's pod template as a revert to version leaves it
// (the container's image replaced, as flotilla's revert patches it).
// Flagger takes the template it runs now for the one it promoted last, so
// it does nothing until the template changes.
func (s *scenario) flaggerRecordsVersionApplied(ctx context.Context, cluster, version string) error {
	c, err := clientsFor(cluster)
	if err != nil {
		return err
	}
	ref, err := s.ref(version)
	if err != nil {
		return err
	}
	d, err := c.Kube.AppsV1().Deployments(s.w.namespace).Get(ctx, s.w.workload, metav1.GetOptions{})
	if err != nil {
		return err
	}
	tmpl := *d.Spec.Template.DeepCopy()
	tmpl.Spec.Containers[0].Image = ref
	hash := flaggerHash(tmpl)
	cd, err := c.Flagger.FlaggerV1beta1().Canaries(s.w.namespace).Get(ctx, s.w.workload, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if cd.Status.LastPromotedSpec != flaggerHash(d.Spec.Template) {
		return fmt.Errorf("canary in %s: its last promoted spec is not the workload's template (phase %s): Flagger would analyse it", cluster, cd.Status.Phase)
	}
	cd.Status.LastAppliedSpec = hash
	_, err = c.Flagger.FlaggerV1beta1().Canaries(s.w.namespace).UpdateStatus(ctx, cd, metav1.UpdateOptions{})
	return err
}

// flaggerFailsAfterRevert waits until flotilla's revert of cluster in the
// rollout of version has ended, the workload on the previous image and the
// primary not, then
// marks the canary Failed now, as Flagger's failure leaves it: settled,
// after the revert, on the spec recorded before.
func (s *scenario) flaggerFailsAfterRevert(ctx context.Context, cluster, version string) error {
	c, err := clientsFor(cluster)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ro, err := s.apiRolloutRuns(ctx, version)
		if err != nil {
			return err
		}
		cl := ro[cluster]
		target, terr := s.imageOf(ctx, c, s.w.workload)
		primary, perr := s.imageOf(ctx, c, s.w.workload+"-primary")
		if cl.Phase == "Reverting" && cl.Run == "" && terr == nil && perr == nil && cl.PreviousImage != "" && target == cl.PreviousImage && primary != target {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster %s: no revert ended with the workload on its previous image and the primary not (rollout: %+v, workload %s %v, primary %s %v)",
				cluster, cl, target, terr, primary, perr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cd, err := c.Flagger.FlaggerV1beta1().Canaries(s.w.namespace).Get(ctx, s.w.workload, metav1.GetOptions{})
	if err != nil {
		return err
	}
	cd.Status.Phase, cd.Status.CanaryWeight, cd.Status.LastTransitionTime = "Failed", 0, metav1.Now()
	_, err = c.Flagger.FlaggerV1beta1().Canaries(s.w.namespace).UpdateStatus(ctx, cd, metav1.UpdateOptions{})
	return err
}

// runState is what the API says of a cluster of a rollout.
type runState struct{ Phase, Run, Message, PreviousImage string }

// apiRolloutRuns reads the rollout of version and returns its clusters'
// state, by name.
func (s *scenario) apiRolloutRuns(ctx context.Context, version string) (map[string]runState, error) {
	var ro struct {
		Waves []struct {
			Clusters []struct {
				Name string
				runState
			}
		}
	}
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return nil, err
	}
	if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
		return nil, err
	}
	out := map[string]runState{}
	for _, w := range ro.Waves {
		for _, c := range w.Clusters {
			out[c.Name] = c.runState
		}
	}
	return out, nil
}

// revertRestarted reads the workload of cluster: its pod template carries
// flotilla's restart token of a revert applied again.
func (s *scenario) revertRestarted(ctx context.Context, cluster string) error {
	c, err := clientsFor(cluster)
	if err != nil {
		return err
	}
	d, err := c.Kube.AppsV1().Deployments(s.w.namespace).Get(ctx, s.w.workload, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if tok := d.Spec.Template.Annotations[tasks.AnnotationRestart]; !strings.Contains(tok, "/revert/") {
		return fmt.Errorf("workload in %s: restart token %q, want a revert's", cluster, tok)
	}
	return nil
}

// flaggerHash is Flagger's hash of a workload's pod template, as its
// pkg/canary computes the last applied and promoted specs (v1.41.0,
// spec.go's ComputeHash: FNV-32a of spew's %#v with sorted keys and no
// methods). Importing that package would link Flagger's every provider;
// the check in flaggerRecordsVersionApplied (the template Flagger promoted
// hashes to its last promoted spec) fails if this ever differs.
func flaggerHash(spec any) string {
	h := fnv.New32a()
	p := spew.ConfigState{Indent: " ", SortKeys: true, DisableMethods: true, SpewKeys: true}
	p.Fprintf(h, "%#v", spec)
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}
