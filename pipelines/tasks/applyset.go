package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	flaggerclient "github.com/fluxcd/flagger/pkg/client/clientset/versioned"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/render"
)

// ParamMembers is apply-manifests' param of a release set's run: its
// members, a JSON list of SetMember in the order they are applied (a
// revert's reversed); empty for an application.
const ParamMembers = "members"

// KindJob is the workload kind of a member that runs to completion.
const KindJob = "Job"

// SetMember is one member of a release set's run
// (docs/design/release-sets.md): what to render for it and its canary.
type SetMember struct {
	// Application names the member: its inventory and label.
	Application string `json:"application"`
	// Kind is Deployment, DaemonSet or Job; Workload its name among the
	// member's rendered objects.
	Kind     string `json:"kind"`
	Workload string `json:"workload"`
	// Canary is the member's Flagger Canary (its delivery policy), with
	// Objects, what it refers to; none for a Job.
	Canary        *flaggerv1.Canary            `json:"canary,omitempty"`
	Objects       []*unstructured.Unstructured `json:"objects,omitempty"`
	Paths         []string                     `json:"paths,omitempty"`
	Render        string                       `json:"render,omitempty"`
	Chart         *render.Chart                `json:"chart,omitempty"`
	AllowedImages []string                     `json:"allowedImages,omitempty"`
	Prune         string                       `json:"prune,omitempty"`
	// Image, for an image member, is the pinned reference its workload's
	// Container ("" the first) runs: the set's run sets it (ApplyImageSet)
	// instead of rendering Paths.
	Image     string `json:"image,omitempty"`
	Container string `json:"container,omitempty"`
}

// decodeMembers reads ParamMembers.
func decodeMembers(s string) ([]SetMember, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var ms []SetMember
	if err := json.Unmarshal([]byte(s), &ms); err != nil {
		return nil, fault.Permanent(fmt.Errorf("--%s: want a JSON list of the set's members: %w", ParamMembers, err))
	}
	for i, m := range ms {
		switch {
		case m.Application == "" || m.Workload == "":
			return nil, fault.Permanent(fmt.Errorf("--%s: member %d names no application or workload", ParamMembers, i))
		case m.Kind != KindJob && m.Canary == nil && m.Prune != PrunePending:
			return nil, fault.Permanent(fmt.Errorf("--%s: member %s has no canary", ParamMembers, m.Application))
		}
	}
	return ms, nil
}

// EncodeMembers is ParamMembers of ms.
func EncodeMembers(ms []SetMember) (string, error) {
	if len(ms) == 0 {
		return "", nil
	}
	b, err := json.Marshal(ms)
	if err != nil {
		return "", fmt.Errorf("encoding the set's members: %w", err)
	}
	return string(b), nil
}

// memberRun is one member rendered, ready to apply.
type memberRun struct {
	m SetMember
	// objs are its rendered objects, its workloads marked with the
	// revision, and its other workloads' canaries.
	objs []*unstructured.Unstructured
	// canaries names its canaries (none for a Job), its own first; jobs
	// the Jobs it renders.
	canaries, jobs []string
}

// setWaitInterval is how often a member's readiness is read.
var setWaitInterval = 2 * time.Second

// applySet applies a release set's members at the commit checked out in
// tree, one after the other, each once those before it are ready (its
// Jobs complete, its canaries' primaries on the revision), stopping at
// the first that fails. Every member is rendered first: a commit one
// member cannot render applies nothing. The lead (the first member with a
// canary, p.Workload) lists every canary of the set, so the cluster's
// readers judge the set as one release; an image lead without an image
// (canaryOnly) has only its canary applied.
func applySet(ctx context.Context, cfg *rest.Config, tree, revision string, p ApplyManifestsParams) (ApplyCanaryResult, error) {
	var res ApplyCanaryResult
	runs := make([]memberRun, 0, len(p.Members))
	var all []string
	mixed := false
	for _, m := range p.Members {
		if m.Image != "" || canaryOnly(m) {
			// An image member of a set of git and image members: its
			// image is set on its live workload (applyImageMember); the
			// lead without an entry has its canary applied only.
			if m.Canary == nil || m.Kind == KindJob {
				return res, fault.Permanent(fmt.Errorf("--%s: image member %s has no canary, or is a Job", ParamMembers, m.Application))
			}
			if m.Image == "" && m.Workload != p.Workload {
				return res, fault.Permanent(fmt.Errorf("--%s: member %s names no image and no paths (only the set's lead may come without an image)", ParamMembers, m.Application))
			}
			mixed = true
			runs = append(runs, memberRun{m: m, canaries: []string{m.Canary.Name}})
			continue
		}
		r, err := renderMember(ctx, tree, revision, p, m)
		if err != nil {
			return res, err
		}
		runs = append(runs, r)
	}
	if mixed {
		// The cluster's previous version: what each member ran before.
		res.PreviousMembers = map[string]string{}
	}
	// The lead's list: every canary of the set, the lead's own first.
	for _, r := range runs {
		if r.m.Workload == p.Workload && r.m.Kind != KindJob {
			all = slices.Concat(r.canaries, all)
		} else {
			all = append(all, r.canaries...)
		}
	}
	kube, fl, err := clientsFor(cfg)
	if err != nil {
		return res, err
	}
	for i, r := range runs {
		if r.m.Kind == KindJob || r.m.Image != "" || canaryOnly(r.m) {
			continue
		}
		mp := memberParams(p, r.m)
		current, err := currentRevision(ctx, kube, mp)
		if err != nil {
			return res, err
		}
		prev := current.previous(p.Rollout)
		if r.m.Workload == p.Workload {
			res.PreviousImage = prev
		}
		if mixed {
			res.PreviousMembers[r.m.Application] = prev
		}
		res.Changed = res.Changed || current.revision != revision || p.Restart != "" && p.Restart != current.restart
		for _, o := range r.objs {
			if o.GetKind() == kindOr(r.m.Kind) && o.GetName() == r.m.Workload {
				ann := o.GetAnnotations()
				if ann == nil {
					ann = map[string]string{}
				}
				ann[AnnotationRollout], ann[AnnotationPreviousImage] = p.Rollout, prev
				o.SetAnnotations(ann)
			}
		}
		c := r.m.Canary
		delete(c.Annotations, canary.AnnotationWorkloads)
		if r.m.Workload == p.Workload && len(all) > 1 {
			c.Annotations[canary.AnnotationWorkloads] = strings.Join(all, ",")
		}
		runs[i].m.Canary = c
	}
	for _, r := range runs {
		applied := time.Now()
		if r.m.Image != "" || canaryOnly(r.m) {
			c := r.m.Canary.DeepCopy()
			if c.Namespace == "" {
				c.Namespace = p.Namespace
			}
			if c.Annotations == nil {
				c.Annotations = map[string]string{}
			}
			delete(c.Annotations, canary.AnnotationWorkloads)
			if r.m.Workload == p.Workload && len(all) > 1 {
				c.Annotations[canary.AnnotationWorkloads] = strings.Join(all, ",")
			}
			if r.m.Image == "" {
				// The image lead without an entry: its canary, listing
				// the set's; its workload left as the cluster runs it.
				if err := applyPolicy(ctx, cfg, fl, p.Namespace, r.m.Objects, c); err != nil {
					return res, fmt.Errorf("%s: %w", r.m.Application, err)
				}
				continue
			}
			prev, changed, err := applyImageMember(ctx, cfg, p.Rollout, p.Namespace, p.Restart, r.m, c)
			if err != nil {
				return res, err
			}
			res.Changed = res.Changed || changed
			res.PreviousMembers[r.m.Application] = prev
			if r.m.Workload == p.Workload {
				res.PreviousImage = prev
			}
			if err := waitMember(ctx, kube, fl, p.Namespace, r.m.Image, r, applied); err != nil {
				return res, err
			}
			continue
		}
		mp := memberParams(p, r.m)
		if r.m.Kind != KindJob {
			if err := applyPolicy(ctx, cfg, fl, p.Namespace, r.m.Objects, r.m.Canary); err != nil {
				return res, fmt.Errorf("%s: %w", r.m.Application, err)
			}
		}
		pruned, err := applyObjects(ctx, cfg, kube, mp, revision, r.objs, r.m.Kind == KindJob)
		res.Pruned = append(res.Pruned, pruned...)
		if err != nil {
			return res, fmt.Errorf("%s: %w", r.m.Application, err)
		}
		if err := waitMember(ctx, kube, fl, p.Namespace, revision, r, applied); err != nil {
			return res, err
		}
	}
	return res, nil
}

// canaryOnly tells whether m, of a set's run, is the set's image lead
// without an entry in the run's version: neither an image to set nor
// paths to render (docs/design/release-sets.md, "An image lead"). Only its
// canary is applied, listing the set's.
func canaryOnly(m SetMember) bool {
	return m.Image == "" && len(m.Paths) == 0 && m.Chart == nil && m.Kind != KindJob
}

// memberParams are p as the run of member m alone.
func memberParams(p ApplyManifestsParams, m SetMember) ApplyManifestsParams {
	mp := p
	mp.Members, mp.Application, mp.Kind, mp.Workload = nil, m.Application, m.Kind, m.Workload
	mp.Canary, mp.Objects, mp.Paths, mp.Render, mp.Chart, mp.AllowedImages, mp.Prune = m.Canary, m.Objects, m.Paths, m.Render, m.Chart, m.AllowedImages, m.Prune
	return mp
}

// renderMember renders m's objects at the checkout and marks its workloads
// (Jobs too: each set version runs its Jobs once, and a Job shows the
// commit it ran) with the revision and a retry's restart; a member with a
// canary gets one for each of its other workloads (releaseCanaries).
func renderMember(ctx context.Context, tree, revision string, p ApplyManifestsParams, m SetMember) (memberRun, error) {
	r := memberRun{m: m}
	if m.Chart != nil && m.Chart.Namespace == "" {
		m.Chart.Namespace = p.Namespace
	}
	objs, err := render.RenderContext(ctx, render.Request{Dir: tree, Kind: cmpOr(m.Render, render.Manifests), Paths: m.Paths, Chart: m.Chart})
	if err != nil {
		return r, fmt.Errorf("%s: %w", m.Application, err)
	}
	if err := render.CheckImages(objs, m.AllowedImages); err != nil {
		return r, fmt.Errorf("%s: %w", m.Application, err)
	}
	kind := kindOr(m.Kind)
	var target *unstructured.Unstructured
	var marked []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == m.Workload && (o.GetNamespace() == "" || o.GetNamespace() == p.Namespace) {
			target = o
		}
		if o.GetKind() == KindJob && o.GetAPIVersion() == "batch/v1" {
			if ns := o.GetNamespace(); ns != "" && ns != p.Namespace {
				return r, fault.Permanent(fmt.Errorf("%w: %s: commit renders Job %s/%s outside the set's namespace %s", render.ErrRender, m.Application, ns, o.GetName(), p.Namespace))
			}
			r.jobs = append(r.jobs, o.GetName())
			marked = append(marked, o)
		}
	}
	if target == nil {
		return r, fault.Permanent(fmt.Errorf("%w: %s: commit renders no %s %s/%s", render.ErrRender, m.Application, kind, p.Namespace, m.Workload))
	}
	if m.Kind != KindJob {
		others, err := releaseWorkloads(objs, target, p.Namespace)
		if err != nil {
			return r, fault.Permanent(fmt.Errorf("%w: %s: %w", render.ErrRender, m.Application, err))
		}
		marked = append(append(marked, target), others...)
		r.m.Canary = m.Canary.DeepCopy()
		if r.m.Canary.Annotations == nil {
			r.m.Canary.Annotations = map[string]string{}
		}
		cs, err := releaseCanaries(r.m.Canary, others)
		if err != nil {
			return r, err
		}
		objs = append(objs, cs...)
		r.canaries = append(r.canaries, r.m.Canary.Name)
		for _, w := range others {
			r.canaries = append(r.canaries, w.GetName())
		}
	}
	template := map[string]string{canary.AnnotationRevision: revision}
	if p.Restart != "" {
		template[AnnotationRestart] = p.Restart
	}
	for _, w := range marked {
		for k, v := range template {
			if err := unstructured.SetNestedField(w.Object, v, "spec", "template", "metadata", "annotations", k); err != nil {
				return r, fault.Permanent(fmt.Errorf("%w: %s %s: %w", render.ErrRender, w.GetKind(), w.GetName(), err))
			}
		}
	}
	r.objs = objs
	return r, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// errMemberFailed is a member that failed in the cluster: its Job, or its
// canary's analysis. Permanent: applying again cannot help.
var errMemberFailed = errors.New("release set member failed")

// waitMember waits (until ctx ends) for r to be ready in the namespace:
// every Job it renders complete at the revision and every canary's
// primary on the revision, its phase Succeeded (Initialized for a first
// deployment). A Job failed, or a canary failed since the member was
// applied or deleted (the run applied it before waiting), is a permanent
// error naming the member.
func waitMember(ctx context.Context, kube kubernetes.Interface, fl flaggerclient.Interface, namespace, revision string, r memberRun, applied time.Time) error {
	t := time.NewTicker(setWaitInterval)
	defer t.Stop()
	for {
		waiting, err := memberReady(ctx, kube, fl, namespace, revision, r, applied)
		if err != nil || waiting == "" {
			return err
		}
		select {
		case <-ctx.Done():
			return fault.Permanent(fmt.Errorf("%s not ready: %s: %w", r.m.Application, waiting, ctx.Err()))
		case <-t.C:
		}
	}
}

// memberReady says what r still waits for ("" when ready).
func memberReady(ctx context.Context, kube kubernetes.Interface, fl flaggerclient.Interface, namespace, revision string, r memberRun, applied time.Time) (string, error) {
	for _, name := range r.jobs {
		j, err := kube.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return "Job " + name + " not created yet", nil
		case err != nil:
			return "", fmt.Errorf("reading Job %s/%s: %w", namespace, name, err)
		case j.Spec.Template.Annotations[canary.AnnotationRevision] != revision:
			return "Job " + name + " of another revision", nil
		}
		if c := jobCondition(j, batchv1.JobFailed); c != nil {
			return "", fault.Permanent(fmt.Errorf("%w: %s: Job %s failed: %s", errMemberFailed, r.m.Application, name, cmpOr(c.Message, c.Reason)))
		}
		if jobCondition(j, batchv1.JobComplete) == nil {
			return "Job " + name + " running", nil
		}
	}
	for _, name := range r.canaries {
		c, err := fl.FlaggerV1beta1().Canaries(namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			// The run applied every canary it waits for: one gone was
			// deleted since, and no one brings it back but a later run,
			// which waits behind this one for the workload's lock
			// (deliver.Runner) until this one's deadline.
			return "", fault.Permanent(fmt.Errorf("%w: %s: canary %s was deleted while the run waited for it", errMemberFailed, r.m.Application, name))
		case err != nil:
			return "", fmt.Errorf("reading canary %s/%s: %w", namespace, name, err)
		}
		phase := c.Status.Phase
		kind := c.Spec.TargetRef.Kind
		_, primary, err := readWorkload(ctx, kube, kind, namespace, name+"-primary")
		switch {
		case apierrors.IsNotFound(err):
			return "canary " + name + ": no primary yet", nil
		case err != nil:
			return "", fmt.Errorf("reading %s/%s-primary: %w", namespace, name, err)
		}
		_, target, err := readWorkload(ctx, kube, kind, namespace, name)
		if err != nil {
			return "", fmt.Errorf("reading %s/%s: %w", namespace, name, err)
		}
		onPrimary := primary.Annotations[canary.AnnotationRevision] == revision
		onTarget := target.Annotations[canary.AnnotationRevision] == revision
		// Flagger failed the revision: its primary does not run it. A
		// Failed phase from before the apply is an earlier rollout's.
		if phase == flaggerv1.CanaryPhaseFailed && !onPrimary && c.Status.LastTransitionTime.After(applied.Truncate(time.Second)) {
			return "", fault.Permanent(fmt.Errorf("%w: %s: canary %s failed (Flagger's analysis)", errMemberFailed, r.m.Application, name))
		}
		// Ready as the rollback's end judges a cluster (CanaryStatus.Back):
		// both run the revision, no analysis under way (a return to the
		// last promoted spec may leave a Failed phase: Flagger reports no
		// manual rollback).
		settled := phase == flaggerv1.CanaryPhaseSucceeded || phase == flaggerv1.CanaryPhaseInitialized || phase == flaggerv1.CanaryPhaseFailed
		if !onPrimary || !onTarget || !settled {
			return fmt.Sprintf("canary %s %s", name, cmpOr(string(phase), "not started")), nil
		}
	}
	return "", nil
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}
