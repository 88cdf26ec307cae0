package localfleet

import (
	"context"
	"fmt"
	"net"
)

// freePorts reserves n distinct free TCP ports on 127.0.0.1. The listeners are
// held until all n are chosen, so the ports differ from each other.
func freePorts(ctx context.Context, n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserving a port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
