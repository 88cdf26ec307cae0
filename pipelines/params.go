package pipelines

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Params and results of the flotilla-rollout Pipeline that are not params
// of a task command (those are the tasks.Param* names).
const (
	ParamApplication      = tasks.ParamApplication
	ParamKubeconfigSecret = "kubeconfig-secret"
	ParamGitOps           = "gitops"
	ParamGitSecret        = "git-secret"
	ParamGitImage         = "git-image"

	ParamSource         = "source"
	ResultPreviousImage = tasks.ResultPreviousImage
	ResultChanged       = tasks.ResultChanged
	ResultCommit        = tasks.ResultCommit
	// A git application's apply-manifests reports these instead.
	ResultPreviousRevision = tasks.ResultPreviousRevision
	ResultRevisionChanged  = "revision-changed"
	ResultPruned           = tasks.ResultPruned
	ResultPreviousMembers  = tasks.ResultPreviousMembers
	// ResultPreviousMemberRevisions is apply-manifests' previous-members
	// (a set of git and image members' run), apply-canary's being
	// ResultPreviousMembers: a Pipeline's results have one name each.
	ResultPreviousMemberRevisions = "previous-member-revisions"
)

// SetMember is one member of a release set's run, in order: the params
// the apply tasks take for it (their --members). Named here so that the
// run's builder (pipelines/deliver) builds RunParams without the tasks.
type SetMember = tasks.SetMember

// Prune modes of a git application's run (GitRun.Prune): what the
// apply-manifests task does with the objects its commit no longer renders.
const (
	PruneOff     = tasks.PruneOff
	PruneAfter   = tasks.PruneAfter
	PruneNow     = tasks.PruneNow
	PrunePending = tasks.PrunePending
)

// Labels flotilla puts on its PipelineRuns. intake.TektonSender reads
// LabelRollout back from Tekton's CloudEvents.
const (
	LabelRollout     = "flotilla.dev/rollout"
	LabelApplication = "flotilla.dev/application"
)

// LabelCluster names the target cluster on the objects flotilla creates for
// it: kubeconfig Secrets and PipelineRuns.
const LabelCluster = "flotilla.dev/cluster"

// DefaultTimeout bounds one run of the pipeline when RunParams.Timeout is
// zero.
const DefaultTimeout = 15 * time.Minute

// RunParams are the params of one run of the flotilla-rollout Pipeline
// against one cluster.
type RunParams struct {
	Rollout     string
	Application string
	Namespace   string
	Kind        string // of the workload: Deployment (the default) or DaemonSet
	Workload    string
	Container   string // "" = the first container
	Image       string // repo@digest
	Canary      *flaggerv1.Canary
	// Objects are what the canary refers to, applied before it.
	Objects []*unstructured.Unstructured
	// GitOps, when set, bumps the image in the application's deployments
	// repository before the canary is applied.
	GitOps *GitOps
	// Git, set for a git application, renders and applies a commit's
	// manifests (apply-manifests) instead of setting Image; Image is then
	// the revision, repository@commit.
	Git *GitSource
	// Timeout bounds the whole run. Default DefaultTimeout.
	Timeout time.Duration
	// Restart, when set, goes on the workload's pod template: a retry of
	// the same image (see tasks.AnnotationRestart).
	Restart string
	// Members, for a release set of image members, are its members in the
	// order applied, each with its image and canary: apply-canary applies
	// them one after another (tasks.ApplyImageSet); Workload is the
	// lead's.
	Members []tasks.SetMember
}

// GitOps says where an application's image lives in a deployments
// repository.
type GitOps struct {
	// Image is written into the repository, repo:tag@digest so the files
	// and the commit name the version. Default RunParams.Image.
	Image  string
	URL    string
	Branch string // "" = the remote's default branch
	// Paths are the files holding the image.
	Paths []string
	// Edit is tasks.EditKustomize (the default), EditHelm or EditManifest;
	// EditOptions its fields as a JSON object (see gitops.NewEdit).
	Edit        string
	EditOptions string
	// Secret names the Secret holding the repository's credentials, in the
	// namespace the Tekton executor runs pipelines in. Default
	// "flotilla-git". The embedded executor asks its GitAuth instead.
	Secret string
}

// GitSource is the commit a git application's run renders, and how.
type GitSource struct {
	URL    string
	Commit string
	Paths  []string // "{cluster}" replaced
	Render string   // manifests (the default), kustomize or helm
	// Helm is the chart and its values (tasks' render.Chart) as JSON, for
	// render helm.
	Helm string
	// Secret names the Secret holding the repository's credentials, for
	// the Tekton executor. Default "flotilla-git".
	Secret string
	// AllowedImages are the image repositories the rendered objects may
	// run (regular expressions); none: any.
	AllowedImages []string
	// Prune is what becomes of the objects an earlier commit applied and
	// this one no longer renders: one of tasks.Prune* ("" is
	// tasks.PruneOff).
	Prune string
	// Members, for a release set, are its members in the order applied
	// (each with its own paths, render and prune): the run applies them
	// one after another instead of Paths.
	Members []tasks.SetMember
}

// Results are what a run reports.
type Results struct {
	// PreviousImage is the image the workload ran before the rollout.
	PreviousImage string `json:"previousImage"`
	// Changed tells whether the workload's image changed.
	Changed bool `json:"changed"`
	// Commit is the deployments repository's commit (GitOps only).
	Commit string `json:"commit,omitempty"`
	// Pruned names what the run deleted because the commit no longer
	// renders it (git applications that prune), PrunedCount how many in
	// all (the names stop at a size: tasks.EncodePruned).
	Pruned      []string `json:"pruned,omitempty"`
	PrunedCount int      `json:"prunedCount,omitempty"`
	// PreviousMembers, of a release set of image members, is what each
	// member the run set ran before, by member.
	PreviousMembers map[string]string `json:"previousMembers,omitempty"`
}

// FromApplyCanary turns the params of an apply-canary into a run of the
// pipeline without GitOps.
func FromApplyCanary(p tasks.ApplyCanaryParams) RunParams {
	return RunParams{
		Rollout: p.Rollout, Namespace: p.Namespace, Kind: p.Kind, Workload: p.Workload,
		Container: p.Container, Image: p.Image, Canary: p.Canary, Objects: p.Objects,
		Restart: p.Restart, Members: p.Members,
	}
}

// PipelineParams encodes p as the Pipeline's params (all strings), without
// ParamKubeconfigSecret, which depends on the executor.
func (p RunParams) PipelineParams() (map[string]string, error) {
	if p.Canary == nil {
		return nil, fault.Permanent(fmt.Errorf("run of rollout %s: no canary", p.Rollout))
	}
	tp, err := tasks.ApplyCanaryParams{
		Rollout: p.Rollout, Namespace: p.Namespace, Kind: p.Kind, Workload: p.Workload,
		Container: p.Container, Image: p.Image, Canary: p.Canary, Objects: p.Objects,
		Restart: p.Restart, Members: p.Members,
	}.ParamsOf()
	if err != nil {
		return nil, fault.Permanent(err)
	}
	out := map[string]string(tp)
	if out[tasks.ParamNamespace] == "" {
		out[tasks.ParamNamespace] = "default"
	}
	if out[tasks.ParamKind] == "" {
		out[tasks.ParamKind] = "Deployment"
	}
	out[ParamApplication] = p.Application
	out[ParamGitOps] = strconv.FormatBool(p.GitOps != nil)
	out[ParamSource] = "image"
	if g := p.Git; g != nil {
		out[ParamSource] = "git"
		out[tasks.ParamGitURL], out[tasks.ParamGitCommit] = g.URL, g.Commit
		out[tasks.ParamGitPath] = strings.Join(g.Paths, ",")
		out[tasks.ParamRender] = cmp.Or(g.Render, "manifests")
		out[tasks.ParamHelm] = g.Helm
		out[ParamGitSecret] = cmp.Or(g.Secret, "flotilla-git")
		out[tasks.ParamAllowedImages] = ""
		out[tasks.ParamPrune] = cmp.Or(g.Prune, tasks.PruneOff)
		members, err := tasks.EncodeMembers(g.Members)
		if err != nil {
			return nil, fault.Permanent(err)
		}
		out[tasks.ParamMembers] = members
		if len(g.AllowedImages) > 0 {
			b, err := json.Marshal(g.AllowedImages)
			if err != nil {
				return nil, fault.Permanent(fmt.Errorf("allowed images: %w", err))
			}
			out[tasks.ParamAllowedImages] = string(b)
		}
	}
	if g := p.GitOps; g != nil {
		out[ParamGitImage] = g.Image
		if g.Image == "" {
			out[ParamGitImage] = p.Image
		}
		out[tasks.ParamGitURL] = g.URL
		out[tasks.ParamGitBranch] = g.Branch
		out[tasks.ParamGitPath] = strings.Join(g.Paths, ",")
		out[tasks.ParamGitEdit] = g.Edit
		if g.Edit == "" {
			out[tasks.ParamGitEdit] = tasks.EditKustomize
		}
		out[tasks.ParamGitEditOptions] = g.EditOptions
		out[ParamGitSecret] = g.Secret
		if g.Secret == "" {
			out[ParamGitSecret] = "flotilla-git"
		}
	}
	return out, nil
}

// ResultsFrom decodes the Pipeline's results.
func ResultsFrom(m map[string]string) (Results, error) {
	r := Results{PreviousImage: cmp.Or(m[ResultPreviousImage], m[ResultPreviousRevision]), Commit: m[ResultCommit]}
	r.Pruned, r.PrunedCount = tasks.DecodePruned(m[ResultPruned])
	members, err := tasks.DecodePreviousMembers(cmp.Or(m[ResultPreviousMembers], m[ResultPreviousMemberRevisions]))
	if err != nil {
		return r, err
	}
	r.PreviousMembers = members
	v, ok := m[ResultChanged]
	if !ok {
		v, ok = m[ResultRevisionChanged]
	}
	if ok {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return r, fmt.Errorf("result %s = %q: %w", ResultChanged, v, err)
		}
		r.Changed = b
	}
	return r, nil
}

// RunName names the run of p in a cluster (see RunName).
func (p RunParams) RunName(cluster string) string {
	if p.Restart != "" {
		// A user's retry is a run of its own.
		return RunName(p.Rollout, cluster, p.Image+"\x00"+p.Restart)
	}
	return RunName(p.Rollout, cluster, p.Image)
}

// RunName names the run of a rollout's image in a cluster: readable, a
// valid object name, and the same for the same run, so a retried launch
// finds the run it already started.
func RunName(rollout, cluster, image string) string {
	h := sha256.Sum256([]byte(rollout + "\x00" + cluster + "\x00" + image))
	base := DNSLabel(rollout + "-" + cluster)
	if len(base) > 40 {
		base = strings.TrimRight(base[:40], "-")
	}
	if base == "" {
		base = "flotilla"
	}
	return base + "-" + hex.EncodeToString(h[:])[:8]
}

// DNSLabel lowercases s and replaces what a DNS label may not hold by '-'.
func DNSLabel(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '-'
		}
	}
	return strings.Trim(string(b), "-")
}

// LabelValue is s if it is a valid label value, else a valid value derived
// from it (truncated, with a hash of the whole).
func LabelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	h := sha256.Sum256([]byte(s))
	base := DNSLabel(s)
	if len(base) > 50 {
		base = strings.TrimRight(base[:50], "-")
	}
	return strings.TrimLeft(base+"-"+hex.EncodeToString(h[:])[:8], "-")
}
