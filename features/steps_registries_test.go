package features

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/testkit/registrytest"
)

// The accounts of the registry that requires a login: "ci" and "alice"
// push, "deployer" is flotilla's.
var registryUsers = map[string]string{"ci": "ci-" + randomHex(8), "alice": "alice-" + randomHex(8), "deployer": "deployer-" + randomHex(8)}

func (s *scenario) registerRegistrySteps(sc *godog.ScenarioContext) {
	sc.Step(`^a registry that requires a login and notifies flotilla itself$`, s.privateRegistry)
	sc.Step(`^flotilla reads it with a Docker config file holding the login of "([^"]*)"$`, s.dockerConfigOf)
	sc.Step(`^flotilla's Docker config file holds a wrong password for "([^"]*)"$`, s.dockerConfigWrong)
	sc.Step(`^the Docker config file is rotated to the password of "([^"]*)"$`, s.dockerConfigOf)
	sc.Step(`^"([^"]*)" pushes version "([^"]*)" to the registry$`, s.loginPush)
	sc.Step(`^the registry refused flotilla's login as "([^"]*)" to read "([^"]*)"$`, s.registryRefused)
	sc.Step(`^flotilla reports that the registry refused "([^"]*)": "([^"]*)"$`, s.flotillaReportsRefusal)
}

// privateRegistry runs Debian's docker-registry with users (htpasswd)
// whose own notifications go to the address flotilla will listen on,
// with the registry receiver's token: nothing in between sends them.
func (s *scenario) privateRegistry(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "flotilla-scenario-*")
	if err != nil {
		return err
	}
	s.w = &world{dir: dir, digests: map[string]string{}, pushes: map[string][]byte{}}
	w := s.w
	if w.listen, err = freePort(ctx); err != nil {
		return err
	}
	w.registryToken = randomHex(16)
	reg, err := registrytest.Start(ctx, filepath.Join(dir, "registry"), registrytest.Options{
		Users:         registryUsers,
		NotifyURL:     "http://" + w.listen + "/hooks/registry",
		NotifyHeaders: map[string][]string{"Authorization": {"Bearer " + w.registryToken}},
	})
	if err != nil {
		return err
	}
	s.onCleanup(reg.Stop)
	w.regHost, w.regLog = reg.Host, reg.Log
	return nil
}

// dockerConfigFile is where flotilla's Docker config file is, as a
// kubernetes.io/dockerconfigjson Secret's volume would hold it.
func (s *scenario) dockerConfigFile() string {
	return filepath.Join(s.w.dir, "regcred", ".dockerconfigjson")
}

func (s *scenario) dockerConfigOf(user string) error {
	password, ok := registryUsers[user]
	if !ok {
		return fmt.Errorf("the registry has no user %q", user)
	}
	return s.writeDockerConfig(user, password)
}

func (s *scenario) dockerConfigWrong(user string) error { return s.writeDockerConfig(user, "wrong") }

// writeDockerConfig writes what `kubectl create secret docker-registry`
// puts under .dockerconfigjson, aside then renamed into place (as a
// Secret's volume swaps its files), and names it in flotilla's config.
func (s *scenario) writeDockerConfig(user, password string) error {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	data, err := json.Marshal(map[string]any{"auths": map[string]any{s.w.regHost: map[string]string{
		"username": user, "password": password, "auth": auth,
	}}})
	if err != nil {
		return err
	}
	path := s.dockerConfigFile()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(path+".new", data, 0o600); err != nil {
		return err
	}
	if err := os.Rename(path+".new", path); err != nil {
		return err
	}
	s.w.registries = map[string]any{"dockerConfigFiles": []string{path}}
	return nil
}

// loginPush pushes a new image as user, logged in, to the registry, which
// notifies flotilla of it itself.
func (s *scenario) loginPush(ctx context.Context, user, version string) error {
	w := s.w
	img, err := random.Image(256, 1)
	if err != nil {
		return err
	}
	ref, err := name.NewTag(w.regHost + "/" + w.repo + ":" + version)
	if err != nil {
		return err
	}
	login := &authn.Basic{Username: user, Password: registryUsers[user]}
	if err := remote.Write(ref, img, remote.WithAuth(login), remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("pushing %s as %s: %w", ref, user, err)
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	w.digests[version] = d.String()
	return nil
}

// registryRefused reads the registry's own log for its refusal of user's
// login on a request of flotilla's (its user agent) for the version's
// manifest.
func (s *scenario) registryRefused(ctx context.Context, user, version string) error {
	uri := fmt.Sprintf("http.request.uri=/v2/%s/manifests/%s ", s.w.repo, version)
	refusal := fmt.Sprintf(`msg="error authenticating user \"%s\": authentication failure"`, user)
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		log, err := os.ReadFile(s.w.regLog)
		if err != nil {
			return false, err
		}
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, refusal) && strings.Contains(line, uri) && strings.Contains(line, `http.request.useragent="flotilla `) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the registry's log %s has no refusal of %s's login for flotilla's request of %s: %w", s.w.regLog, user, uri, err)
	}
	return nil
}

// flotillaReportsRefusal waits for flotilla's record that it rejected the
// version's push, with the registry's reason.
func (s *scenario) flotillaReportsRefusal(ctx context.Context, version, reason string) error {
	_, err := s.w.sink.waitFor(ctx, "flotilla rejecting "+version+" because "+reason, func(e cloudevents.Event) bool {
		if e.Type() != events.TypeImageRejected {
			return false
		}
		p, err := events.Decode[events.ImageRejected](e)
		return err == nil && p.Tag == version && strings.Contains(p.Reason, reason)
	})
	return err
}
