package registry

import "testing"

func TestSameRepository(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"127.0.0.1:5000/demo/podinfo", "127.0.0.1:5000/demo/podinfo", true},
		{"docker.io/library/nginx", "index.docker.io/library/nginx", true},
		{"docker.io/nginx", "docker.io/library/nginx", true},
		{"127.0.0.1:5000/demo/podinfo", "127.0.0.1:5001/demo/podinfo", false},
		{"127.0.0.1:5000/demo/podinfo", "127.0.0.1:5000/demo/other", false},
	}
	for _, tt := range tests {
		t.Run(tt.a+"~"+tt.b, func(t *testing.T) {
			if got := SameRepository(tt.a, tt.b); got != tt.want {
				t.Errorf("SameRepository(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
		})
	}
}
