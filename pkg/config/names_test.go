package config_test

import (
	"testing"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

func TestSameImage(t *testing.T) {
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
		if got := config.SameImage(tt.a, tt.b); got != tt.want {
			t.Errorf("SameImage(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestSameGitRepository(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"https://git.example.com/team/deploy.git", "https://git.example.com/team/deploy", true},
		{"https://user:tok@GIT.example.com/team/deploy/", "http://git.example.com/team/deploy.git", true},
		{"git@git.example.com:team/deploy.git", "ssh://git@git.example.com/team/deploy", true},
		{"file:///srv/git/deploy.git", "/srv/git/deploy", true},
		{"https://git.example.com/team/deploy", "https://git.example.com/team/other", false},
		{"https://git.example.com/team/deploy", "https://other.example.com/team/deploy", false},
	}
	for _, tt := range tests {
		if got := config.SameGitRepository(tt.a, tt.b); got != tt.want {
			t.Errorf("SameGitRepository(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestDisplayURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:tok@git.example.com/team/deploy.git": "https://git.example.com/team/deploy.git",
		"https://git.example.com/team/deploy.git":          "https://git.example.com/team/deploy.git",
		"git@git.example.com:team/deploy.git":              "git@git.example.com:team/deploy.git",
	} {
		if got := config.DisplayURL(in); got != want {
			t.Errorf("DisplayURL(%q) = %q, want %q", in, got, want)
		}
	}
}
