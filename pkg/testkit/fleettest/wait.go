package fleettest

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// Until watches one object (resource name in namespace ns, served by rc) until
// cond holds for it or timeout passes, and returns the object cond accepted. It
// watches rather than polls, so it reacts the moment the object changes.
func Until[T runtime.Object](ctx context.Context, timeout time.Duration, rc rest.Interface, resource, ns, name string, cond func(T) (bool, error)) (T, error) {
	var zero, last T
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	lw := cache.NewListWatchFromClient(rc, resource, ns, fields.OneTermEqualSelector("metadata.name", name))
	proto, ok := reflect.New(reflect.TypeOf(zero).Elem()).Interface().(runtime.Object)
	if !ok {
		return zero, fmt.Errorf("%T is not a runtime.Object", zero)
	}
	ev, err := watchtools.UntilWithSync(ctx, lw, proto, nil, func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Deleted {
			return false, fmt.Errorf("%s %s/%s was deleted", resource, ns, name)
		}
		obj, ok := ev.Object.(T)
		if !ok {
			return false, nil
		}
		last = obj
		return cond(obj)
	})
	if err != nil {
		return last, fmt.Errorf("waiting %s for %s %s/%s: %w", timeout, resource, ns, name, err)
	}
	obj, _ := ev.Object.(T)
	return obj, nil
}
