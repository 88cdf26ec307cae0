package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestCarries(t *testing.T) {
	const d = "sha256:0123"
	tests := []struct {
		img  string
		want bool
	}{
		{"127.0.0.1:5000/peers/keel-webhook:1.2.0", true},         // Keel writes the tag
		{"127.0.0.1:5000/peers/flotilla-waves@sha256:0123", true}, // flotilla the digest
		{"127.0.0.1:5000/peers/flotilla-waves:1.2.0@sha256:0123", true},
		{"127.0.0.1:5000/peers/keel-webhook:1.12.0", false},
		{"127.0.0.1:5000/peers/keel-webhook:1.2.0@sha256:4567", true}, // the tag, whatever the digest
		{"127.0.0.1:5000/peers/flotilla-waves@sha256:4567", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := carries(tt.img, "1.2.0", d); got != tt.want {
			t.Errorf("carries(%q) = %v, want %v", tt.img, got, tt.want)
		}
	}
}

func TestStatsOf(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		var out []time.Duration
		for _, x := range n {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	tests := []struct {
		name string
		in   []time.Duration
		want stats
	}{
		{"none", nil, stats{}},
		{"odd", ms(30, 10, 20), stats{n: 3, median: 20 * time.Millisecond, min: 10 * time.Millisecond, max: 30 * time.Millisecond}},
		{"even", ms(40, 10, 20, 30), stats{n: 4, median: 25 * time.Millisecond, min: 10 * time.Millisecond, max: 40 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, statsOf(tt.in), cmp.AllowUnexported(stats{})); diff != "" {
				t.Errorf("statsOf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReceiverPath(t *testing.T) {
	// Flux's Receiver.GetWebhookPath: /hook/ and the hex SHA-256 of
	// token+name+namespace; this digest is `printf tokgitflux-webhook | sha256sum`.
	want := "/hook/" + "72268cdcbe5b084f268f6a272459a2ebf52fabdc8db4b6ace872e8e6f148bf0f"
	if got := receiverPath("tok", "git", "flux-webhook"); got != want {
		t.Errorf("receiverPath = %q, want %q", got, want)
	}
}

func TestFluxObjects(t *testing.T) {
	reg := &registry{host: "127.0.0.1:5000"}
	kinds := func(s *subject) []string {
		var out []string
		for _, o := range fluxObjects(s, "c2", "http://127.0.0.1:1/deploy.git", "tok") {
			out = append(out, o.GetKind()+"/"+o.GetName())
		}
		return out
	}
	common := []string{"Secret/webhook-token", "GitRepository/deploy", "Kustomization/podinfo", "Receiver/git",
		"ImageRepository/podinfo", "ImagePolicy/podinfo", "ImageUpdateAutomation/podinfo"}
	tests := []struct {
		name string
		s    *subject
		want []string
	}{
		{"webhook: the registry's Receiver too", &subject{tool: "flux", ns: "flux-webhook", repo: "peers/flux-webhook", reg: reg}, append(slices.Clone(common), "Receiver/registry")},
		{"polling: no registry Receiver", &subject{tool: "flux", ns: "flux-poll", repo: "peers/flux-poll", reg: reg, poll: true}, common},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, kinds(tt.s)); diff != "" {
				t.Errorf("fluxObjects (-want +got):\n%s", diff)
			}
		})
	}
	s := &subject{tool: "flux", ns: "flux-webhook", repo: "peers/flux-webhook", reg: reg}
	for _, o := range fluxObjects(s, "c2", "http://127.0.0.1:1/deploy.git", "tok") {
		switch o.GetKind() {
		case "Kustomization", "ImageUpdateAutomation":
			path, _, _ := unstructured.NestedString(o.Object, "spec", "path")
			if o.GetKind() == "ImageUpdateAutomation" {
				path, _, _ = unstructured.NestedString(o.Object, "spec", "update", "path")
			}
			if path != "./flux-webhook/c2" {
				t.Errorf("%s's path = %q, want the cluster's directory ./flux-webhook/c2", o.GetKind(), path)
			}
		case "ImageRepository":
			img, _, _ := unstructured.NestedString(o.Object, "spec", "image")
			if img != "127.0.0.1:5000/peers/flux-webhook" {
				t.Errorf("ImageRepository's image = %q", img)
			}
		}
	}
	files := fluxManifests(s, "c2")
	if !strings.Contains(files["flux-webhook/c2/deployment.yaml"], `image: 127.0.0.1:5000/peers/flux-webhook:1.0.0 # {"$imagepolicy": "flux-webhook:podinfo"}`) {
		t.Errorf("the Deployment's image is not marked for the ImagePolicy:\n%s", files["flux-webhook/c2/deployment.yaml"])
	}
	if strings.Contains(files["flux-webhook/c2/deployment.yaml"], "replicas") {
		t.Errorf("the Deployment sets replicas, which Flux would reset under Flagger")
	}
}

// TestGitServerPushWebhook pushes to the bench's git server with the git
// CLI (the real git-http-backend behind it) and checks that the push
// webhook went out, and that a fetch alone sends none.
func TestGitServerPushWebhook(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed (make deps)")
	}
	hooks := make(chan string, 10)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hooks <- r.Method + " " + r.URL.Path
	}))
	defer recv.Close()
	g, err := newGitServer(t.Context(), t.TempDir(), map[string]string{"a/deployment.yaml": "x: 1\n"}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer g.stop()
	g.onPush(recv.URL + "/hook/abc")
	work := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "git", args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("clone", "-q", g.url, ".")
	select {
	case h := <-hooks:
		t.Fatalf("a clone sent the push webhook %q", h)
	case <-time.After(300 * time.Millisecond):
	}
	if err := os.WriteFile(filepath.Join(work, "a", "deployment.yaml"), []byte("x: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("commit", "-q", "-am", "bump")
	git("push", "-q", "origin", "main")
	select {
	case h := <-hooks:
		if h != "POST /hook/abc" {
			t.Errorf("push webhook = %q, want POST /hook/abc", h)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no push webhook after a push")
	}
}

func TestNotRunning(t *testing.T) {
	built := t.TempDir()
	for _, c := range fluxControllers {
		if err := os.WriteFile(fluxBinary(built, c), nil, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(fluxBinary(built, c)+"-crds", 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(built, "kargo-"+KargoVersion), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	noCRDs := t.TempDir()
	if err := os.WriteFile(filepath.Join(noCRDs, "kargo-"+KargoVersion), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(built, "kargo-"+KargoVersion+"-crds"), 0o755); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	tests := []struct {
		name                string
		o                   options
		want                []string
		wantFlux, wantKargo bool
	}{
		{"all built", options{flux: true, kargo: true, fluxDir: built, peersDir: built}, nil, true, true},
		{"Flux left out, and Kargo with it", options{flux: false, kargo: true, fluxDir: built, peersDir: built},
			[]string{"Flux: left out (-flux=false)", "Kargo 1.11.2: left out with Flux, whose controllers apply its commits"}, false, false},
		{"Kargo left out", options{flux: true, kargo: false, fluxDir: built, peersDir: built},
			[]string{"Kargo: left out (-kargo=false)"}, true, false},
		{"Kargo without its CRDs", options{flux: true, kargo: true, fluxDir: built, peersDir: noCRDs},
			[]string{"Kargo: not built"}, true, false},
		{"nothing built", options{flux: true, kargo: true, fluxDir: empty, peersDir: empty},
			[]string{"Flux: not built", "Kargo 1.11.2: left out with Flux, whose controllers apply its commits"}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.o
			got := notRunning(&o)
			// The error's text after "not built" names the path.
			for i := range got {
				if strings.HasPrefix(got[i], "Flux (") && strings.Contains(got[i], ": not built: ") {
					got[i] = "Flux: not built"
				}
				if strings.HasPrefix(got[i], "Kargo "+KargoVersion+": not built: ") {
					got[i] = "Kargo: not built"
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("notRunning (-want +got):\n%s", diff)
			}
			if o.flux != tt.wantFlux || o.kargo != tt.wantKargo {
				t.Errorf("flux, kargo = %v, %v, want %v, %v", o.flux, o.kargo, tt.wantFlux, tt.wantKargo)
			}
		})
	}
}

// TestUpdateSection puts the report where docs/peers.md reads it: in place
// of an earlier run's section, whatever its date, else before the list of
// what is not measured yet (it once went to the top: the heading it looked
// for lacked the "(issue #34)" the page's heading has).
func TestUpdateSection(t *testing.T) {
	page := "# Peers\n\n## Building the peers\n\nb\n\n## Results\n\nr\n\n" + beforeHeading + "\n\n- Kargo\n"
	report := "\n" + headingPrefix + " (2026-12-03)\n\nnew\n\n"
	tests := []struct {
		name, doc, want string
	}{
		{"first run", page,
			"# Peers\n\n## Building the peers\n\nb\n\n## Results\n\nr\n\n" + headingPrefix + " (2026-12-03)\n\nnew\n\n" + beforeHeading + "\n\n- Kargo\n"},
		{"an earlier run's section replaced in place",
			"# Peers\n\n" + headingPrefix + " (2026-12-01)\n\nold\n\n## Results\n\nr\n\n" + beforeHeading + "\n",
			"# Peers\n\n" + headingPrefix + " (2026-12-03)\n\nnew\n\n## Results\n\nr\n\n" + beforeHeading + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "peers.md")
			if err := os.WriteFile(path, []byte(tt.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := updateSection(path, report); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("page (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUpdateBenchmarks puts the same report into BENCHMARKS.md under its
// own heading, linking docs/peers.md and the chart from the repository's
// root: before "## Reproduce" the first time, in place of the earlier run's
// section after.
func TestUpdateBenchmarks(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "BENCHMARKS.md")
	doc := "# Benchmarks\n\n## A\n\na\n\n" + benchmarksBefore + "\n\nr\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	o := options{clusters: 3, pushes: 1, benchmarks: path, chart: filepath.Join(dir, "docs", "peers-fleet-wide.png")}
	for run := range 2 {
		if err := updateBenchmarks(o, chartResults()); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		page := string(got)
		if n := strings.Count(page, benchmarksHeading); n != 1 {
			t.Fatalf("run %d: %d sections headed %q, want 1:\n%s", run+1, n, benchmarksHeading, page)
		}
		if strings.Contains(page, headingPrefix) {
			t.Errorf("run %d: the section keeps docs/peers.md's heading %q", run+1, headingPrefix)
		}
		for _, want := range []string{"(docs/peers.md)", "](docs/peers-fleet-wide.png)", "| flotilla |"} {
			if !strings.Contains(page, want) {
				t.Errorf("run %d: no %q in\n%s", run+1, want, page)
			}
		}
		if i, j := strings.Index(page, benchmarksHeading), strings.Index(page, benchmarksBefore); i < strings.Index(page, "## A") || i > j {
			t.Errorf("run %d: the section is not between ## A and %s:\n%s", run+1, benchmarksBefore, page)
		}
	}
}
