package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	flaggerclient "github.com/fluxcd/flagger/pkg/client/clientset/versioned"
	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/render"
)

// Names of the apply-manifests task's params (the workload's, the canary's
// and git-url, git-path are shared with the other tasks).
const (
	ParamGitCommit = "git-commit"
	ParamRender    = "render"
	ParamHelm      = "helm"
	// ParamAllowedImages is a JSON list of regular expressions.
	ParamAllowedImages = "allowed-images"
	// ParamPrune is one of the Prune* values.
	ParamPrune = "prune"

	// ResultPreviousRevision is the revision (repository@commit) the
	// workload ran before.
	ResultPreviousRevision = "previous-revision"
	// ResultPruned lists the objects the run deleted because the commit
	// no longer renders them ("Kind/namespace/name" comma-separated,
	// EncodePruned), empty when none.
	ResultPruned = "pruned"
)

// maxPrunedResult bounds ResultPruned: a Tekton result travels in the
// step's termination message (4 KiB for all of a step's results).
const maxPrunedResult = 2048

// EncodePruned is the ResultPruned of the objects deleted: beyond
// maxPrunedResult bytes the rest is counted ("+N more").
func EncodePruned(deleted []string) string {
	var b strings.Builder
	for i, d := range deleted {
		if b.Len()+len(d)+1 > maxPrunedResult-len(",+0000000 more") {
			fmt.Fprintf(&b, ",+%d more", len(deleted)-i)
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(d)
	}
	return b.String()
}

// DecodePruned reads a ResultPruned back: the objects named and how many
// were deleted in all.
func DecodePruned(s string) (names []string, count int) {
	if s = strings.TrimSpace(s); s == "" {
		return nil, 0
	}
	for _, f := range strings.Split(s, ",") {
		var more int
		if _, err := fmt.Sscanf(f, "+%d more", &more); err == nil && strings.HasPrefix(f, "+") {
			count += more
			continue
		}
		names = append(names, f)
		count++
	}
	return names, count
}

var applyManifestsDef = Def{
	Name:  "apply-manifests",
	Short: "Render a git application's manifests at a commit and apply them, with its Flagger Canary, in one cluster",
	Params: []Param{
		{Name: ParamRollout, Required: true, Usage: "rollout id"},
		{Name: ParamNamespace, Default: "default", Usage: "namespace of the workload (and of rendered objects that name none)"},
		{Name: ParamKind, Default: "Deployment", Usage: "kind of the workload: Deployment or DaemonSet"},
		{Name: ParamWorkload, Required: true, Usage: "name of the workload the canary targets, among the rendered objects"},
		{Name: ParamCanary, Required: true, Usage: "the Flagger Canary, JSON (or YAML); its namespace defaults to --namespace"},
		{Name: ParamObjects, Usage: "objects the canary refers to, a JSON (or YAML) list"},
		{Name: ParamRestart, Usage: "a token set on the pod template (annotation " + AnnotationRestart + ") so Flagger analyses the same commit again: a retry"},
		{Name: ParamGitURL, Required: true, Usage: "the repository to render from"},
		{Name: ParamGitCommit, Required: true, Usage: "the commit to render, its full id"},
		{Name: ParamGitPath, Usage: "files or directories to render, relative to the repository's root, comma-separated"},
		{Name: ParamRender, Default: render.Manifests, Usage: "how: manifests (YAML files), kustomize or helm"},
		{Name: ParamHelm, Usage: `the chart and its values for render helm, a JSON object (fields of render.Chart: Dir, DefaultValues, ValuesFile, Values, ReleaseName)`},
		{Name: ParamAllowedImages, Usage: `image repositories the rendered objects may run, a JSON list of Go regular expressions (each matching a whole repository); empty: any`},
		{Name: ParamApplication, Usage: "the application: its inventory (ConfigMap " + InventoryName("<application>") + " in --namespace) records what each commit applied; empty: none kept, nothing pruned"},
		{Name: ParamMembers, Usage: "a release set's members, a JSON list (application, kind, workload, canary, objects, paths, render, chart, allowedImages, prune each), applied in this order, each once those before it are ready (Jobs complete, canaries promoted); --workload and --canary are then the lead member's; empty: an application"},
		{Name: ParamPrune, Default: PruneOff, Usage: "what becomes of the objects an earlier commit applied and this one no longer renders: false (left), true (deleted once the cluster succeeded, by a run of pending), now (deleted after the apply: a revert), pending (apply nothing: delete those the commit left pending)"},
	},
	Results: []string{ResultPreviousRevision, ResultChanged, ResultPruned, ResultPreviousMembers},
	Cluster: true,
	Git:     true,
	Run:     runApplyManifests,
}

// ApplyManifestsParams says what to render and apply in one cluster.
type ApplyManifestsParams struct {
	Rollout   string
	Namespace string
	Kind      string
	Workload  string
	Canary    *flaggerv1.Canary
	Objects   []*unstructured.Unstructured
	Restart   string
	URL       string
	Commit    string
	Paths     []string
	Render    string
	Chart     *render.Chart
	// AllowedImages, when set, refuses a commit whose objects run an
	// image outside them (render.CheckImages), before anything is applied.
	AllowedImages []string
	// Application names the inventory (InventoryName) the objects are
	// recorded in; "" keeps none and prunes nothing.
	Application string
	// Prune is one of the Prune* values; "" is PruneOff.
	Prune string
	// Members, set for a release set, are applied in order instead of
	// one application's objects (applySet): Workload and Canary are the
	// lead's, Application the set's.
	Members []SetMember
}

// Revision is what a git application's workload carries in annotation
// canary.AnnotationRevision: the repository (without credentials) and the
// commit, as the rollout's reference names them.
func Revision(url, commit string) string { return config.DisplayURL(url) + "@" + commit }

func runApplyManifests(ctx context.Context, env Env, p Params) (Results, error) {
	ap, err := ApplyManifestsParamsFrom(p)
	if err != nil {
		return nil, err
	}
	cfg, err := env.Cluster()
	if err != nil {
		return nil, err
	}
	var auth gitops.Auth
	if env.GitAuth != nil {
		if auth, err = env.GitAuth(ap.URL); err != nil {
			return nil, err
		}
	}
	res, err := ApplyManifests(ctx, cfg, env.Mirror, gitops.Repo{URL: ap.URL, Auth: auth}, ap)
	if err != nil {
		return nil, err
	}
	members, err := EncodePreviousMembers(res.PreviousMembers)
	if err != nil {
		return nil, err
	}
	return Results{ResultPreviousRevision: res.PreviousImage, ResultChanged: strconv.FormatBool(res.Changed), ResultPruned: EncodePruned(res.Pruned),
		ResultPreviousMembers: members}, nil
}

// ApplyManifestsParamsFrom decodes the apply-manifests task's params.
func ApplyManifestsParamsFrom(p Params) (ApplyManifestsParams, error) {
	cp, err := ApplyCanaryParamsFrom(Params{
		ParamRollout: p[ParamRollout], ParamNamespace: p[ParamNamespace], ParamKind: p[ParamKind], ParamWorkload: p[ParamWorkload],
		ParamCanary: p[ParamCanary], ParamObjects: p[ParamObjects], ParamRestart: p[ParamRestart], ParamImage: "-",
	})
	if err != nil {
		return ApplyManifestsParams{}, err
	}
	ap := ApplyManifestsParams{
		Rollout: cp.Rollout, Namespace: cp.Namespace, Kind: cp.Kind, Workload: cp.Workload, Canary: cp.Canary,
		Objects: cp.Objects, Restart: cp.Restart, URL: p[ParamGitURL], Commit: p[ParamGitCommit], Render: p[ParamRender],
		Application: p[ParamApplication], Prune: p[ParamPrune],
	}
	switch ap.Prune {
	case "", PruneOff, PruneAfter, PruneNow, PrunePending:
	default:
		return ap, fault.Permanent(fmt.Errorf("--%s %q: want %s, %s, %s or %s", ParamPrune, ap.Prune, PruneOff, PruneAfter, PruneNow, PrunePending))
	}
	if ap.Members, err = decodeMembers(p[ParamMembers]); err != nil {
		return ap, err
	}
	for _, s := range strings.Split(p[ParamGitPath], ",") {
		if s = strings.TrimSpace(s); s != "" {
			ap.Paths = append(ap.Paths, s)
		}
	}
	if h := p[ParamHelm]; h != "" {
		ap.Chart = new(render.Chart)
		if err := json.Unmarshal([]byte(h), ap.Chart); err != nil {
			return ap, fault.Permanent(fmt.Errorf("--%s: %w", ParamHelm, err))
		}
	}
	if a := p[ParamAllowedImages]; a != "" {
		if err := json.Unmarshal([]byte(a), &ap.AllowedImages); err != nil {
			return ap, fault.Permanent(fmt.Errorf("--%s: want a JSON list of regular expressions: %w", ParamAllowedImages, err))
		}
	}
	if ap.URL == "" || ap.Commit == "" {
		return ap, fault.Permanent(fmt.Errorf("--%s and --%s are required", ParamGitURL, ParamGitCommit))
	}
	return ap, nil
}

// ApplyManifests checks out the commit (through mirror; nil: a copy of its
// own, removed after), renders the cluster's objects, marks the workload's
// pod template with the revision (so the commit is a new revision Flagger
// analyses, and the primary shows which commit it runs) and applies the
// canary's objects, the Canary, then the rendered objects server-side. The
// result's PreviousImage is the revision the primary ran (the last one
// Flagger promoted), else the workload's.
func ApplyManifests(ctx context.Context, cfg *rest.Config, mirror *gitops.Mirror, repo gitops.Repo, p ApplyManifestsParams) (ApplyCanaryResult, error) {
	var res ApplyCanaryResult
	// A release set's prune: each member's inventory (every member's
	// Prune is PrunePending then).
	if len(p.Members) > 0 && p.Members[0].Prune == PrunePending {
		for _, m := range p.Members {
			pruned, err := prunePending(ctx, cfg, memberParams(p, m), Revision(repo.URL, p.Commit))
			res.Pruned = append(res.Pruned, pruned...)
			if err != nil {
				return res, err
			}
		}
		return res, nil
	}
	if p.Prune == PrunePending {
		var err error
		res.Pruned, err = prunePending(ctx, cfg, p, Revision(repo.URL, p.Commit))
		return res, err
	}
	work, err := os.MkdirTemp("", "flotilla-render-")
	if err != nil {
		return res, err
	}
	defer func() { _ = os.RemoveAll(work) }()
	if mirror == nil {
		mirror = gitops.NewMirror(work + "/mirror")
	}
	tree := work + "/tree"
	if err := mirror.Checkout(ctx, repo, p.Commit, tree); err != nil {
		return res, err
	}
	if len(p.Members) > 0 {
		return applySet(ctx, cfg, tree, Revision(repo.URL, p.Commit), p)
	}
	if p.Chart != nil && p.Chart.Namespace == "" {
		p.Chart.Namespace = p.Namespace
	}
	objs, err := render.RenderContext(ctx, render.Request{Dir: tree, Kind: p.Render, Paths: p.Paths, Chart: p.Chart})
	if err != nil {
		return res, err
	}
	if err := render.CheckImages(objs, p.AllowedImages); err != nil {
		return res, err
	}
	kind := kindOr(p.Kind)
	var target *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == p.Workload && (o.GetNamespace() == "" || o.GetNamespace() == p.Namespace) {
			target = o
		}
	}
	if target == nil {
		return res, fault.Permanent(fmt.Errorf("%w: commit %s renders no %s %s/%s, the canary's target", render.ErrRender, p.Commit, kind, p.Namespace, p.Workload))
	}
	others, err := releaseWorkloads(objs, target, p.Namespace)
	if err != nil {
		return res, fault.Permanent(fmt.Errorf("%w: commit %s: %w", render.ErrRender, p.Commit, err))
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return res, fmt.Errorf("creating kubernetes client: %w", err)
	}
	revision := Revision(repo.URL, p.Commit)
	current, err := currentRevision(ctx, kube, p)
	if err != nil {
		return res, err
	}
	res.PreviousImage = current.previous(p.Rollout)
	res.Changed = current.revision != revision || p.Restart != "" && p.Restart != current.restart
	template := map[string]string{canary.AnnotationRevision: revision}
	if p.Restart != "" {
		template[AnnotationRestart] = p.Restart
	}
	// Every workload of the release carries the revision (and a retry's
	// restart): each is a new revision its own canary analyses, and each
	// primary shows the commit it was promoted to.
	for _, w := range append([]*unstructured.Unstructured{target}, others...) {
		for k, v := range template {
			if err := unstructured.SetNestedField(w.Object, v, "spec", "template", "metadata", "annotations", k); err != nil {
				return res, fault.Permanent(fmt.Errorf("%w: %s %s: %w", render.ErrRender, w.GetKind(), w.GetName(), err))
			}
		}
	}
	p.Canary = p.Canary.DeepCopy() // the release's list goes on it: the caller's stays as it was
	canaries, err := releaseCanaries(p.Canary, others)
	if err != nil {
		return res, err
	}
	objs = append(objs, canaries...)
	ann := target.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationRollout], ann[AnnotationPreviousImage] = p.Rollout, res.PreviousImage
	target.SetAnnotations(ann)

	fl, err := flaggerclient.NewForConfig(cfg)
	if err != nil {
		return res, fmt.Errorf("creating flagger client: %w", err)
	}
	if err := applyPolicy(ctx, cfg, fl, p.Namespace, p.Objects, p.Canary); err != nil {
		return res, err
	}
	res.Pruned, err = applyObjects(ctx, cfg, kube, p, revision, objs, false)
	return res, err
}

func kindOr(kind string) string {
	if kind == "" {
		return "Deployment"
	}
	return kind
}

// applyObjects applies the rendered objects with Flux's server-side apply
// manager (a dry run first: unchanged objects are not written; CRDs and
// Namespaces first, waited for; then by kind, ConfigMaps, Secrets and
// Services before the workloads that refer to them). A namespaced object
// that names no namespace goes to p.Namespace. With p.Application set,
// each object carries LabelApplication and the application's inventory
// records them; the objects an earlier commit applied and this one no
// longer renders are left pending (PruneAfter), deleted (PruneNow) or
// forgotten (PruneOff). With force, an object whose immutable fields
// changed (a Job's template) is deleted and created again, as Flux's
// Kustomization force does.
func applyObjects(ctx context.Context, cfg *rest.Config, kube kubernetes.Interface, p ApplyManifestsParams, revision string, objs []*unstructured.Unstructured, force bool) (pruned []string, _ error) {
	rm, c, err := resourceManager(cfg)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		namespaced, err := c.IsObjectNamespaced(o)
		if meta.IsNoMatchError(err) {
			return nil, fault.Permanent(fmt.Errorf("applying %s %s: the cluster does not serve %s", gvk.Kind, o.GetName(), gvk))
		}
		if err != nil {
			return nil, fmt.Errorf("mapping %s: %w", gvk, err)
		}
		if namespaced && o.GetNamespace() == "" {
			o.SetNamespace(p.Namespace)
		}
		if p.Application != "" {
			labels := o.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			labels[LabelApplication] = p.Application
			o.SetLabels(labels)
		}
	}
	opts := ssa.DefaultApplyOptions()
	opts.Force = force
	if _, err := rm.ApplyAllStaged(ctx, objs, opts); err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) {
			return nil, fault.Permanent(fmt.Errorf("applying: %w", err))
		}
		return nil, fmt.Errorf("applying: %w", err)
	}
	if p.Application == "" {
		return nil, nil
	}
	inv, err := ReadInventory(ctx, kube, p.Namespace, p.Application)
	if err != nil {
		return nil, err
	}
	applied := entriesOf(objs)
	gone := stale(append(inv.Entries, inv.Pending...), applied)
	next := Inventory{Revision: revision, Entries: applied}
	switch p.Prune {
	case PruneAfter:
		next.Pending = gone
	case PruneNow:
		if pruned, err = prune(ctx, rm, p.Application, gone); err != nil {
			return pruned, err
		}
	}
	return pruned, writeInventory(ctx, kube, p.Namespace, p.Application, next)
}

// prunePending deletes the objects p.Application's inventory holds pending
// when it is still revision's (else a newer apply, or a revert, took them
// over: nothing to do) and clears them from it.
func prunePending(ctx context.Context, cfg *rest.Config, p ApplyManifestsParams, revision string) ([]string, error) {
	if p.Application == "" {
		return nil, fault.Permanent(fmt.Errorf("--%s %s needs --%s", ParamPrune, PrunePending, ParamApplication))
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating kubernetes client: %w", err)
	}
	inv, err := ReadInventory(ctx, kube, p.Namespace, p.Application)
	if err != nil || inv.Revision != revision || len(inv.Pending) == 0 {
		return nil, err
	}
	rm, _, err := resourceManager(cfg)
	if err != nil {
		return nil, err
	}
	pruned, err := prune(ctx, rm, p.Application, inv.Pending)
	if err != nil {
		return pruned, err
	}
	inv.Pending = nil
	return pruned, writeInventory(ctx, kube, p.Namespace, p.Application, inv)
}

// liveRevision is what a git application's workload and its primary carry.
type liveRevision struct {
	revision, primary, restart string
	rollout, previousOfRollout string
}

// previous is the revision to roll back to: what the primary runs (the last
// commit Flagger promoted), else the workload's; a re-run of the same
// rollout keeps what its first run recorded.
func (l liveRevision) previous(rollout string) string {
	if l.rollout == rollout && l.previousOfRollout != "" {
		return l.previousOfRollout
	}
	if l.primary != "" {
		return l.primary
	}
	return l.revision
}

// currentRevision reads the revisions of the workload and its primary (""
// where there is none yet: a first deployment creates the workload).
func currentRevision(ctx context.Context, kube kubernetes.Interface, p ApplyManifestsParams) (liveRevision, error) {
	var l liveRevision
	om, tmpl, err := readWorkload(ctx, kube, p.Kind, p.Namespace, p.Workload)
	switch {
	case apierrors.IsNotFound(err):
		return l, nil
	case err != nil:
		return l, fmt.Errorf("reading %s/%s: %w", p.Namespace, p.Workload, err)
	}
	l.revision, l.restart = tmpl.Annotations[canary.AnnotationRevision], tmpl.Annotations[AnnotationRestart]
	l.rollout, l.previousOfRollout = om.Annotations[AnnotationRollout], om.Annotations[AnnotationPreviousImage]
	_, ptmpl, err := readWorkload(ctx, kube, p.Kind, p.Namespace, p.Workload+"-primary")
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return l, fmt.Errorf("reading %s/%s-primary: %w", p.Namespace, p.Workload, err)
	default:
		l.primary = ptmpl.Annotations[canary.AnnotationRevision]
	}
	return l, nil
}

// releaseWorkloads returns the Deployments and DaemonSets objs renders
// besides target, by name: each gets a canary of its own. One in another
// namespace than the application's is refused: the release is judged by
// its canaries in the application's namespace.
func releaseWorkloads(objs []*unstructured.Unstructured, target *unstructured.Unstructured, namespace string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o == target || o.GetAPIVersion() != "apps/v1" || o.GetKind() != "Deployment" && o.GetKind() != "DaemonSet" {
			continue
		}
		if ns := o.GetNamespace(); ns != "" && ns != namespace {
			return nil, fmt.Errorf("it renders %s %s/%s, outside the application's namespace %s: every workload of a release is canaried there", o.GetKind(), ns, o.GetName(), namespace)
		}
		if o.GetName() == target.GetName() {
			return nil, fmt.Errorf("it renders a %s and a %s both named %s: each workload's canary is named after it", o.GetKind(), target.GetKind(), o.GetName())
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, nil
}

// releaseCanaries gives each of others a Canary with c's delivery policy
// (canary.ForWorkload), applied and kept in the inventory with the
// rendered objects (pruned with its workload), and lists the release's
// workloads on c (canary.AnnotationWorkloads) for the cluster readers;
// none for a release of one workload.
func releaseCanaries(c *flaggerv1.Canary, others []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	delete(c.Annotations, canary.AnnotationWorkloads)
	if len(others) == 0 {
		return nil, nil
	}
	names := []string{c.Name}
	var out []*unstructured.Unstructured
	for _, w := range others {
		wc := canary.ForWorkload(c, w.GetKind(), w.GetName())
		wc.TypeMeta = metav1.TypeMeta{APIVersion: flaggerv1.SchemeGroupVersion.String(), Kind: flaggerv1.CanaryKind}
		u, err := canary.Unstructured(wc)
		if err != nil {
			return nil, fmt.Errorf("encoding the canary of %s: %w", w.GetName(), err)
		}
		out = append(out, u)
		names = append(names, w.GetName())
	}
	c.Annotations[canary.AnnotationWorkloads] = strings.Join(names, ",")
	return out, nil
}
