package version

import (
	"runtime"
	"testing"
)

func TestGet(t *testing.T) {
	tests := []struct {
		name    string
		stamped string
		want    string
	}{
		{name: "stamped at build time", stamped: "v1.2.3", want: "v1.2.3"},
		// go test binaries carry no module version, so an unstamped build is devel.
		{name: "unstamped", stamped: "", want: "devel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := Version
			t.Cleanup(func() { Version = old })
			Version = tt.stamped
			got := Get()
			if got.Version != tt.want {
				t.Errorf("Version = %q, want %q", got.Version, tt.want)
			}
			if got.GoVersion != runtime.Version() {
				t.Errorf("GoVersion = %q, want %q", got.GoVersion, runtime.Version())
			}
		})
	}
}
