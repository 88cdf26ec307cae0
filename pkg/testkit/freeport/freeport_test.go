package freeport

import (
	"net"
	"strconv"
	"testing"
)

// The ports are distinct, below the ephemeral range, and bindable.
func TestPorts(t *testing.T) {
	ps, err := Ports(t.Context(), 50)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ps {
		if seen[p] || p < low || p >= ephemeralLow() {
			t.Errorf("port %d: repeated or outside [%d, %d)", p, low, ephemeralLow())
		}
		seen[p] = true
	}
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ps[0])))
	if err != nil {
		t.Fatalf("binding a port handed out: %v", err)
	}
	_ = l.Close()
	// A port handed out is not handed out again.
	more, err := Ports(t.Context(), 50)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range more {
		if seen[p] {
			t.Errorf("port %d handed out twice", p)
		}
	}
}
