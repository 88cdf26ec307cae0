package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	flaggerclient "github.com/fluxcd/flagger/pkg/client/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

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

	// ResultPreviousRevision is the revision (repository@commit) the
	// workload ran before.
	ResultPreviousRevision = "previous-revision"
)

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
	},
	Results: []string{ResultPreviousRevision, ResultChanged},
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
	return Results{ResultPreviousRevision: res.PreviousImage, ResultChanged: strconv.FormatBool(res.Changed)}, nil
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
	if p.Chart != nil && p.Chart.Namespace == "" {
		p.Chart.Namespace = p.Namespace
	}
	objs, err := render.Render(render.Request{Dir: tree, Kind: p.Render, Paths: p.Paths, Chart: p.Chart})
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
	for k, v := range template {
		if err := unstructured.SetNestedField(target.Object, v, "spec", "template", "metadata", "annotations", k); err != nil {
			return res, fault.Permanent(fmt.Errorf("%w: %s %s: %w", render.ErrRender, kind, p.Workload, err))
		}
	}
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
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return res, fmt.Errorf("creating dynamic client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return res, fmt.Errorf("creating discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	// The workload last: what it refers to (ConfigMaps, Secrets) is there
	// when its new revision starts.
	for _, o := range append(without(objs, target), target) {
		if err := applyRendered(ctx, dyn, mapper, p.Namespace, o); err != nil {
			return res, err
		}
	}
	return res, nil
}

func kindOr(kind string) string {
	if kind == "" {
		return "Deployment"
	}
	return kind
}

func without(objs []*unstructured.Unstructured, x *unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if o != x {
			out = append(out, o)
		}
	}
	return out
}

// applyRendered applies one rendered object server-side; a namespaced one
// that names no namespace goes to namespace.
func applyRendered(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, namespace string, o *unstructured.Unstructured) error {
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return fault.Permanent(fmt.Errorf("applying %s %s: the cluster does not serve %s", gvk.Kind, o.GetName(), gvk))
	}
	if err != nil {
		return fmt.Errorf("mapping %s: %w", gvk, err)
	}
	var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
	where := o.GetName()
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if o.GetNamespace() == "" {
			o.SetNamespace(namespace)
		}
		ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		where = o.GetNamespace() + "/" + o.GetName()
	}
	body, err := o.MarshalJSON()
	if err != nil {
		return fmt.Errorf("encoding %s %s: %w", gvk.Kind, where, err)
	}
	force := true
	_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) {
		return fault.Permanent(fmt.Errorf("applying %s %s: %w", gvk.Kind, where, err))
	}
	if err != nil {
		return fmt.Errorf("applying %s %s: %w", gvk.Kind, where, err)
	}
	return nil
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
	ann, tmpl, err := readWorkload(ctx, kube, p.Kind, p.Namespace, p.Workload)
	switch {
	case apierrors.IsNotFound(err):
		return l, nil
	case err != nil:
		return l, fmt.Errorf("reading %s/%s: %w", p.Namespace, p.Workload, err)
	}
	l.revision, l.restart = tmpl.Annotations[canary.AnnotationRevision], tmpl.Annotations[AnnotationRestart]
	l.rollout, l.previousOfRollout = ann[AnnotationRollout], ann[AnnotationPreviousImage]
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
