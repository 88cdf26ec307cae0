package localfleet

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// waitFor polls cond until it holds, the timeout passes, or p dies; the error
// of the last two carries the tail of p's log.
func waitFor(ctx context.Context, p Process, timeout time.Duration, what string, cond wait.ConditionWithContextFunc) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if !p.running() {
			return false, fmt.Errorf("%s exited", p.Name)
		}
		return cond(ctx)
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w\n--- last lines of %s:\n%s", what, err, p.Log, p.Tail(15))
	}
	return nil
}
