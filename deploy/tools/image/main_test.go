package main

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestImage is `make image` end to end: both platforms built and pushed to
// a registry, pulled back by digest; each image's config runs flotilla as
// the non-root user with the OCI labels; it weighs less than 40 MB
// compressed; and the host platform's binary, taken out of the pulled
// layer, runs and reports the tag as its version.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds flotilla for two platforms")
	}
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	repo := strings.TrimPrefix(reg.URL, "http://") + "/flotilla-cd/flotilla"
	digestFile := filepath.Join(t.TempDir(), "image.ref")
	args := []string{"-repo", repo, "-tag", "v0.0.0-imagetest", "-revision", "0123abc", "-C", "../../..", "-digest-file", digestFile}
	if err := run(args); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(digestFile)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewDigest(strings.TrimSpace(string(b)), name.Insecure)
	if err != nil {
		t.Fatalf("digest file %q: %v", b, err)
	}
	idx, err := remote.Index(ref, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatalf("pulling %s back: %v", ref, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range im.Manifests {
		platforms = append(platforms, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if c.User != "65532:65532" || strings.Join(c.Entrypoint, " ") != "/flotilla" ||
			c.Labels["org.opencontainers.image.version"] != "v0.0.0-imagetest" || c.Labels["org.opencontainers.image.revision"] != "0123abc" ||
			c.Labels["org.opencontainers.image.source"] != "https://github.com/flotilla-cd/flotilla" {
			t.Errorf("%s: config %+v", d.Platform, c)
		}
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		size := d.Size + m.Config.Size
		for _, l := range m.Layers {
			size += l.Size
		}
		t.Logf("%s: %.1f MB compressed", d.Platform, float64(size)/1e6)
		if size >= 40e6 {
			t.Errorf("%s: %.1f MB compressed, want < 40 MB", d.Platform, float64(size)/1e6)
		}
		if d.Platform.Architecture == runtime.GOARCH {
			runFromLayer(t, img)
		}
	}
	if strings.Join(platforms, ",") != "linux/amd64,linux/arm64" {
		t.Errorf("platforms %v", platforms)
	}
}

// runFromLayer takes /flotilla out of img's layer and runs `version`.
func runFromLayer(t *testing.T, img v1.Image) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v; want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	bin := filepath.Join(t.TempDir(), "flotilla")
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatal("no /flotilla in the layer")
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != "flotilla" {
			continue
		}
		f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		break
	}
	out, err := exec.CommandContext(t.Context(), bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("running the image's flotilla: %v", err)
	}
	var info struct{ Version, Platform string }
	if err := json.Unmarshal(out, &info); err != nil || info.Version != "v0.0.0-imagetest" || info.Platform != "linux/"+runtime.GOARCH {
		t.Errorf("flotilla version = %s (%v); want v0.0.0-imagetest on linux/%s", out, err, runtime.GOARCH)
	}
}

// The image section goes before "## Reproduce" the first time, and
// replaces itself after; the rest of the file is kept.
func TestUpdateSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	doc := "# Benchmarks\n\n## Reaction\n\nA\n\n## Reproduce\n\nR\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"## Image\n\none", "## Image\n\ntwo"} {
		if err := updateSection(path, body); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "# Benchmarks\n\n## Reaction\n\nA\n\n## Image\n\ntwo\n## Reproduce\n\nR\n"
	if string(got) != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}
