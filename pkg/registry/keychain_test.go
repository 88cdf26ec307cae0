package registry

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/testkit/registrytest"
)

// writeDockerConfig writes {"auths": {host: {"auth": base64(user:password)}}}
// as kubectl create secret docker-registry puts it in .dockerconfigjson.
func writeDockerConfig(t *testing.T, path, host, user, password string) {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	data, err := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{
		"username": user, "password": password, "auth": auth,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	// Written aside and renamed, as a Secret's volume swaps its files.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestKeychainAgainstARegistryThatRequiresAuth runs Debian's docker-registry
// with htpasswd users: without credentials a tag cannot be resolved (401,
// permanent); with a Docker config file naming the registry it resolves;
// a rotated file is read again without a new keychain; the cloud
// providers' keychains, configured too, do not stand in the way of a host
// that is not theirs.
func TestKeychainAgainstARegistryThatRequiresAuth(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // the default keychain finds nothing
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg, err := registrytest.Start(ctx, t.TempDir(), registrytest.Options{Users: map[string]string{"ci": "s3cret-one", "deployer": "s3cret-two"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Stop)
	want := pushImage(t, reg.Host, "team/app", "1.0.0", withBasic("ci", "s3cret-one"))

	_, err = NewRemote().Resolve(ctx, reg.Host+"/team/app", "1.0.0")
	if err == nil || !fault.IsPermanent(err) || !strings.Contains(err.Error(), "UNAUTHORIZED") {
		t.Fatalf("without credentials: got %v, want a permanent 401", err)
	}

	file := filepath.Join(t.TempDir(), ".dockerconfigjson")
	writeDockerConfig(t, file, reg.Host, "deployer", "wrong")
	kc, err := NewKeychain(ctx, Credentials{DockerConfigFiles: []string{file}, Providers: Providers()})
	if err != nil {
		t.Fatal(err)
	}
	r := NewRemote(WithKeychain(kc))
	if _, err := r.Resolve(ctx, reg.Host+"/team/app", "1.0.0"); err == nil || !fault.IsPermanent(err) {
		t.Fatalf("with a wrong password: got %v, want a permanent 401", err)
	}

	writeDockerConfig(t, file, reg.Host, "deployer", "s3cret-two") // the Secret rotated
	got, err := r.Resolve(ctx, reg.Host+"/team/app", "1.0.0")
	if err != nil {
		t.Fatalf("with the rotated credentials: %v", err)
	}
	if got != want {
		t.Fatalf("resolved %s, want %s", got, want)
	}
	tags, err := r.Tags(ctx, reg.Host+"/team/app")
	if err != nil || len(tags) != 1 || tags[0] != "1.0.0" {
		t.Fatalf("listing tags with credentials: %v, %v", tags, err)
	}
}

func withBasic(user, password string) remote.Option {
	return remote.WithAuth(&authn.Basic{Username: user, Password: password})
}

// TestKeychainMatching checks which entry of a Docker config answers for
// which image: host and port exactly, a path prefix before the bare host,
// "*" for one label; other hosts are anonymous.
func TestKeychainMatching(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	file := filepath.Join(t.TempDir(), "config.json")
	data := `{"auths": {
	  "registry.example.com": {"username": "host", "password": "p"},
	  "registry.example.com/team-a": {"username": "team-a", "password": "p"},
	  "*.corp.example": {"username": "wildcard", "password": "p"},
	  "https://127.0.0.1:5000/v2/": {"username": "loopback", "password": "p"}
	}}`
	if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	kc, err := NewKeychain(context.Background(), Credentials{DockerConfigFiles: []string{file}})
	if err != nil {
		t.Fatal(err)
	}
	for image, want := range map[string]string{
		"registry.example.com/team-b/app": "host",
		"registry.example.com/team-a/app": "team-a",
		"eu.corp.example/app":             "wildcard",
		"a.b.corp.example/app":            "",
		"127.0.0.1:5000/app":              "loopback",
		"127.0.0.1:5001/app":              "",
		"ghcr.io/someone/app":             "",
	} {
		repo, err := name.NewRepository(image)
		if err != nil {
			t.Fatal(err)
		}
		a, err := kc.Resolve(repo)
		if err != nil {
			t.Fatalf("%s: %v", image, err)
		}
		cfg, err := a.Authorization()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Username != want {
			t.Errorf("%s: user %q, want %q", image, cfg.Username, want)
		}
	}
}

func TestNewKeychainErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		c    Credentials
		want string
	}{
		{"a missing file", Credentials{DockerConfigFiles: []string{filepath.Join(dir, "nope")}}, "no such file"},
		{"not JSON", Credentials{DockerConfigFiles: []string{write("a", "auths: {}")}}, "not a Docker config"},
		{"no auths", Credentials{DockerConfigFiles: []string{write("b", `{"credsStore": "desktop"}`)}}, `no "auths"`},
		{"an unknown provider", Credentials{Providers: []string{"ibm"}}, `unknown provider "ibm": want one of [aws azure gcp]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewKeychain(context.Background(), tc.c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
