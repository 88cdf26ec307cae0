package cluster

import (
	"context"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/logctx"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Jobs reads the Jobs named in a cluster's namespace (a release set's Job
// members'), live: whether each is there, the revision its pod template
// carries and how it ended. A Job not found is reported so, not an error;
// a read that fails is logged (observe records no Jobs then) and returned.
func (s *Set) Jobs(ctx context.Context, clusterName, namespace string, names []string) ([]rollout.JobStatus, error) {
	out, err := s.jobs(ctx, clusterName, namespace, names)
	if err != nil {
		logctx.From(ctx).WarnContext(ctx, "reading a release set's Jobs failed", "cluster", clusterName, "namespace", namespace, "error", err)
	}
	return out, err
}

func (s *Set) jobs(ctx context.Context, clusterName, namespace string, names []string) ([]rollout.JobStatus, error) {
	c, err := s.clientsFor(clusterName)
	if err != nil {
		return nil, err
	}
	out := make([]rollout.JobStatus, 0, len(names))
	for _, n := range names {
		j, err := c.kube.BatchV1().Jobs(namespace).Get(ctx, n, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			out = append(out, rollout.JobStatus{Name: n})
			continue
		case err != nil:
			return nil, fmt.Errorf("reading Job %s/%s in %s: %w", namespace, n, clusterName, err)
		}
		out = append(out, JobStatusOf(j))
	}
	return out, nil
}

// JobStatusOf is what a Job says of itself.
func JobStatusOf(j *batchv1.Job) rollout.JobStatus {
	st := rollout.JobStatus{Name: j.Name, Found: true, Revision: j.Spec.Template.Annotations[canary.AnnotationRevision]}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			st.Complete = true
		case batchv1.JobFailed:
			st.Failed = true
			st.Reason = strings.TrimSpace(c.Message)
			if st.Reason == "" {
				st.Reason = c.Reason
			}
		}
	}
	return st
}
