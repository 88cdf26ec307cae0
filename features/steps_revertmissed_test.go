package features

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cucumber/godog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/pipelines/tasks"
)

// Flagger's race with a revert, made to happen: Flagger's failed analysis
// ends by recording the workload's pod template as applied (its
// SyncStatus: its hash of the template it reads then). A revert applied
// between Flagger's decision and that write is recorded as seen, and
// Flagger never takes it up. These steps write into the real Flagger's
// canary status what that write leaves (Flagger's own hash of the
// reverted template, kept from when it promoted that template), then let
// the real Flagger and flotilla go on.
func (s *scenario) registerRevertMissedSteps(sc *godog.ScenarioContext) {
	sc.Step(`^Flagger's promoted spec of version "([^"]*)" in cluster "([^"]*)" is kept$`, func(ctx context.Context, version, cluster string) error {
		return s.flaggerKeepsPromoted(ctx, cluster, version)
	})
	sc.Step(`^Flagger in cluster "([^"]*)" has recorded the workload at version "([^"]*)" as applied$`, s.flaggerRecordsVersionApplied)
	sc.Step(`^Flagger in cluster "([^"]*)" fails the canary after the revert of "([^"]*)" ended there$`, s.flaggerFailsAfterRevert)
	sc.Step(`^the revert in cluster "([^"]*)" was applied again with a restart$`, s.revertRestarted)
}

// flaggerKeepsPromoted keeps the spec Flagger promoted last in cluster
// (its hash of the workload's pod template), version's: the template a
// revert to version restores, since flotilla's apply changes only the
// container's image.
func (s *scenario) flaggerKeepsPromoted(ctx context.Context, cluster, version string) error {
	c, err := clientsFor(cluster)
	if err != nil {
		return err
	}
	cd, err := c.Flagger.FlaggerV1beta1().Canaries(s.w.namespace).Get(ctx, s.w.workload, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if cd.Status.LastPromotedSpec == "" || cd.Status.LastPromotedSpec != cd.Status.LastAppliedSpec {
		return fmt.Errorf("canary in %s: last promoted spec %q, last applied %q: not settled on %s", cluster, cd.Status.LastPromotedSpec, cd.Status.LastAppliedSpec, version)
	}
	if s.w.promotedSpecs == nil {
		s.w.promotedSpecs = map[string]string{}
	}
	s.w.promotedSpecs[cluster+"/"+version] = cd.Status.LastPromotedSpec
	return nil
}

// flaggerRecordsVersionApplied sets the canary's last applied spec to
// version's template (kept by flaggerKeepsPromoted), what a revert to
// version leaves. Flagger takes the template it runs now for the one it
// promoted last, so it does nothing until the template changes.
func (s *scenario) flaggerRecordsVersionApplied(ctx context.Context, cluster, version string) error {
	c, err := clientsFor(cluster)
	if err != nil {
		return err
	}
	spec, ok := s.w.promotedSpecs[cluster+"/"+version]
	if !ok {
		return fmt.Errorf("no spec of version %s kept for cluster %s", version, cluster)
	}
	cd, err := c.Flagger.FlaggerV1beta1().Canaries(s.w.namespace).Get(ctx, s.w.workload, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if cd.Status.LastPromotedSpec == spec {
		return fmt.Errorf("canary in %s: Flagger promoted version %s's spec last, not the rollout's", cluster, version)
	}
	cd.Status.LastAppliedSpec = spec
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
