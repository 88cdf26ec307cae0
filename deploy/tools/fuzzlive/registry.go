package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// sentinelRegistry is an in-process registry (go-containerregistry's) that
// holds the sentinels' images, so that flotilla's verify resolves them as
// it would a real push.
type sentinelRegistry struct {
	srv *httptest.Server
}

func startRegistry() *sentinelRegistry {
	return &sentinelRegistry{srv: httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))}
}

// host is the registry's host:port.
func (s *sentinelRegistry) host() string { return strings.TrimPrefix(s.srv.URL, "http://") }

func (s *sentinelRegistry) close() { s.srv.Close() }

// push pushes a random image as repository:tag and returns its digest.
func (s *sentinelRegistry) push(ctx context.Context, repository, tag string) (string, error) {
	ref, err := name.ParseReference(s.host() + "/" + repository + ":" + tag)
	if err != nil {
		return "", err
	}
	img, err := random.Image(256, 1)
	if err != nil {
		return "", err
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}
