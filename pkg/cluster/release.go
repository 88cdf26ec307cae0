package cluster

import (
	"context"
	"fmt"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// A release of several workloads (a git application whose commit renders
// several Deployments or DaemonSets) has a canary per workload; the
// application's own canary lists the others (canary.AnnotationWorkloads).
// Its status is all of theirs, combined by the domain's rule
// (rollout.Combine): the cluster has promoted the release once every
// canary has.

// workloadStatus is st as one canary of a release.
func workloadStatus(name string, st CanaryStatus) rollout.WorkloadStatus {
	return rollout.WorkloadStatus{
		Name: name, Phase: st.Phase, Weight: st.Weight, Checksum: st.Checksum, Transition: st.Transition,
		PrimaryImage: st.PrimaryImage, TargetImage: st.TargetImage,
	}
}

// canaryOf reads what one canary says of itself into st.
func canaryOf(cn *flaggerv1.Canary) CanaryStatus {
	return CanaryStatus{
		Phase: string(cn.Status.Phase), Weight: cn.Status.CanaryWeight,
		Checksum: cn.Status.LastAppliedSpec, Transition: cn.Status.LastTransitionTime.Time,
	}
}

// releaseStatus combines own, the status of canary cn, with the live
// status of every other canary cn lists; own alone when it lists none.
func releaseStatus(ctx context.Context, c *clients, namespace string, cn *flaggerv1.Canary, own CanaryStatus) (CanaryStatus, error) {
	names := canary.ReleaseWorkloads(cn)
	if len(names) == 0 {
		return own, nil
	}
	ws := []rollout.WorkloadStatus{workloadStatus(cn.Name, own)}
	for _, n := range names {
		var st CanaryStatus
		kind := ""
		other, err := c.flagger.FlaggerV1beta1().Canaries(namespace).Get(ctx, n, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			// Not applied yet, or gone: it has promoted nothing.
		case err != nil:
			return CanaryStatus{}, fmt.Errorf("reading canary %s/%s: %w", namespace, n, err)
		default:
			st, kind = canaryOf(other), other.Spec.TargetRef.Kind
		}
		if st.TargetImage, err = image(ctx, c, namespace, kind, n, ""); err != nil {
			return CanaryStatus{}, err
		}
		if st.PrimaryImage, err = image(ctx, c, namespace, kind, n+"-primary", ""); err != nil {
			return CanaryStatus{}, err
		}
		ws = append(ws, workloadStatus(n, st))
	}
	return rollout.Combine(ws), nil
}

// cachedReleaseStatus is releaseStatus from the namespace's watch cache;
// ok is false where the cache cannot answer.
func (nc *nsCache) cachedReleaseStatus(namespace string, cn *flaggerv1.Canary, own CanaryStatus) (CanaryStatus, bool) {
	names := canary.ReleaseWorkloads(cn)
	if len(names) == 0 {
		return own, true
	}
	ws := []rollout.WorkloadStatus{workloadStatus(cn.Name, own)}
	for _, n := range names {
		var st CanaryStatus
		kind := ""
		other, err := nc.canaries.Canaries(namespace).Get(n)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return CanaryStatus{}, false
		default:
			st, kind = canaryOf(other), other.Spec.TargetRef.Kind
		}
		var tErr, pErr error
		st.TargetImage, tErr = nc.image(namespace, kind, n, "")
		st.PrimaryImage, pErr = nc.image(namespace, kind, n+"-primary", "")
		if tErr != nil || pErr != nil {
			return CanaryStatus{}, false
		}
		ws = append(ws, workloadStatus(n, st))
	}
	return rollout.Combine(ws), true
}

// canaryOwnerWait bounds the wait for a namespace's watch cache to sync
// when a gate asks who owns a canary in it.
const canaryOwnerWait = 2 * time.Second

// CanaryApplication names the application the canary namespace/name of
// cluster was made for (its label canary.LabelApplication) and the kind of
// its target, from the namespace's watch cache (waiting up to
// canaryOwnerWait for it to sync): a validation gate called by the canary
// of another workload of a git release finds the release's policy by it.
// ok is false when the canary or its label is not there.
func (s *Set) CanaryApplication(clusterName, namespace, name string) (app, kind string, ok bool) {
	nc, err := s.namespaceCache(clusterName, namespace)
	if err != nil {
		return "", "", false
	}
	for deadline := time.Now().Add(canaryOwnerWait); !nc.ready(); {
		if time.Now().After(deadline) {
			return "", "", false
		}
		time.Sleep(20 * time.Millisecond)
	}
	cn, err := nc.canaries.Canaries(namespace).Get(name)
	if err != nil {
		return "", "", false
	}
	app = cn.Labels[canary.LabelApplication]
	return app, kindOf(cn.Spec.TargetRef.Kind), app != ""
}
