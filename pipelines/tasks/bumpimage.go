package tasks

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
)

// Names of the bump-image task's params and results (rollout and image are
// shared with apply-canary).
const (
	ParamApplication    = "application"
	ParamGitURL         = "git-url"
	ParamGitBranch      = "git-branch"
	ParamGitPath        = "git-path"
	ParamGitEdit        = "git-edit"
	ParamGitEditOptions = "git-edit-options"

	ResultCommit = "commit"
	// ResultChanged ("true" when a commit was pushed) is shared with
	// apply-canary.
)

// Edit kinds of the git-edit param, one per pkg/gitops edit.
const (
	EditKustomize = gitops.EditKustomize
	EditHelm      = gitops.EditHelm
	EditManifest  = gitops.EditManifest
)

var bumpImageDef = Def{
	Name:  "bump-image",
	Short: "Write an image into a deployments git repository, commit naming the rollout and version, and push",
	Params: []Param{
		{Name: ParamRollout, Usage: "rollout id, for the commit message"},
		{Name: ParamApplication, Usage: "application, for the commit message (default: the image's last path element)"},
		{Name: ParamImage, Required: true, Usage: "image to write, repo[:tag][@digest]"},
		{Name: ParamGitURL, Required: true, Usage: "deployments repository to clone and push to"},
		{Name: ParamGitBranch, Usage: "branch to bump (default: the remote's default branch)"},
		{Name: ParamGitPath, Required: true, Usage: "file(s) to edit, relative to the repository's root, comma-separated"},
		{Name: ParamGitEdit, Default: EditKustomize, Usage: "how to edit the file: kustomize (images:), helm (values), manifest (containers)"},
		{Name: ParamGitEditOptions, Usage: `options of the edit as a JSON object, e.g. {"tagValue":"api.image.tag"} for helm ` +
			`(fields of pkg/gitops.Kustomize, HelmValues or Manifest)`},
	},
	Results: []string{ResultCommit, ResultChanged},
	Git:     true,
	Run:     runBumpImage,
}

// BumpImageParams says what to bump in a deployments repository.
type BumpImageParams struct {
	Rollout     string
	Application string
	Image       string
	URL         string
	Branch      string
	Paths       []string
	Edit        string
	// EditOptions are the fields of the edit (pkg/gitops.Kustomize,
	// HelmValues or Manifest) as a JSON object; empty for the defaults.
	EditOptions string
}

// BumpImageResult is what the bump-image task reports.
type BumpImageResult struct {
	Commit  string `json:"commit"`
	Changed bool   `json:"changed"`
}

func runBumpImage(ctx context.Context, env Env, p Params) (Results, error) {
	bp := BumpImageParams{
		Rollout: p[ParamRollout], Application: p[ParamApplication], Image: p[ParamImage],
		URL: p[ParamGitURL], Branch: p[ParamGitBranch], Edit: p[ParamGitEdit], EditOptions: p[ParamGitEditOptions],
	}
	for path := range strings.SplitSeq(p[ParamGitPath], ",") {
		if path = strings.TrimSpace(path); path != "" {
			bp.Paths = append(bp.Paths, path)
		}
	}
	var auth gitops.Auth
	if env.GitAuth != nil {
		var err error
		if auth, err = env.GitAuth(bp.URL); err != nil {
			return nil, err
		}
	}
	res, err := BumpImage(ctx, auth, bp)
	if err != nil {
		return nil, err
	}
	return Results{ResultCommit: res.Commit, ResultChanged: strconv.FormatBool(res.Changed)}, nil
}

// BumpImage writes p.Image into p.Paths of the repository with
// pkg/gitops.Bump: clone, edit, commit (a message naming the application,
// version and rollout) and push. Bumping again to the same image pushes
// nothing.
func BumpImage(ctx context.Context, auth gitops.Auth, p BumpImageParams, opts ...gitops.Option) (BumpImageResult, error) {
	img, err := gitops.ParseImage(p.Image)
	if err != nil {
		return BumpImageResult{}, fault.Permanent(fmt.Errorf("image %q: %w", p.Image, err))
	}
	edit, err := gitops.NewEdit(p.Edit, p.EditOptions)
	if err != nil {
		return BumpImageResult{}, err
	}
	c := gitops.Change{App: p.Application, Rollout: p.Rollout, Image: img}
	for _, path := range p.Paths {
		c.Files = append(c.Files, gitops.File{Path: path, Edit: edit})
	}
	res, err := gitops.Bump(ctx, gitops.Repo{URL: p.URL, Branch: p.Branch, Auth: auth}, c, opts...)
	if err != nil {
		return BumpImageResult{}, fmt.Errorf("bumping %s in %s: %w", p.Image, p.URL, err)
	}
	return BumpImageResult{Commit: res.Commit, Changed: res.Changed}, nil
}
