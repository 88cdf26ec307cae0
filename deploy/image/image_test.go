package image_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/flotilla-cd/flotilla/deploy/image"
)

var created = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

type entry struct {
	Name     string
	Mode     int64
	UID, GID int
	Body     string
}

// The layer holds the binary, the CA bundle, a non-root user and its
// writable directory, and nothing else; every entry is stamped created.
func TestFiles(t *testing.T) {
	b, err := image.Files([]byte("ELF"), []byte("PEM"), created)
	if err != nil {
		t.Fatal(err)
	}
	var got []entry
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(created) {
			t.Errorf("%s: mtime %v, want %v", h.Name, h.ModTime, created)
		}
		body, _ := io.ReadAll(tr)
		e := entry{Name: h.Name, Mode: h.Mode, UID: h.Uid, GID: h.Gid, Body: string(body)}
		if e.Name == "etc/passwd" || e.Name == "etc/group" {
			e.Body = "(user)"
		}
		got = append(got, e)
	}
	want := []entry{
		{Name: "etc/", Mode: 0o755},
		{Name: "etc/passwd", Mode: 0o644, Body: "(user)"},
		{Name: "etc/group", Mode: 0o644, Body: "(user)"},
		{Name: "etc/ssl/", Mode: 0o755},
		{Name: "etc/ssl/certs/", Mode: 0o755},
		{Name: "etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Body: "PEM"},
		{Name: "flotilla", Mode: 0o755, Body: "ELF"},
		{Name: "tmp/", Mode: 0o1777},
		{Name: "var/", Mode: 0o755},
		{Name: "var/lib/", Mode: 0o755},
		{Name: "var/lib/flotilla/", Mode: 0o750, UID: image.UID, GID: image.GID},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layer (-want +got)\n%s", diff)
	}
}

// The same inputs give the same digest; another version another one. The
// index names each platform; each image runs as the non-root user.
func TestBuild(t *testing.T) {
	dir := t.TempDir()
	var bins []image.Binary
	for _, arch := range []string{"amd64", "arm64"} {
		p := filepath.Join(dir, arch)
		if err := os.WriteFile(p, []byte("binary for "+arch), 0o755); err != nil {
			t.Fatal(err)
		}
		bins = append(bins, image.Binary{Platform: v1.Platform{OS: "linux", Architecture: arch}, Path: p})
	}
	o := image.Options{Binaries: bins, CACerts: []byte("PEM"), Version: "v1.2.3", Revision: "abc", Source: "https://example.com/flotilla", Created: created}
	digest := func(o image.Options) v1.Hash {
		idx, err := image.Build(o)
		if err != nil {
			t.Fatal(err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := digest(o)
	if again := digest(o); again != first {
		t.Errorf("rebuild: digest %s, then %s", first, again)
	}
	other := o
	other.Version = "v1.2.4"
	if d := digest(other); d == first {
		t.Errorf("another version, same digest %s", d)
	}

	idx, err := image.Build(o)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.Annotations["org.opencontainers.image.version"] != "v1.2.3" || im.Annotations["org.opencontainers.image.revision"] != "abc" {
		t.Errorf("index annotations %v", im.Annotations)
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
		wantCfg := v1.Config{User: "65532:65532", Entrypoint: []string{"/flotilla"}, Cmd: []string{"serve"}, WorkingDir: "/var/lib/flotilla",
			Env: []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt", "HOME=/var/lib/flotilla"}, Labels: image.Annotations(o)}
		if diff := cmp.Diff(wantCfg, cf.Config); diff != "" {
			t.Errorf("%s config (-want +got)\n%s", d.Platform, diff)
		}
		if cf.Architecture != d.Platform.Architecture || cf.OS != "linux" || !cf.Created.Equal(created) {
			t.Errorf("%s config platform %s/%s created %v", d.Platform, cf.OS, cf.Architecture, cf.Created)
		}
	}
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, platforms); diff != "" {
		t.Errorf("platforms (-want +got)\n%s", diff)
	}
}

func TestBuildErrors(t *testing.T) {
	for name, o := range map[string]image.Options{
		"no binaries": {CACerts: []byte("PEM")},
		"no CA certs": {Binaries: []image.Binary{{Platform: v1.Platform{OS: "linux", Architecture: "amd64"}, Path: "x"}}},
		"missing binary": {CACerts: []byte("PEM"), Binaries: []image.Binary{{Platform: v1.Platform{OS: "linux", Architecture: "amd64"},
			Path: filepath.Join(t.TempDir(), "absent")}}},
	} {
		if _, err := image.Build(o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
