package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's layout: what runs, as whom, and where it may write.
const (
	// Entrypoint is the binary's path in the image.
	Entrypoint = "/flotilla"
	// CACertsPath is where the CA bundle goes (Go reads it there).
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
	// UID and GID of the non-root user the image runs as (distroless's
	// "nonroot").
	UID = 65532
	GID = 65532
	// DataDir is the non-root user's writable directory, the default
	// working directory (flotilla's --data-dir defaults below it).
	DataDir = "/var/lib/flotilla"
)

// Binary is the flotilla executable built for one platform.
type Binary struct {
	Platform v1.Platform
	Path     string
}

// Options say what goes into the image and how it is labelled.
type Options struct {
	Binaries []Binary
	// CACerts is a PEM bundle of the CA certificates flotilla trusts.
	CACerts []byte
	// Version, Revision and Source become the OCI annotations
	// org.opencontainers.image.version, .revision and .source.
	Version, Revision, Source string
	// Created stamps the files, the config and the annotations: the same
	// inputs and Created give the same digest (SOURCE_DATE_EPOCH).
	Created time.Time
}

// Annotations are the OCI annotations (and config labels) of an image
// built with o.
func Annotations(o Options) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "flotilla",
		"org.opencontainers.image.description": "Event-driven progressive delivery across fleets of Kubernetes clusters",
		"org.opencontainers.image.source":      o.Source,
		"org.opencontainers.image.url":         o.Source,
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Revision,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     o.Created.UTC().Format(time.RFC3339),
	}
}

// Build returns the multi-platform index of o's binaries.
func Build(o Options) (v1.ImageIndex, error) {
	if len(o.Binaries) == 0 {
		return nil, fmt.Errorf("image: no binaries")
	}
	if len(o.CACerts) == 0 {
		return nil, fmt.Errorf("image: no CA certificates")
	}
	ann := Annotations(o)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, b := range o.Binaries {
		img, err := platformImage(o, b, ann)
		if err != nil {
			return nil, fmt.Errorf("image for %s: %w", b.Platform.String(), err)
		}
		p := b.Platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	out, ok := mutate.Annotations(idx, ann).(v1.ImageIndex)
	if !ok {
		return nil, fmt.Errorf("image: annotating the index")
	}
	return out, nil
}

func platformImage(o Options, b Binary, ann map[string]string) (v1.Image, error) {
	bin, err := os.ReadFile(b.Path)
	if err != nil {
		return nil, err
	}
	layerTar, err := Files(bin, o.CACerts, o.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: o.Created}, CreatedBy: "deploy/tools/image: flotilla " + o.Version, Comment: "static binary, CA certificates, non-root user",
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant, cf.OSVersion = b.Platform.OS, b.Platform.Architecture, b.Platform.Variant, b.Platform.OSVersion
	cf.Created = v1.Time{Time: o.Created}
	cf.Author = "flotilla"
	cf.Config.User = fmt.Sprintf("%d:%d", UID, GID)
	cf.Config.Entrypoint = []string{Entrypoint}
	cf.Config.Cmd = []string{"serve"}
	cf.Config.WorkingDir = DataDir
	cf.Config.Env = []string{"SSL_CERT_FILE=" + CACertsPath, "HOME=" + DataDir}
	cf.Config.Labels = ann
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	out, ok := mutate.Annotations(img, ann).(v1.Image)
	if !ok {
		return nil, fmt.Errorf("annotating the image")
	}
	return out, nil
}

// Files is the image's only layer, uncompressed: the binary, the CA
// bundle, passwd and group naming the non-root user, its writable data
// directory and /tmp, every entry stamped created.
func Files(bin, caCerts []byte, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64, uid, gid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: gid, ModTime: created, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, body []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body)), ModTime: created, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:%s:/sbin/nologin\n", UID, GID, DataDir)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", GID)
	steps := []func() error{
		func() error { return dir("etc", 0o755, 0, 0) },
		func() error { return file("etc/passwd", 0o644, []byte(passwd)) },
		func() error { return file("etc/group", 0o644, []byte(group)) },
		func() error { return dir("etc/ssl", 0o755, 0, 0) },
		func() error { return dir("etc/ssl/certs", 0o755, 0, 0) },
		func() error { return file(CACertsPath[1:], 0o644, caCerts) },
		func() error { return file(Entrypoint[1:], 0o755, bin) },
		func() error { return dir("tmp", 0o1777, 0, 0) },
		func() error { return dir("var", 0o755, 0, 0) },
		func() error { return dir("var/lib", 0o755, 0, 0) },
		func() error { return dir(DataDir[1:], 0o750, UID, GID) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
