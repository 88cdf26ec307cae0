package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	flaggerclient "github.com/fluxcd/flagger/pkg/client/clientset/versioned"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
)

// Annotations flotilla keeps on the workload, so a re-run of the same rollout
// (after a crash) still knows what the workload ran before it.
const (
	AnnotationRollout       = "flotilla.dev/rollout"
	AnnotationPreviousImage = "flotilla.dev/previous-image"
	// AnnotationRestart on the pod template makes a retry a new revision
	// of the same image, which Flagger analyses again (as `kubectl
	// rollout restart` does with its own annotation).
	AnnotationRestart = "flotilla.dev/restart"
	FieldManager      = "flotilla"
)

// ApplyCanaryParams says what to apply to one cluster.
type ApplyCanaryParams struct {
	Rollout   string            `json:"rollout"`
	Namespace string            `json:"namespace"`
	Kind      string            `json:"kind,omitempty"` // of the workload: Deployment (the default) or DaemonSet
	Workload  string            `json:"workload"`
	Container string            `json:"container,omitempty"` // "" = the first container
	Image     string            `json:"image"`               // repo@digest
	Canary    *flaggerv1.Canary `json:"canary"`
	// Objects are what the canary refers to (MetricTemplates, an autoscaler,
	// a load tester): applied before it, server-side, all in Namespace.
	Objects []*unstructured.Unstructured `json:"objects,omitempty"`
	// Restart, when set, goes on the pod template (AnnotationRestart): a
	// retry of a cluster whose analysis failed.
	Restart string `json:"restart,omitempty"`
	// Revision, when set, goes on the pod template too
	// (canary.AnnotationRevision): an image member of a release set, its
	// image, so the set's run knows when the primary runs it.
	Revision string `json:"revision,omitempty"`
	// Members, for a release set of image members, are its members in
	// the order applied, each with its image: the run applies them one
	// after another (ApplyImageSet); Workload is the lead's.
	Members []SetMember `json:"members,omitempty"`
}

// ApplyCanaryResult is what the task reports back.
type ApplyCanaryResult struct {
	PreviousImage string `json:"previousImage"`
	Changed       bool   `json:"changed"`
	// Pruned names what a git application's run deleted because its
	// commit no longer renders it ("Kind/namespace/name").
	Pruned []string `json:"pruned,omitempty"`
	// PreviousMembers, of a release set of image members' run, is what
	// each member it set ran before, by member (ApplyImageSet).
	PreviousMembers map[string]string `json:"previousMembers,omitempty"`
}

// ApplyCanary applies the objects the Canary refers to and the Canary first
// (so Flagger reports the new revision to the new rollout's event hook), then
// sets the workload's container image. It is idempotent: run again for one
// rollout (its answer lost) it finds the workload set and patches nothing.
// Its patch holds the resourceVersion it read, so two runs of one rollout
// at once (a replica's run still in flight, or its patch still on the way,
// when the partition's next holder runs the request again) patch once: the
// API server refuses the later one with a conflict, and that run reads the
// workload again and finds it set (retry.RetryOnConflict; a conflict with
// another writer, the workload's controller updating its status, is read
// again and patched).
func ApplyCanary(ctx context.Context, cfg *rest.Config, p ApplyCanaryParams) (ApplyCanaryResult, error) {
	var res ApplyCanaryResult
	kube, fl, err := clientsFor(cfg)
	if err != nil {
		return res, err
	}
	// The workload and its primary are read at once: one round trip to the
	// cluster's API server instead of two before anything is applied.
	var (
		w       workload
		primary []corev1.Container
	)
	reads, rctx := errgroup.WithContext(ctx)
	reads.Go(func() (err error) { w, err = getWorkload(rctx, kube, p); return err })
	reads.Go(func() (err error) { primary, err = primaryContainers(rctx, kube, p); return err })
	if err := reads.Wait(); err != nil {
		return res, err
	}
	if _, _, err := containerImage(w, p.Container); err != nil {
		return res, err
	}
	if err := applyPolicy(ctx, cfg, fl, p.Namespace, p.Objects, p.Canary); err != nil {
		return res, err
	}
	first := true
	err = retry.RetryOnConflict(retry.DefaultRetry, func() (err error) {
		if !first {
			if w, err = getWorkload(ctx, kube, p); err != nil {
				return err
			}
		}
		first = false
		res, err = setImage(ctx, w, primary, p)
		return err
	})
	return res, err
}

// setImage patches workload w, as read, to run p's image for p's rollout,
// unless it does already; primary is what its primary runs.
func setImage(ctx context.Context, w workload, primary []corev1.Container, p ApplyCanaryParams) (ApplyCanaryResult, error) {
	var res ApplyCanaryResult
	container, current, err := containerImage(w, p.Container)
	if err != nil {
		return res, err
	}
	// What to roll back to is what the primary runs: the last version
	// Flagger promoted (validated). The workload's own image may be one
	// that was never validated (an earlier rollout's, superseded mid-way).
	// Before the first promotion there is no primary: then the workload's.
	res.PreviousImage = current
	if i := slices.IndexFunc(primary, func(c corev1.Container) bool { return c.Name == container }); i >= 0 {
		res.PreviousImage = primary[i].Image
	}
	if w.annotations[AnnotationRollout] == p.Rollout && w.annotations[AnnotationPreviousImage] != "" {
		res.PreviousImage = w.annotations[AnnotationPreviousImage]
	}
	res.Changed = current != p.Image || (p.Restart != "" && p.Restart != w.templateAnnotations[AnnotationRestart]) ||
		(p.Revision != "" && p.Revision != w.templateAnnotations[canary.AnnotationRevision])
	if !res.Changed && w.annotations[AnnotationRollout] == p.Rollout && w.annotations[AnnotationPreviousImage] == res.PreviousImage {
		// This rollout's run got here before (its answer was lost in a
		// crash, or to a journal that did not acknowledge it, or it ran
		// at once with this one): the workload says so, and a second
		// patch would change nothing.
		return res, nil
	}
	template := map[string]any{"spec": map[string]any{
		"containers": []map[string]string{{"name": container, "image": p.Image}},
	}}
	ann := map[string]string{}
	if p.Restart != "" {
		ann[AnnotationRestart] = p.Restart
	}
	if p.Revision != "" {
		ann[canary.AnnotationRevision] = p.Revision
	}
	if len(ann) > 0 {
		template["metadata"] = map[string]any{"annotations": ann}
	}
	patch := map[string]any{
		"metadata": map[string]any{
			"resourceVersion": w.resourceVersion,
			"annotations": map[string]string{
				AnnotationRollout: p.Rollout, AnnotationPreviousImage: res.PreviousImage,
			},
		},
		"spec": map[string]any{"template": template},
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return res, fmt.Errorf("encoding patch: %w", err)
	}
	if err := w.patch(ctx, body); err != nil {
		return res, fmt.Errorf("setting image of %s %s/%s: %w", w.kind, p.Namespace, p.Workload, err)
	}
	return res, nil
}

// applyPolicy applies the delivery policy's objects (MetricTemplates, HPA,
// load tester...), then the Canary that refers to them.
func applyPolicy(ctx context.Context, cfg *rest.Config, fl flaggerclient.Interface, namespace string, objects []*unstructured.Unstructured, c *flaggerv1.Canary) error {
	if len(objects) > 0 {
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("creating dynamic client: %w", err)
		}
		for _, o := range objects {
			if err := applyObject(ctx, dyn, namespace, o); err != nil {
				return err
			}
		}
	}
	return applyCanary(ctx, fl, c)
}

// workload is the part of a Deployment or DaemonSet the task reads, and how
// to patch it.
type workload struct {
	kind, namespace, name string
	annotations           map[string]string
	templateAnnotations   map[string]string
	// resourceVersion is the one read: the patch's precondition.
	resourceVersion string
	containers      []corev1.Container
	patch           func(ctx context.Context, body []byte) error
}

func getWorkload(ctx context.Context, kube kubernetes.Interface, p ApplyCanaryParams) (workload, error) {
	w := workload{kind: kindOr(p.Kind), namespace: p.Namespace, name: p.Workload}
	om, tmpl, err := readWorkload(ctx, kube, p.Kind, p.Namespace, p.Workload)
	switch {
	case apierrors.IsNotFound(err):
		return w, fault.Permanent(fmt.Errorf("%s %s/%s not found", strings.ToLower(w.kind), p.Namespace, p.Workload))
	case fault.IsPermanent(err):
		return w, err
	case err != nil:
		return w, fmt.Errorf("reading %s %s/%s: %w", strings.ToLower(w.kind), p.Namespace, p.Workload, err)
	}
	w.annotations, w.resourceVersion, w.containers, w.templateAnnotations = om.Annotations, om.ResourceVersion, tmpl.Spec.Containers, tmpl.Annotations
	opts := metav1.PatchOptions{FieldManager: FieldManager}
	w.patch = func(ctx context.Context, body []byte) error {
		var err error
		if w.kind == "DaemonSet" {
			_, err = kube.AppsV1().DaemonSets(p.Namespace).Patch(ctx, p.Workload, types.StrategicMergePatchType, body, opts)
		} else {
			_, err = kube.AppsV1().Deployments(p.Namespace).Patch(ctx, p.Workload, types.StrategicMergePatchType, body, opts)
		}
		return err
	}
	return w, nil
}

// readWorkload reads a Deployment's or a DaemonSet's metadata and pod
// template (kind "" is a Deployment).
func readWorkload(ctx context.Context, kube kubernetes.Interface, kind, namespace, name string) (metav1.ObjectMeta, corev1.PodTemplateSpec, error) {
	switch kindOr(kind) {
	case "Deployment":
		d, err := kube.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return metav1.ObjectMeta{}, corev1.PodTemplateSpec{}, err
		}
		return d.ObjectMeta, d.Spec.Template, nil
	case "DaemonSet":
		ds, err := kube.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return metav1.ObjectMeta{}, corev1.PodTemplateSpec{}, err
		}
		return ds.ObjectMeta, ds.Spec.Template, nil
	}
	return metav1.ObjectMeta{}, corev1.PodTemplateSpec{}, fault.Permanent(fmt.Errorf("workload kind %q: want Deployment or DaemonSet", kind))
}

// primaryContainers returns the containers of the workload's primary
// (<workload>-primary, which Flagger creates and promotes), none if there
// is no primary yet.
func primaryContainers(ctx context.Context, kube kubernetes.Interface, p ApplyCanaryParams) ([]corev1.Container, error) {
	name := p.Workload + "-primary"
	_, tmpl, err := readWorkload(ctx, kube, p.Kind, p.Namespace, name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s: %w", p.Namespace, name, err)
	}
	return tmpl.Spec.Containers, nil
}

func containerImage(w workload, name string) (string, string, error) {
	cs := w.containers
	if len(cs) == 0 {
		return "", "", fault.Permanent(fmt.Errorf("%s %s/%s has no containers", strings.ToLower(w.kind), w.namespace, w.name))
	}
	if name == "" {
		return cs[0].Name, cs[0].Image, nil
	}
	for _, c := range cs {
		if c.Name == name {
			return c.Name, c.Image, nil
		}
	}
	return "", "", fault.Permanent(fmt.Errorf("%s %s/%s has no container %q", strings.ToLower(w.kind), w.namespace, w.name, name))
}

// applyObject applies one of the objects a canary refers to, server-side,
// in namespace. Their kinds are few and known (pkg/canary renders them), so
// their resources are derived from the kinds, without discovery.
func applyObject(ctx context.Context, dyn dynamic.Interface, namespace string, o *unstructured.Unstructured) error {
	gvk := o.GroupVersionKind()
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	body, err := o.MarshalJSON()
	if err != nil {
		return fmt.Errorf("encoding %s %s: %w", gvk.Kind, o.GetName(), err)
	}
	force := true
	_, err = dyn.Resource(gvr).Namespace(namespace).Patch(ctx, o.GetName(), types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsNotFound(err) {
		// Not found: the cluster does not serve the kind (no Flagger CRD).
		return fault.Permanent(fmt.Errorf("applying %s %s/%s: %w", gvk.Kind, namespace, o.GetName(), err))
	}
	if err != nil {
		return fmt.Errorf("applying %s %s/%s: %w", gvk.Kind, namespace, o.GetName(), err)
	}
	return nil
}

func applyCanary(ctx context.Context, fl flaggerclient.Interface, c *flaggerv1.Canary) error {
	c = c.DeepCopy()
	c.TypeMeta = metav1.TypeMeta{APIVersion: flaggerv1.SchemeGroupVersion.String(), Kind: flaggerv1.CanaryKind}
	u, err := canary.Unstructured(c) // without the nulls the CRD refuses
	if err != nil {
		return fmt.Errorf("encoding canary: %w", err)
	}
	body, err := u.MarshalJSON()
	if err != nil {
		return fmt.Errorf("encoding canary: %w", err)
	}
	force := true
	if _, err := fl.FlaggerV1beta1().Canaries(c.Namespace).Patch(ctx, c.Name, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: FieldManager, Force: &force}); err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			return fault.Permanent(fmt.Errorf("applying canary %s/%s: %w", c.Namespace, c.Name, err))
		}
		return fmt.Errorf("applying canary %s/%s: %w", c.Namespace, c.Name, err)
	}
	return nil
}
