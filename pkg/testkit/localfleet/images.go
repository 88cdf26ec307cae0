package localfleet

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// BuildStatic compiles src, the one file of a main package that imports only
// the standard library, into a static binary at out (no cgo, so it runs in an
// image that holds nothing else). It needs the go command on PATH; Go's build
// cache makes a second build of the same source instant.
func BuildStatic(ctx context.Context, src []byte, out string) error {
	dir, err := os.MkdirTemp("", "flotilla-static-")
	if err != nil {
		return fmt.Errorf("creating build dir: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	files := map[string][]byte{"main.go": src, "go.mod": []byte("module flotilla.local/static\n\ngo 1.22\n")}
	for f, b := range files {
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", f, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("creating output dir: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOFLAGS=", "GOTOOLCHAIN=local", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building static binary: %w: %s", err, b)
	}
	return nil
}

// PushBinary pushes to repo (host:port/path of a plain-HTTP registry on
// loopback) an image whose single layer is the file bin at /<base name of
// bin>, which is also its entrypoint, and returns the image's reference by
// digest.
func PushBinary(ctx context.Context, repo, bin string) (string, error) {
	return pushBinaryAt(ctx, repo+":latest", bin, "/"+filepath.Base(bin))
}

// pushBinaryAt pushes to ref (repo:tag) an image whose single layer is the
// file bin at path (absolute), which is also its entrypoint, and returns
// the image's reference by digest.
func pushBinaryAt(ctx context.Context, ref, bin, path string) (string, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", bin, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, dir := range parents(path) {
		if err := tw.WriteHeader(&tar.Header{Name: dir + "/", Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
			return "", fmt.Errorf("writing layer: %w", err)
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: path[1:], Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
		return "", fmt.Errorf("writing layer: %w", err)
	}
	if _, err := tw.Write(b); err != nil {
		return "", fmt.Errorf("writing layer: %w", err)
	}
	if err := tw.Close(); err != nil {
		return "", fmt.Errorf("writing layer: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	})
	if err != nil {
		return "", fmt.Errorf("creating layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return "", fmt.Errorf("creating image: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return "", fmt.Errorf("reading image config: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config = v1.Config{Entrypoint: []string{path}}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return "", fmt.Errorf("setting image config: %w", err)
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return "", fmt.Errorf("parsing reference %q: %w", ref, err)
	}
	if err := remote.Write(r, img, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("pushing %s: %w", r, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("computing digest: %w", err)
	}
	return r.Context().Digest(d.String()).String(), nil
}

// parents lists the directories above path's file, outermost first,
// without the leading slash: "/ko-app/entrypoint" gives ["ko-app"].
func parents(path string) []string {
	var out []string
	for dir := filepath.Dir(path); dir != "/" && dir != "."; dir = filepath.Dir(dir) {
		out = append([]string{dir[1:]}, out...)
	}
	return out
}
