package tasks

import (
	"context"
	"encoding/json"
	"fmt"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	flaggerclient "github.com/fluxcd/flagger/pkg/client/clientset/versioned"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/events"
)

// Annotations flotilla keeps on the workload, so a re-run of the same rollout
// (after a crash) still knows what the workload ran before it.
const (
	AnnotationRollout       = "flotilla.dev/rollout"
	AnnotationPreviousImage = "flotilla.dev/previous-image"
	FieldManager            = "flotilla"
)

// ApplyCanaryParams says what to apply to one cluster.
type ApplyCanaryParams struct {
	Rollout   string            `json:"rollout"`
	Namespace string            `json:"namespace"`
	Workload  string            `json:"workload"`
	Container string            `json:"container,omitempty"` // "" = the first container
	Image     string            `json:"image"`               // repo@digest
	Canary    *flaggerv1.Canary `json:"canary"`
}

// ApplyCanaryResult is what the task reports back.
type ApplyCanaryResult struct {
	PreviousImage string `json:"previousImage"`
	Changed       bool   `json:"changed"`
}

// ApplyCanary applies the Canary first (so Flagger reports the new revision to
// the new rollout's event hook), then sets the workload's container image.
// It is idempotent: running it twice for one rollout changes nothing more.
func ApplyCanary(ctx context.Context, cfg *rest.Config, p ApplyCanaryParams) (ApplyCanaryResult, error) {
	var res ApplyCanaryResult
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return res, fmt.Errorf("creating kubernetes client: %w", err)
	}
	fl, err := flaggerclient.NewForConfig(cfg)
	if err != nil {
		return res, fmt.Errorf("creating flagger client: %w", err)
	}
	d, err := kube.AppsV1().Deployments(p.Namespace).Get(ctx, p.Workload, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return res, events.Permanent(fmt.Errorf("deployment %s/%s not found", p.Namespace, p.Workload))
	}
	if err != nil {
		return res, fmt.Errorf("reading deployment %s/%s: %w", p.Namespace, p.Workload, err)
	}
	container, current, err := containerImage(d, p.Container)
	if err != nil {
		return res, err
	}
	res.PreviousImage = current
	if d.Annotations[AnnotationRollout] == p.Rollout && d.Annotations[AnnotationPreviousImage] != "" {
		res.PreviousImage = d.Annotations[AnnotationPreviousImage]
	}
	if err := applyCanary(ctx, fl, p.Canary); err != nil {
		return res, err
	}
	patch := map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{
			AnnotationRollout: p.Rollout, AnnotationPreviousImage: res.PreviousImage,
		}},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []map[string]string{{"name": container, "image": p.Image}},
		}}},
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return res, fmt.Errorf("encoding patch: %w", err)
	}
	if _, err := kube.AppsV1().Deployments(p.Namespace).Patch(ctx, p.Workload, types.StrategicMergePatchType, body,
		metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		return res, fmt.Errorf("setting image of %s/%s: %w", p.Namespace, p.Workload, err)
	}
	res.Changed = current != p.Image
	return res, nil
}

func containerImage(d *appsv1.Deployment, name string) (string, string, error) {
	cs := d.Spec.Template.Spec.Containers
	if len(cs) == 0 {
		return "", "", events.Permanent(fmt.Errorf("deployment %s/%s has no containers", d.Namespace, d.Name))
	}
	if name == "" {
		return cs[0].Name, cs[0].Image, nil
	}
	for _, c := range cs {
		if c.Name == name {
			return c.Name, c.Image, nil
		}
	}
	return "", "", events.Permanent(fmt.Errorf("deployment %s/%s has no container %q", d.Namespace, d.Name, name))
}

func applyCanary(ctx context.Context, fl flaggerclient.Interface, c *flaggerv1.Canary) error {
	c = c.DeepCopy()
	c.TypeMeta = metav1.TypeMeta{APIVersion: flaggerv1.SchemeGroupVersion.String(), Kind: flaggerv1.CanaryKind}
	body, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encoding canary: %w", err)
	}
	force := true
	if _, err := fl.FlaggerV1beta1().Canaries(c.Namespace).Patch(ctx, c.Name, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: FieldManager, Force: &force}); err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			return events.Permanent(fmt.Errorf("applying canary %s/%s: %w", c.Namespace, c.Name, err))
		}
		return fmt.Errorf("applying canary %s/%s: %w", c.Namespace, c.Name, err)
	}
	return nil
}
