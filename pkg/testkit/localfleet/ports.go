package localfleet

import (
	"context"
	"fmt"

	"github.com/flotilla-cd/flotilla/pkg/testkit/freeport"
)

// freePorts reserves n distinct free TCP ports on 127.0.0.1, outside the
// kernel's ephemeral range (see freeport): the fleet's servers bind them
// after they start, when another process binding port 0 would have taken
// one the kernel handed out.
func freePorts(ctx context.Context, n int) ([]int, error) {
	ps, err := freeport.Ports(ctx, n)
	if err != nil {
		return nil, fmt.Errorf("reserving a port: %w", err)
	}
	return ps, nil
}
