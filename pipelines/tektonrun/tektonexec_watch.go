package tektonrun

import (
	"context"
	"fmt"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	tektonv1client "github.com/tektoncd/pipeline/pkg/client/clientset/versioned/typed/pipeline/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// watchPipelineRun watches the PipelineRun name until cond holds for it,
// and returns it. It lists first, so a run that already satisfies cond
// returns at once, and re-establishes the watch when the server ends it;
// ctx bounds the wait.
func watchPipelineRun(ctx context.Context, runs tektonv1client.PipelineRunInterface, name string, cond func(*tektonv1.PipelineRun) bool) (*tektonv1.PipelineRun, error) {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return runs.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return runs.Watch(ctx, o)
		},
	}
	ev, err := watchtools.UntilWithSync(ctx, lw, &tektonv1.PipelineRun{}, nil, func(ev watch.Event) (bool, error) {
		pr, ok := ev.Object.(*tektonv1.PipelineRun)
		if !ok || pr.Name != name {
			return false, nil
		}
		if ev.Type == watch.Deleted {
			return false, fmt.Errorf("PipelineRun %s/%s was deleted", pr.Namespace, name)
		}
		return cond(pr), nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("waiting for PipelineRun %s: %w", name, ctx.Err())
		}
		return nil, fmt.Errorf("waiting for PipelineRun %s: %w", name, err)
	}
	pr, _ := ev.Object.(*tektonv1.PipelineRun)
	return pr, nil
}
