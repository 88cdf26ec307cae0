// Command image builds flotilla's multi-platform container image without
// Docker and pushes it (`make image`): for each platform a static binary
// (CGO off, trimmed, stripped, its version stamped), assembled by
// deploy/image on an empty base, pushed as one OCI index with
// go-containerregistry. It prints the pushed reference by digest and can
// write it to a file (the digest `flotilla pipelines install --image`
// takes).
//
//	go run ./deploy/tools/image -repo 127.0.0.1:5000/flotilla -tag v0.1.0
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/flotilla-cd/flotilla/deploy/image"
	"github.com/flotilla-cd/flotilla/deploy/tools/internal/mdsection"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

type options struct {
	repo, tag, platforms, revision, source, caFile, digestFile, module, update string
	local                                                                      bool
	created                                                                    time.Time
}

func run(args []string) error {
	var o options
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.StringVar(&o.repo, "repo", os.Getenv("IMAGE_REPO"), "repository to push to, e.g. ghcr.io/flotilla-cd/flotilla (default $IMAGE_REPO)")
	fs.StringVar(&o.tag, "tag", "", "tag, and the version stamped into the binary (default: git describe)")
	fs.StringVar(&o.platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated platforms")
	fs.StringVar(&o.revision, "revision", "", "source revision for the labels (default: git rev-parse HEAD)")
	fs.StringVar(&o.source, "source", "https://github.com/flotilla-cd/flotilla", "source URL for the labels")
	fs.StringVar(&o.caFile, "ca-file", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of CA certificates to put in the image (Debian's ca-certificates)")
	fs.StringVar(&o.digestFile, "digest-file", "", "also write the pushed reference by digest to this file")
	fs.StringVar(&o.module, "C", ".", "the module's directory")
	fs.BoolVar(&o.local, "local", false, "push to an in-process registry on a loopback address instead of -repo (to measure the build)")
	fs.StringVar(&o.update, "update", "", "replace the image section of this BENCHMARKS.md with the sizes and the build's time (the rest of the file is kept)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.local {
		reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
		defer reg.Close()
		o.repo = strings.TrimPrefix(reg.URL, "http://") + "/flotilla-cd/flotilla"
	}
	if o.repo == "" {
		return errors.New("-repo (or IMAGE_REPO) is required")
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	if err := o.fill(ctx); err != nil {
		return err
	}
	start := time.Now()
	ref, sizes, err := build(ctx, o)
	if err != nil {
		return err
	}
	fmt.Println(ref)
	for _, s := range sizes {
		fmt.Fprintf(os.Stderr, "%s: %.1f MB compressed\n", s.platform, float64(s.bytes)/1e6)
	}
	took := time.Since(start)
	fmt.Fprintf(os.Stderr, "built and pushed in %s\n", took.Round(100*time.Millisecond))
	if o.digestFile != "" {
		if err := os.WriteFile(o.digestFile, []byte(ref+"\n"), 0o644); err != nil {
			return err
		}
	}
	if o.update != "" {
		return updateSection(o.update, report(o, sizes, took))
	}
	return nil
}

// The section of BENCHMARKS.md the image's numbers live in.
const sectionHeading = "## Image"

// report is the image section: what was built, its size per platform
// against the target, and how long the build and push took.
func report(o options, sizes []size, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nMeasured %s on %d CPUs (%s): `go run ./deploy/tools/image -local -update BENCHMARKS.md` (in `make bench`, after a first build that warms Go's build cache, as `make image` runs on a developer's machine): both platforms built (`CGO_ENABLED=0`, `-trimpath`, stripped), assembled and pushed to an in-process registry on loopback. Target (issue #14): < 40 MB compressed.\n\n",
		sectionHeading, time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), runtime.Version())
	b.WriteString("| platform | compressed MB (manifest, config, layer) | target | verdict |\n|---|---:|---|---|\n")
	for _, s := range sizes {
		verdict := "met"
		if s.bytes >= 40e6 {
			verdict = "**missed**"
		}
		fmt.Fprintf(&b, "| %s | %.1f | < 40 MB | %s |\n", s.platform, float64(s.bytes)/1e6, verdict)
	}
	fmt.Fprintf(&b, "\n`make image` warm (%s): %s for both platforms, build and push.\n", o.platforms, took.Round(100*time.Millisecond))
	return b.String()
}

// updateSection replaces the image section of the Markdown file at path,
// or inserts it before "## Reproduce".
func updateSection(path, section string) error {
	return mdsection.Replace(path, sectionHeading, section, "## Reproduce")
}

// fill defaults the tag, revision and creation time from git.
func (o *options) fill(ctx context.Context) error {
	if o.tag == "" {
		out, err := gitOut(ctx, o.module, "describe", "--tags", "--always", "--dirty")
		if err != nil {
			return fmt.Errorf("-tag not given and git describe failed: %w", err)
		}
		o.tag = out
	}
	if o.revision == "" {
		if out, err := gitOut(ctx, o.module, "rev-parse", "HEAD"); err == nil {
			o.revision = out
		}
	}
	// SOURCE_DATE_EPOCH, else the commit's time: the same commit builds
	// the same image.
	o.created = time.Unix(0, 0).UTC()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
		}
		o.created = time.Unix(n, 0).UTC()
	} else if out, err := gitOut(ctx, o.module, "log", "-1", "--format=%ct"); err == nil {
		if n, err := strconv.ParseInt(out, 10, 64); err == nil {
			o.created = time.Unix(n, 0).UTC()
		}
	}
	return nil
}

func gitOut(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

type size struct {
	platform string
	bytes    int64
}

func build(ctx context.Context, o options) (string, []size, error) {
	tag, err := name.NewTag(o.repo+":"+o.tag, nameOpts(o.repo)...)
	if err != nil {
		return "", nil, err
	}
	ca, err := os.ReadFile(o.caFile)
	if err != nil {
		return "", nil, fmt.Errorf("reading the CA certificates (apt-get install ca-certificates): %w", err)
	}
	dir, err := os.MkdirTemp("", "flotilla-image-*")
	if err != nil {
		return "", nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	opts := image.Options{CACerts: ca, Version: o.tag, Revision: o.revision, Source: o.source, Created: o.created}
	for _, p := range strings.Split(o.platforms, ",") {
		plat, err := v1.ParsePlatform(strings.TrimSpace(p))
		if err != nil {
			return "", nil, err
		}
		if plat.OS != "linux" {
			return "", nil, fmt.Errorf("platform %s: the image is for linux only", p)
		}
		bin := filepath.Join(dir, "flotilla-"+strings.ReplaceAll(plat.String(), "/", "-"))
		if err := goBuild(ctx, o, *plat, bin); err != nil {
			return "", nil, err
		}
		opts.Binaries = append(opts.Binaries, image.Binary{Platform: *plat, Path: bin})
	}
	idx, err := image.Build(opts)
	if err != nil {
		return "", nil, err
	}
	if err := remote.WriteIndex(tag, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return "", nil, fmt.Errorf("pushing %s: %w", tag, err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return "", nil, err
	}
	sizes, err := compressedSizes(idx)
	if err != nil {
		return "", nil, err
	}
	return tag.Context().Digest(digest.String()).String(), sizes, nil
}

// goBuild builds a static, stripped binary for plat with the version
// stamped.
func goBuild(ctx context.Context, o options, plat v1.Platform, out string) error {
	ldflags := "-s -w -X github.com/flotilla-cd/flotilla/pkg/version.Version=" + o.tag
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, ".")
	cmd.Dir = o.module
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+plat.OS, "GOARCH="+plat.Architecture)
	if plat.Architecture == "arm" && plat.Variant != "" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(plat.Variant, "v"))
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for %s: %w", plat.String(), err)
	}
	return nil
}

// compressedSizes sums each platform's manifest, config and layers as
// pushed.
func compressedSizes(idx v1.ImageIndex) ([]size, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out []size
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		m, err := img.Manifest()
		if err != nil {
			return nil, err
		}
		n := d.Size + m.Config.Size
		for _, l := range m.Layers {
			n += l.Size
		}
		out = append(out, size{platform: d.Platform.String(), bytes: n})
	}
	return out, nil
}

// nameOpts lets a registry on a loopback address be reached over plain
// HTTP (the tests' local registry).
func nameOpts(repo string) []name.Option {
	host, _, _ := strings.Cut(repo, "/")
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	if h == "localhost" {
		return []name.Option{name.Insecure}
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return []name.Option{name.Insecure}
	}
	return nil
}
