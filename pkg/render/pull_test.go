package render

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	helmregistry "helm.sh/helm/v3/pkg/registry"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/kubecd"
)

// packageChart packages a one-ConfigMap chart and returns its archive.
func packageChart(t *testing.T, name, version, greeting string) []byte {
	t.Helper()
	dir := t.TempDir()
	for p, c := range map[string]string{
		"Chart.yaml":          fmt.Sprintf("apiVersion: v2\nname: %s\nversion: %s\n", name, version),
		"values.yaml":         "greeting: " + greeting + "\n",
		"templates/conf.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}}\ndata: {greeting: {{ .Values.greeting | quote }}}\n",
	} {
		if err := writeTestFile(filepath.Join(dir, "src", p), c); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := loader.Load(filepath.Join(dir, "src"))
	if err != nil {
		t.Fatal(err)
	}
	tgz, err := chartutil.Save(ch, dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(tgz)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeTestFile(p, content string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(content), 0o644)
}

// helmRepo serves index.yaml and the archives of a Helm repository;
// digest overrides the index's digest of an archive.
type helmRepo struct {
	archives map[string][]byte // file name -> archive
	digests  map[string]string
}

func (h *helmRepo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/index.yaml" {
		var b strings.Builder
		b.WriteString("apiVersion: v1\nentries:\n")
		byChart := map[string][]string{}
		for f := range h.archives {
			name := f[:strings.LastIndex(f, "-")]
			byChart[name] = append(byChart[name], f)
		}
		for name, fs := range byChart {
			fmt.Fprintf(&b, "  %s:\n", name)
			for _, f := range fs {
				s := sha256.Sum256(h.archives[f])
				d := hex.EncodeToString(s[:])
				if o, ok := h.digests[f]; ok {
					d = o
				}
				v := strings.TrimSuffix(f[len(name)+1:], ".tgz")
				fmt.Fprintf(&b, "    - {name: %s, version: %s, digest: %q, urls: [%s]}\n", name, v, d, f)
			}
		}
		_, _ = io.WriteString(w, b.String())
		return
	}
	if a, ok := h.archives[strings.TrimPrefix(r.URL.Path, "/")]; ok {
		_, _ = w.Write(a)
		return
	}
	http.NotFound(w, r)
}

// TestPullChart pulls chart references from a Helm repository served by
// the test and from an in-process OCI registry: pinned by version,
// verified by digest, cached; a version the repository lacks, an archive
// whose digest is not the index's and a version republished with other
// bytes are errors naming why.
func TestPullChart(t *testing.T) {
	web1 := packageChart(t, "web", "1.0.0", "hello")
	repo := &helmRepo{archives: map[string][]byte{"web-1.0.0.tgz": web1, "bad-1.0.0.tgz": packageChart(t, "bad", "1.0.0", "x")},
		digests: map[string]string{"bad-1.0.0.tgz": strings.Repeat("0", 64)}}
	hsrv := httptest.NewServer(repo)
	defer hsrv.Close()

	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	client, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP(), helmregistry.ClientOptWriter(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Push(packageChart(t, "api", "0.2.0", "oci"), host+"/charts/api:0.2.0"); err != nil {
		t.Fatal(err)
	}

	cache := chartCache{t.TempDir()}
	for _, tc := range []struct {
		name string
		ref  kubecd.ChartRef
		want string // the ConfigMap's greeting, or the error's text
	}{
		{"helm repository", kubecd.ChartRef{Repository: hsrv.URL, Name: "web", Version: "1.0.0"}, "hello"},
		{"oci registry", kubecd.ChartRef{Repository: "oci://" + host + "/charts/api", Version: "0.2.0"}, "oci"},
		{"missing version in a repository", kubecd.ChartRef{Repository: hsrv.URL, Name: "web", Version: "2.0.0"}, "version 2.0.0 is not in the repository (it has 1.0.0)"},
		{"missing chart in a repository", kubecd.ChartRef{Repository: hsrv.URL, Name: "db", Version: "1.0.0"}, `the repository has no chart "db"`},
		{"missing version in a registry", kubecd.ChartRef{Repository: "oci://" + host + "/charts/api", Version: "9.9.9"}, "version 9.9.9 is not in the registry"},
		{"digest mismatch", kubecd.ChartRef{Repository: hsrv.URL, Name: "bad", Version: "1.0.0"}, "the repository gives sha256:0000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := pullChart(context.Background(), cache, tc.ref)
			got := ""
			if err != nil {
				if !errors.Is(err, ErrChartPull) || !fault.IsPermanent(err) {
					t.Errorf("error %v: want a permanent ErrChartPull", err)
				}
				got = err.Error()
			} else {
				objs, err := templateChart(t.TempDir(), ch, Chart{ReleaseName: "r"})
				if err != nil {
					t.Fatal(err)
				}
				got = objs[0].Object["data"].(map[string]any)["greeting"].(string)
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want it to contain %q", got, tc.want)
			}
		})
	}

	// Pinned and cached: the repository gone, the chart still renders.
	hsrv.Close()
	reg.Close()
	for _, ref := range []kubecd.ChartRef{{Repository: hsrv.URL, Name: "web", Version: "1.0.0"}, {Repository: "oci://" + host + "/charts/api", Version: "0.2.0"}} {
		if _, err := pullChart(context.Background(), cache, ref); err != nil {
			t.Errorf("%s from the cache: %v", ref, err)
		}
	}

	// Republished under the same version with other bytes: refused, the
	// pin names both digests.
	repo.archives["web-1.0.0.tgz"] = packageChart(t, "web", "1.0.0", "changed")
	hsrv2 := httptest.NewServer(repo)
	defer hsrv2.Close()
	ref := kubecd.ChartRef{Repository: hsrv2.URL, Name: "web", Version: "1.0.0"}
	if _, err := pullChart(context.Background(), cache, ref); err != nil {
		t.Fatal(err) // another URL: another pin
	}
	repo.archives["web-1.0.0.tgz"] = packageChart(t, "web", "1.0.0", "changed again")
	if err := os.RemoveAll(filepath.Join(cache.dir, "sha256")); err != nil {
		t.Fatal(err)
	}
	_, err = pullChart(context.Background(), cache, ref)
	if err == nil || !strings.Contains(err.Error(), "pinned when this version was first pulled") {
		t.Errorf("republished: got %v", err)
	}
	if d := cmp.Diff(true, errors.Is(err, ErrChartPull)); d != "" {
		t.Error(d)
	}
}
