package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	kauth "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	corev1 "k8s.io/api/core/v1"
)

// fileKeychain reads a Docker config file's "auths" and matches them to an
// image as the kubelet matches an image pull secret (go-containerregistry's
// port of its keyring: host and path prefixes, "*" for one host label, the
// longest match first). The file is read again when its size or time
// changes: a Secret's volume swaps in the new content when it is rotated.
type fileKeychain struct {
	path string

	mu      sync.Mutex
	size    int64
	modTime time.Time
	keys    authn.Keychain
}

func newFileKeychain(ctx context.Context, path string) (*fileKeychain, error) {
	k := &fileKeychain{path: path}
	if _, err := k.current(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

// Resolve implements authn.Keychain.
func (k *fileKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	return k.ResolveContext(context.Background(), target)
}

// ResolveContext implements authn.ContextKeychain.
func (k *fileKeychain) ResolveContext(ctx context.Context, target authn.Resource) (authn.Authenticator, error) {
	keys, err := k.current(ctx)
	if err != nil {
		return nil, err
	}
	return keys.Resolve(target)
}

// current is the keychain of the file as it is now, read again if it
// changed since the last read. A file that cannot be read or parsed any
// more is an error (the credentials it held are not used silently stale).
func (k *fileKeychain) current(ctx context.Context) (authn.Keychain, error) {
	fi, err := os.Stat(k.path)
	if err != nil {
		return nil, fmt.Errorf("registry credentials: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys != nil && fi.Size() == k.size && fi.ModTime().Equal(k.modTime) {
		return k.keys, nil
	}
	keys, err := readDockerConfig(ctx, k.path)
	if err != nil {
		return nil, err
	}
	k.keys, k.size, k.modTime = keys, fi.Size(), fi.ModTime()
	return keys, nil
}

func readDockerConfig(ctx context.Context, path string) (authn.Keychain, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("registry credentials: %w", err)
	}
	var probe struct {
		Auths map[string]json.RawMessage `json:"auths"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("registry credentials %s: not a Docker config (JSON with \"auths\"): %w", path, err)
	}
	if len(probe.Auths) == 0 {
		return nil, fmt.Errorf("registry credentials %s: %w", path, errNoAuths)
	}
	secret := corev1.Secret{
		Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: data},
	}
	keys, err := kauth.NewFromPullSecrets(ctx, []corev1.Secret{secret})
	if err != nil {
		return nil, fmt.Errorf("registry credentials %s: %w", path, err)
	}
	return keys, nil
}

var errNoAuths = errors.New(`no "auths": want {"auths": {"registry.example.com": {"auth": "<base64 of user:password>"}}}, as kubectl create secret docker-registry writes it`)
