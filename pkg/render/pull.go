package render

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/repo"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/kubecd"
)

// ChartCacheEnv names the directory pulled charts are cached in; unset,
// the user's cache directory's flotilla/charts (the system's temporary
// directory when there is none).
const ChartCacheEnv = "FLOTILLA_CHART_CACHE"

// ErrChartPull is a chart reference that could not be pulled: a version
// the repository does not have, or an archive whose digest is not the one
// it was pinned to.
var ErrChartPull = errors.New("pulling chart")

// chartCache is where pulled charts are kept: <dir>/sha256/<hex>.tgz, the
// archive by its digest, and <dir>/pins/<hex of the reference>, the digest
// a reference and version resolved to when first pulled. A pinned version
// is read from the cache without asking the repository again; a
// repository that later serves other bytes under the same version is an
// error, not a new chart.
type chartCache struct{ dir string }

func defaultChartCache() chartCache {
	if d := os.Getenv(ChartCacheEnv); d != "" {
		return chartCache{d}
	}
	if d, err := os.UserCacheDir(); err == nil {
		return chartCache{filepath.Join(d, "flotilla", "charts")}
	}
	return chartCache{filepath.Join(os.TempDir(), "flotilla-charts")}
}

func sum(data []byte) string {
	s := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(s[:])
}

func (c chartCache) pinPath(ref kubecd.ChartRef) string {
	s := sha256.Sum256([]byte(ref.String()))
	return filepath.Join(c.dir, "pins", hex.EncodeToString(s[:]))
}

func (c chartCache) archivePath(digest string) string {
	return filepath.Join(c.dir, "sha256", strings.TrimPrefix(digest, "sha256:")+".tgz")
}

// pinned is the digest ref was pinned to, "" if it never was.
func (c chartCache) pinned(ref kubecd.ChartRef) string {
	b, err := os.ReadFile(c.pinPath(ref))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// cached is the archive of digest, if the cache has it intact.
func (c chartCache) cached(digest string) []byte {
	b, err := os.ReadFile(c.archivePath(digest))
	if err != nil || sum(b) != digest {
		return nil
	}
	return b
}

// keep stores the archive and pins ref to its digest.
func (c chartCache) keep(ref kubecd.ChartRef, data []byte) error {
	digest := sum(data)
	for p, b := range map[string][]byte{c.archivePath(digest): data, c.pinPath(ref): []byte(digest + "\n")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("caching chart %s: %w", ref, err)
		}
		tmp := fmt.Sprintf("%s.%d.tmp", p, os.Getpid())
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return fmt.Errorf("caching chart %s: %w", ref, err)
		}
		if err := os.Rename(tmp, p); err != nil {
			return fmt.Errorf("caching chart %s: %w", ref, err)
		}
	}
	return nil
}

// pullChart returns the chart ref names: from the cache when the version
// was pinned and its archive is there, else pulled (an OCI registry with
// Helm's registry client, a Helm repository through its index), its
// digest checked against the registry's descriptor or the index's digest,
// and against the pin; then cached and pinned.
func pullChart(ctx context.Context, c chartCache, ref kubecd.ChartRef) (*chart.Chart, error) {
	pin := c.pinned(ref)
	data := []byte(nil)
	if pin != "" {
		data = c.cached(pin)
	}
	if data == nil {
		var digest string
		var err error
		if strings.HasPrefix(ref.Repository, "oci://") {
			data, digest, err = pullOCI(ref)
		} else {
			data, digest, err = pullHTTP(ctx, ref)
		}
		if err != nil {
			return nil, err
		}
		if got := sum(data); got != digest {
			return nil, fault.Permanent(fmt.Errorf("%w %s: the archive's digest is %s, the repository gives %s", ErrChartPull, ref, got, digest))
		}
		if pin != "" && digest != pin {
			return nil, fault.Permanent(fmt.Errorf("%w %s: digest %s differs from %s, pinned when this version was first pulled (the repository published other bytes under the same version)", ErrChartPull, ref, digest, pin))
		}
		if err := c.keep(ref, data); err != nil {
			return nil, err
		}
	}
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, permanentf("%w: chart %s: %w", ErrRender, ref, err)
	}
	if ch.Metadata.Version != ref.Version {
		return nil, fault.Permanent(fmt.Errorf("%w %s: the archive is version %s", ErrChartPull, ref, ch.Metadata.Version))
	}
	return ch, nil
}

// pullOCI pulls the chart layer of <repository>:<version>. Plain HTTP is
// used for a loopback registry only (as Docker treats localhost).
func pullOCI(ref kubecd.ChartRef) (data []byte, digest string, err error) {
	name := strings.TrimPrefix(ref.Repository, "oci://")
	opts := []registry.ClientOption{registry.ClientOptWriter(io.Discard), registry.ClientOptHTTPClient(&http.Client{Timeout: 2 * time.Minute})}
	if loopback(strings.SplitN(name, "/", 2)[0]) {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	client, err := registry.NewClient(opts...)
	if err != nil {
		return nil, "", fmt.Errorf("%w %s: %w", ErrChartPull, ref, err)
	}
	// OCI tags cannot hold "+": Helm pushes 1.0.0+b as 1.0.0_b.
	res, err := client.Pull(name + ":" + strings.ReplaceAll(ref.Version, "+", "_"))
	if err != nil {
		if strings.Contains(err.Error(), "not found") {
			return nil, "", fault.Permanent(fmt.Errorf("%w %s: version %s is not in the registry: %w", ErrChartPull, ref, ref.Version, err))
		}
		return nil, "", fmt.Errorf("%w %s: %w", ErrChartPull, ref, err)
	}
	return res.Chart.Data, res.Chart.Digest, nil
}

// pullHTTP reads the repository's index.yaml, finds the version and
// downloads its archive; the index's digest is the one it must have.
func pullHTTP(ctx context.Context, ref kubecd.ChartRef) (data []byte, digest string, err error) {
	base, err := url.Parse(strings.TrimSuffix(ref.Repository, "/") + "/")
	if err != nil {
		return nil, "", fault.Permanent(fmt.Errorf("%w %s: repository %q: %w", ErrChartPull, ref, ref.Repository, err))
	}
	b, err := get(ctx, base.JoinPath("index.yaml").String())
	if err != nil {
		return nil, "", fmt.Errorf("%w %s: reading the index: %w", ErrChartPull, ref, err)
	}
	var idx repo.IndexFile
	if err := yaml.Unmarshal(b, &idx); err != nil {
		return nil, "", fault.Permanent(fmt.Errorf("%w %s: the index: %w", ErrChartPull, ref, err))
	}
	var cv *repo.ChartVersion
	var versions []string
	for _, v := range idx.Entries[ref.Name] {
		versions = append(versions, v.Version)
		if v.Version == ref.Version {
			cv = v
		}
	}
	switch {
	case len(versions) == 0:
		return nil, "", fault.Permanent(fmt.Errorf("%w %s: the repository has no chart %q", ErrChartPull, ref, ref.Name))
	case cv == nil:
		return nil, "", fault.Permanent(fmt.Errorf("%w %s: version %s is not in the repository (it has %s)", ErrChartPull, ref, ref.Version, strings.Join(versions, ", ")))
	case len(cv.URLs) == 0:
		return nil, "", fault.Permanent(fmt.Errorf("%w %s: the index lists no URL for it", ErrChartPull, ref))
	case cv.Digest == "":
		return nil, "", fault.Permanent(fmt.Errorf("%w %s: the index gives no digest, so the archive cannot be verified", ErrChartPull, ref))
	}
	u, err := base.Parse(cv.URLs[0])
	if err != nil {
		return nil, "", fault.Permanent(fmt.Errorf("%w %s: URL %q: %w", ErrChartPull, ref, cv.URLs[0], err))
	}
	if data, err = get(ctx, u.String()); err != nil {
		return nil, "", fmt.Errorf("%w %s: %w", ErrChartPull, ref, err)
	}
	return data, "sha256:" + strings.TrimPrefix(cv.Digest, "sha256:"), nil
}

func get(ctx context.Context, u string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fault.Permanent(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		err := fmt.Errorf("GET %s: %s", u, resp.Status)
		if resp.StatusCode == http.StatusNotFound {
			return nil, fault.Permanent(err)
		}
		return nil, err
	}
	return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
}

func loopback(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
