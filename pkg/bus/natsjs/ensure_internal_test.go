package natsjs

import (
	"context"
	"errors"
	"testing"
)

// TestRetriedWaitsOutTimeouts: a step of opening the bus that times out
// (a consumer created while a stream's leader is elected) is tried again,
// and a caller that gives up gets the step's error at once.
func TestRetriedWaitsOutTimeouts(t *testing.T) {
	timeout := errors.New("nats: timeout")
	calls := 0
	got, err := retried(t.Context(), func(context.Context) (int, error) {
		if calls++; calls < 3 {
			return 0, timeout
		}
		return 42, nil
	})
	if err != nil || got != 42 || calls != 3 {
		t.Fatalf("retried = %d, %v after %d calls; want 42, nil after 3", got, err, calls)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls = 0
	if _, err := retried(ctx, func(context.Context) (int, error) { calls++; return 0, timeout }); !errors.Is(err, timeout) || calls != 1 {
		t.Fatalf("retried on a cancelled context = %v after %d calls; want the step's error after 1", err, calls)
	}
}
