package app

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/reconcile"
	"github.com/flotilla-cd/flotilla/pkg/render"
)

// newReconciler builds the check of the clusters against the validated
// digests (pkg/reconcile) on the fleet's clients and watch caches, which
// tell it of primaries changed, and a git application's validated commit
// rendered from mirror's copies of the repositories. In scale-out mode a
// replica checks the applications whose pushes fall in the partitions it
// holds (the replica that plans their rollouts, as the poll's).
func (s *Server) newReconciler(o Options, mirror *gitops.Mirror) (*reconcile.Reconciler, error) {
	ro := reconcile.Options{Logger: o.Logger, Metrics: o.Registerer, Render: commitRenderer{mirror}}
	if shared, ok := s.dispatch.(*sharedEngine); ok {
		ro.Owns = func(a config.Application) bool {
			key := dispatch.ImageKey(a.Image)
			if g := a.Git(); g != nil {
				key = dispatch.GitKey(config.DisplayURL(g.URL))
			}
			return shared.held(s.scale.bus.PartitionOf(key))
		}
	}
	r, err := reconcile.New(s.live, s.clusters, s.repo, journal{s.bus}, ro)
	if err != nil {
		return nil, err
	}
	s.clusters.OnPrimaryChange(r.Changed)
	return r, nil
}

// commitRenderer renders a git application's commit for one cluster as
// its rollouts' apply-manifests does (the same paths, render and chart
// values, pipelines.GitSourceFor), for the drift check (reconcile's
// Renderer).
type commitRenderer struct{ mirror *gitops.Mirror }

// WorkloadImage is the image commit renders for app's workload container
// (app.Workload.Container, else its first) in cluster.
func (c commitRenderer) WorkloadImage(ctx context.Context, app config.Application, cluster, commit string) (string, error) {
	g := app.Git()
	if g == nil {
		return "", fault.Permanent(fmt.Errorf("%s is not a git application", app.Name))
	}
	src, err := pipelines.GitSourceFor(app, cluster, config.DisplayURL(g.URL)+"@"+commit)
	if err != nil {
		return "", err
	}
	var chart *render.Chart
	if src.Helm != "" {
		chart = new(render.Chart)
		if err := json.Unmarshal([]byte(src.Helm), chart); err != nil {
			return "", fault.Permanent(fmt.Errorf("helm values of %s: %w", app.Name, err))
		}
		chart.Namespace = cmp.Or(chart.Namespace, app.Namespace)
	}
	work, err := os.MkdirTemp("", "flotilla-drift-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(work) }()
	tree := filepath.Join(work, "tree")
	if err := c.mirror.Checkout(ctx, SourceRepo(*g), commit, tree); err != nil {
		return "", err
	}
	objs, err := render.RenderContext(ctx, render.Request{Dir: tree, Kind: cmp.Or(src.Render, render.Manifests), Paths: src.Paths, Chart: chart})
	if err != nil {
		return "", err
	}
	kind := cmp.Or(app.Workload.Kind, config.KindDeployment)
	for _, o := range objs {
		if o.GetKind() != kind || o.GetName() != app.Workload.Name || (o.GetNamespace() != "" && o.GetNamespace() != app.Namespace) {
			continue
		}
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for i, ct := range cs {
			m, _ := ct.(map[string]any)
			if name, _ := m["name"].(string); name == app.Workload.Container || (app.Workload.Container == "" && i == 0) {
				img, _ := m["image"].(string)
				return img, nil
			}
		}
		return "", fault.Permanent(fmt.Errorf("%w: commit %s renders %s %s/%s without container %q", render.ErrRender, commit, kind, app.Namespace, app.Workload.Name, app.Workload.Container))
	}
	return "", fault.Permanent(fmt.Errorf("%w: commit %s renders no %s %s/%s in %s", render.ErrRender, commit, kind, app.Namespace, app.Workload.Name, cluster))
}
