package gitops

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestImage(t *testing.T) {
	tests := []struct {
		ref     string
		want    Image
		version string
	}{
		{"registry.example.com/team/api:1.4.2@" + newDigest, Image{"registry.example.com/team/api", "1.4.2", newDigest}, "1.4.2"},
		{"localhost:5000/api:v2", Image{"localhost:5000/api", "v2", ""}, "v2"},
		{"localhost:5000/api@" + newDigest, Image{"localhost:5000/api", "", newDigest}, "sha256:111111111111"},
	}
	for _, tt := range tests {
		got, err := ParseImage(tt.ref)
		if err != nil {
			t.Errorf("ParseImage(%q): %v", tt.ref, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseImage(%q) (-want +got)\n%s", tt.ref, diff)
		}
		if got.Reference() != tt.ref || got.Version() != tt.version {
			t.Errorf("ParseImage(%q) = reference %q, version %q; want the input and %q", tt.ref, got.Reference(), got.Version(), tt.version)
		}
	}
	for _, bad := range []string{"", "localhost:5000/api", "api:1@sha256", "api:a b", "api@md5"} {
		if _, err := ParseImage(bad); !errors.Is(err, ErrInvalid) || !IsPermanent(err) {
			t.Errorf("ParseImage(%q) error = %v, want a permanent ErrInvalid", bad, err)
		}
	}
}

func TestCommitMessage(t *testing.T) {
	tests := []struct {
		change Change
		want   string
	}{
		{Change{App: "api", Rollout: "r-abc", Image: api},
			"flotilla: api 1.4.2 (rollout r-abc)\n\nImage: registry.example.com/team/api:1.4.2@" + newDigest + "\nRollout: r-abc\n"},
		{Change{Image: Image{Repository: "registry.example.com/team/api", Digest: newDigest}},
			"flotilla: api sha256:111111111111\n\nImage: registry.example.com/team/api@" + newDigest + "\n"},
	}
	for _, tt := range tests {
		if got := tt.change.CommitMessage(); got != tt.want {
			t.Errorf("CommitMessage() = %q, want %q", got, tt.want)
		}
	}
}
