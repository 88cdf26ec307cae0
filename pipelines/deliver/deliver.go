package deliver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/render"
)

// Hooks builds the event hook a canary reports to, for a cluster and rollout.
type Hooks func(cluster, rolloutID string) canary.EventHook

// Executor runs the flotilla-rollout Pipeline against one cluster
// (pipelines/embedded, pipelines/tektonrun). Errors are fault.IsPermanent
// when retrying cannot help.
type Executor interface {
	Run(ctx context.Context, cluster string, p pipelines.RunParams) (pipelines.Results, error)
}

// Deliverer renders and applies one cluster.
type Deliverer struct {
	cfg   config.Provider
	exec  Executor
	hooks Hooks
}

// New returns a Deliverer applying through exec.
func New(cfg config.Provider, exec Executor, hooks Hooks) *Deliverer {
	return &Deliverer{cfg: cfg, exec: exec, hooks: hooks}
}

// Result is what a run reports of the workload.
type Result struct {
	// PreviousImage is what the workload ran before the rollout.
	PreviousImage string
	// Changed tells whether the run changed the workload.
	Changed bool
	// Pruned names what the run deleted because the commit no longer
	// renders it, PrunedCount how many in all.
	Pruned      []string
	PrunedCount int
	// PreviousMembers, of a release set of image members, is what each
	// member the run set ran before, by member.
	PreviousMembers map[string]string
}

// Deliver runs the pipeline the request asks for. Errors are permanent when
// retrying cannot help (see fault.IsPermanent).
func (d *Deliverer) Deliver(ctx context.Context, req events.PipelineRunRequested) (Result, error) {
	app, ok := d.cfg.Current().Application(req.Application)
	if !ok {
		return Result{}, fault.Permanent(fmt.Errorf("application %q is no longer configured", req.Application))
	}
	revert := req.Purpose == events.PurposeRevert
	objs := canary.Render(app, canary.Input{
		Instance: d.cfg.Current().Server.Instance,
		Cluster:  req.Cluster, Rollout: req.RolloutID, Event: d.hooks(req.Cluster, req.RolloutID),
		SkipAnalysis: revert,
	})
	deps, err := objs.Dependencies()
	if err != nil {
		return Result{}, fault.Permanent(fmt.Errorf("rendering the delivery policy: %w", err))
	}
	id := req.RolloutID
	if revert {
		id += "-revert"
	}
	// The executor's parameters, built once here: the executors encode
	// them as the Pipeline's params.
	p := pipelines.RunParams{
		Rollout:   id,
		Namespace: app.Namespace,
		Kind:      app.Workload.Kind,
		Workload:  app.Workload.Name,
		Container: app.Workload.Container,
		Image:     req.Image,
		Canary:    objs.Canary,
		Objects:   deps,
		Restart:   req.Restart,
	}
	// A git application renders and applies the commit (its previous one,
	// on a revert) instead of setting an image.
	ref := req.Image
	if app.Set != nil && app.Set.Mixed() {
		// A set of git and image members: the commit is its git
		// members' entry of the request's version (repository@commit).
		if ref, err = setCommit(app, req); err != nil {
			return Result{}, err
		}
	}
	src, err := pipelines.GitSourceFor(app, req.Cluster, ref)
	if err != nil {
		return Result{}, err
	}
	if src != nil {
		p.Application, p.Git = app.Name, src
		// What the commit no longer renders waits for the cluster's
		// success (Prune); a revert has no analysis to wait for.
		src.Prune = pruneMode(app, revert)
	}
	switch {
	case app.Set != nil && src == nil:
		// A release set of image members: each its image of the
		// request's version, in order (reversed for a revert).
		if p, err = d.imageSetRun(p, app, req, revert); err != nil {
			return Result{}, err
		}
	case app.Set != nil:
		// A release set: its members in dependsOn order (reversed for a
		// revert), each its own canary; the run waits for each.
		if p, err = d.setRun(p, app, req, ref, revert); err != nil {
			return Result{}, err
		}
	}
	// A GitOps application gets the image with its tag (the previous one,
	// on a revert) into its repository first: else the GitOps agent would
	// apply another.
	// In mode pullRequest the wave's merged pull request wrote the files
	// (and a rollback's pull request writes them back, unless its revert
	// is a commit): the run only applies.
	g, err := pipelines.GitOpsFor(app, req.Cluster)
	if err != nil {
		return Result{}, err
	}
	if g != nil && !byPullRequest(app, req.Purpose) {
		g.Image = pipelines.GitImage(req.Image, req.Tag)
		p.Application, p.GitOps = app.Name, g
	}
	res, err := d.exec.Run(ctx, req.Cluster, p)
	if err != nil {
		return Result{}, err
	}
	return Result{PreviousImage: res.PreviousImage, Changed: res.Changed, Pruned: res.Pruned, PrunedCount: res.PrunedCount, PreviousMembers: res.PreviousMembers}, nil
}

// Prune deletes from cluster what the rollout's commit (ref, repository@
// commit) no longer renders and an earlier commit applied there, once the
// cluster succeeded: a run of the pipeline with prune "pending". Nothing
// for an application that is not a git one or does not prune.
func (d *Deliverer) Prune(ctx context.Context, application, cluster, rolloutID, ref string) (Result, error) {
	app, ok := d.cfg.Current().Application(application)
	if !ok || app.Git() == nil || app.Set == nil && !app.Git().Prunes() {
		return Result{}, nil
	}
	src, err := pipelines.GitSourceFor(app, cluster, ref)
	if err != nil {
		return Result{}, err
	}
	src.Prune = pipelines.PrunePending
	if app.Set != nil {
		// Each member prunes its own inventory, those that prune.
		for _, sm := range app.Set.Members {
			m, ok := d.cfg.Current().Application(sm.Name)
			if ok && m.Git() != nil && m.Git().Prunes() {
				src.Members = append(src.Members, pipelines.SetMember{Application: m.Name, Kind: m.Workload.Kind, Workload: m.Workload.Name, Prune: pipelines.PrunePending})
			}
		}
		if len(src.Members) == 0 {
			return Result{}, nil
		}
	}
	objs := canary.Render(app, canary.Input{Instance: d.cfg.Current().Server.Instance, Cluster: cluster, Rollout: rolloutID, Event: d.hooks(cluster, rolloutID)})
	// Its own run (name): not the apply's, which the Tekton executor
	// would find done.
	res, err := d.exec.Run(ctx, cluster, pipelines.RunParams{
		Rollout: rolloutID + "-prune", Application: app.Name, Namespace: app.Namespace, Kind: app.Workload.Kind,
		Workload: app.Workload.Name, Image: ref, Canary: objs.Canary, Git: src,
	})
	return Result{Pruned: res.Pruned, PrunedCount: res.PrunedCount}, err
}

// pruneMode is what a git application's apply does with what its commit
// no longer renders (pipelines.Prune*).
func pruneMode(app config.Application, revert bool) string {
	switch {
	case !app.Git().Prunes():
		return pipelines.PruneOff
	case revert:
		return pipelines.PruneNow
	}
	return pipelines.PruneAfter
}

// setRun makes p, the run of release set app's lead at ref (repository@
// commit), the set's: its members in order (reversed for a revert:
// dependents go back first), each with its paths, render and prune, a
// member with a canary with its own delivery policy rendered as an
// application's; the lead's canary is the run's. An image member of a set
// of git and image members comes with its entry's image (imageMember), an
// image lead without an entry with its canary only. The
// run's deadline is the set's step deadline (the members' summed).
func (d *Deliverer) setRun(p pipelines.RunParams, app config.Application, req events.PipelineRunRequested, ref string, revert bool) (pipelines.RunParams, error) {
	cfg := d.cfg.Current()
	members := slices.Clone(app.Set.Members)
	if revert {
		slices.Reverse(members)
	}
	for _, sm := range members {
		m, ok := cfg.Application(sm.Name)
		if !ok {
			return p, fault.Permanent(fmt.Errorf("member %q of release set %s is no longer configured", sm.Name, app.Name))
		}
		if sm.Image != "" {
			lead := m.Workload.Name == app.Workload.Name
			tm, ok, err := d.imageMember(m, req, lead, revert)
			if err != nil {
				return p, err
			}
			if lead {
				p.Canary, p.Objects = tm.Canary, tm.Objects
			}
			if ok {
				p.Git.Members = append(p.Git.Members, tm)
			}
			continue
		}
		src, err := pipelines.GitSourceFor(m, req.Cluster, ref)
		if err != nil {
			return p, err
		}
		tm := pipelines.SetMember{
			Application: m.Name, Kind: m.Workload.Kind, Workload: m.Workload.Name,
			Paths: src.Paths, Render: src.Render, AllowedImages: src.AllowedImages, Prune: pruneMode(m, revert),
		}
		if src.Helm != "" {
			tm.Chart = new(render.Chart)
			if err := json.Unmarshal([]byte(src.Helm), tm.Chart); err != nil {
				return p, fault.Permanent(fmt.Errorf("chart of %s: %w", m.Name, err))
			}
		}
		if !sm.Job {
			objs := canary.Render(m, canary.Input{
				Instance: cfg.Server.Instance, Cluster: req.Cluster, Rollout: req.RolloutID,
				Event: d.hooks(req.Cluster, req.RolloutID), SkipAnalysis: revert,
			})
			if tm.Objects, err = objs.Dependencies(); err != nil {
				return p, fault.Permanent(fmt.Errorf("rendering the delivery policy of %s: %w", m.Name, err))
			}
			tm.Canary = objs.Canary
			if m.Workload.Name == app.Workload.Name {
				p.Canary, p.Objects = objs.Canary, tm.Objects
			}
		}
		p.Git.Members = append(p.Git.Members, tm)
	}
	p.Timeout = app.Delivery.StepDeadline()
	return p, nil
}

// imageSetRun makes p, the run of release set app's lead, the run of a
// set of image members: each member the request names a version of
// (req.Members) with its image pinned (repository@digest), its container
// and its own delivery policy's canary, in the set's order (reversed for
// a revert: dependents go back first); a member without a version is left
// as the cluster runs it. The lead is in the run all the same, without an
// image when it has no version (its canary, which lists the set's, is
// applied; its workload is left as the cluster runs it): the cluster is
// judged by its canary. The lead's canary is the run's, the set's step
// deadline its timeout.
func (d *Deliverer) imageSetRun(p pipelines.RunParams, app config.Application, req events.PipelineRunRequested, revert bool) (pipelines.RunParams, error) {
	cfg := d.cfg.Current()
	members := slices.Clone(app.Set.Members)
	if revert {
		slices.Reverse(members)
	}
	versioned := 0
	for _, sm := range members {
		m, ok := cfg.Application(sm.Name)
		if !ok {
			return p, fault.Permanent(fmt.Errorf("member %q of release set %s is no longer configured", sm.Name, app.Name))
		}
		lead := m.Workload.Name == app.Workload.Name
		i := slices.IndexFunc(req.Members, func(v events.MemberImage) bool { return v.Application == sm.Name })
		if i < 0 && !lead {
			continue
		}
		var image string
		if i >= 0 {
			image, versioned = req.Members[i].Ref(), versioned+1
		}
		objs := canary.Render(m, canary.Input{
			Instance: cfg.Server.Instance, Cluster: req.Cluster, Rollout: req.RolloutID,
			Event: d.hooks(req.Cluster, req.RolloutID), SkipAnalysis: revert,
		})
		deps, err := objs.Dependencies()
		if err != nil {
			return p, fault.Permanent(fmt.Errorf("rendering the delivery policy of %s: %w", m.Name, err))
		}
		tm := pipelines.SetMember{
			Application: m.Name, Kind: m.Workload.Kind, Workload: m.Workload.Name, Container: m.Workload.Container,
			Image: image, Canary: objs.Canary, Objects: deps,
		}
		if lead {
			p.Canary, p.Objects = objs.Canary, deps
		}
		p.Members = append(p.Members, tm)
	}
	if versioned == 0 {
		return p, fault.Permanent(fmt.Errorf("the run of release set %s names no member's image", app.Name))
	}
	p.Timeout = app.Delivery.StepDeadline()
	return p, nil
}

// setCommit is the commit a run of set app of git and image members
// applies: its git members' entry in the request's version (the rollout's,
// or the cluster's previous one for a revert), as repository@commit.
func setCommit(app config.Application, req events.PipelineRunRequested) (string, error) {
	for _, sm := range app.Set.Members {
		i := slices.IndexFunc(req.Members, func(v events.MemberImage) bool { return v.Application == sm.Name })
		if sm.Image == "" && i >= 0 && req.Members[i].Digest != "" {
			return req.Members[i].Ref(), nil
		}
	}
	return "", fault.Permanent(fmt.Errorf("the run of release set %s names no commit of its git members", app.Name))
}

// imageMember is image member m of a set of git and image members in the
// run req asks for: its entry's image pinned (repository@digest), its
// container and its own delivery policy's canary; false when the
// request's version has no entry of m (it is left as the cluster runs
// it). The set's lead (lead) is in the run all the same: without an entry
// it comes without an image (its canary only, which lists the set's: the
// cluster is judged by it).
func (d *Deliverer) imageMember(m config.Application, req events.PipelineRunRequested, lead, revert bool) (pipelines.SetMember, bool, error) {
	i := slices.IndexFunc(req.Members, func(v events.MemberImage) bool { return v.Application == m.Name })
	if i < 0 && !lead {
		return pipelines.SetMember{}, false, nil
	}
	objs := canary.Render(m, canary.Input{
		Instance: d.cfg.Current().Server.Instance, Cluster: req.Cluster, Rollout: req.RolloutID,
		Event: d.hooks(req.Cluster, req.RolloutID), SkipAnalysis: revert,
	})
	deps, err := objs.Dependencies()
	if err != nil {
		return pipelines.SetMember{}, false, fault.Permanent(fmt.Errorf("rendering the delivery policy of %s: %w", m.Name, err))
	}
	var image string
	if i >= 0 {
		image = req.Members[i].Ref()
	}
	return pipelines.SetMember{
		Application: m.Name, Kind: m.Workload.Kind, Workload: m.Workload.Name, Container: m.Workload.Container,
		Image: image, Canary: objs.Canary, Objects: deps,
	}, true, nil
}

// byPullRequest tells whether a pull request, not the run, writes app's
// repository for a run of purpose.
func byPullRequest(app config.Application, purpose string) bool {
	g := app.GitOps
	if g == nil || g.Mode != config.GitOpsModePullRequest || g.PullRequest == nil {
		return false
	}
	return purpose == events.PurposeApply || g.PullRequest.Revert == config.GitOpsModePullRequest
}
