package freeport

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// The ports handed out lie in [low, ephemeral low), the kernel's
// ephemeral range read from /proc (32768 when it cannot be read).
const low = 12000

var (
	mu     sync.Mutex
	handed = map[int]bool{}
)

// Port returns a port on 127.0.0.1 free now, outside the kernel's
// ephemeral range, not handed out before by this process.
func Port(ctx context.Context) (int, error) {
	ps, err := Ports(ctx, 1)
	if err != nil {
		return 0, err
	}
	return ps[0], nil
}

// Ports returns n distinct such ports.
func Ports(ctx context.Context, n int) ([]int, error) {
	high := ephemeralLow()
	mu.Lock()
	defer mu.Unlock()
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries > 1000 {
			return nil, fmt.Errorf("no free port in [%d, %d) after %d tries", low, high, tries)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p := low + rand.IntN(high-low)
		if handed[p] || !free(ctx, p) {
			continue
		}
		handed[p] = true
		out = append(out, p)
	}
	return out, nil
}

// Addr is Port as "127.0.0.1:port".
func Addr(ctx context.Context) (string, error) {
	p, err := Port(ctx)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// free reports whether port p can be bound on 127.0.0.1 now.
func free(ctx context.Context, p int) bool {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// ephemeralLow is the low end of the kernel's ephemeral port range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= low+1000 {
		return 32768
	}
	return n
}
