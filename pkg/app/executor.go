package app

import (
	"context"
	"fmt"
	"log/slog"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pipelines/deliver"
	"github.com/flotilla-cd/flotilla/pipelines/embedded"
	"github.com/flotilla-cd/flotilla/pipelines/tektonrun"
	"github.com/flotilla-cd/flotilla/pkg/cluster"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/kube"
)

// newExecutor builds the executor the fleet's config names; the embedded
// one reads the git credentials of the applications in force (live).
func newExecutor(cfg *config.Config, live config.Provider, clusters *cluster.Set, mirror *gitops.Mirror, log *slog.Logger) (deliver.Executor, error) {
	if cfg.Fleet.Executor != config.ExecutorTekton {
		return embedded.New(clusters, embedded.WithGitAuth(pipelines.GitAuth(live)), embedded.WithMirror(mirror), embedded.WithLogger(log)), nil
	}
	t := cfg.Fleet.Tekton
	var (
		rc  *rest.Config
		err error
	)
	if t.Cluster != "" {
		rc, err = clusters.Config(t.Cluster)
	} else {
		rc, err = kube.RESTConfig(t.Kubeconfig, t.Context)
	}
	if err != nil {
		return nil, fmt.Errorf("tekton executor: %w", err)
	}
	opts := []tektonrun.Option{tektonrun.WithLogger(log), tektonrun.WithManagedSecrets(*t.ManageSecrets)}
	if t.ServiceAccount != "" {
		opts = append(opts, tektonrun.WithServiceAccount(t.ServiceAccount))
	}
	if len(t.Labels) > 0 {
		opts = append(opts, tektonrun.WithLabels(t.Labels))
	}
	if t.PodTemplate != nil {
		opts = append(opts, tektonrun.WithPodTemplate(t.PodTemplate))
	}
	exec, err := tektonrun.New(rc, t.Namespace, clusters, opts...)
	if err != nil {
		return nil, fmt.Errorf("tekton executor: %w", err)
	}
	return exec, nil
}

// observer is implemented by executors that follow runs they are told
// about (the tekton executor, fed Tekton's own CloudEvents).
type observer interface {
	Observe(events.PipelineRun)
}

// observePipelineRuns hands the PipelineRun events the intake journals to
// the executor as they arrive, so a run's end is seen at once, not at the
// runtime's pace (the executor watches its runs too: this only speeds it).
func observePipelineRuns(exec deliver.Executor) func(context.Context, []cloudevents.Event) {
	o, ok := exec.(observer)
	if !ok {
		return nil
	}
	return func(_ context.Context, evs []cloudevents.Event) {
		for _, e := range evs {
			if e.Type() != events.TypePipelineRun {
				continue
			}
			if p, err := events.Decode[events.PipelineRun](e); err == nil {
				o.Observe(p)
			}
		}
	}
}
