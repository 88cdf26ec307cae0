package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const resourcesDoc = `
server: {resources: {namespaces: [team-a, team-a, "Team_B"], platformNamespaces: [platform, platform, "Plat_X"]}}
receivers:
  - {name: canaries, type: flagger, secret: {env: FLOTILLA_TEST_TOKEN}}
fleet:
  clusters: [{name: c1, kubeconfig: c1.kubeconfig}]
  waves: [{clusters: [c1]}]
applications:
  - {name: shop, image: registry.example.com/shop, workload: {name: shop}, service: {port: 80}}
`

// TestLoadWith: the applications given join the file's after its own,
// defaulted and validated with them; a problem of one is at its index
// after the file's; the applications given are not changed.
func TestLoadWith(t *testing.T) {
	t.Setenv("FLOTILLA_TEST_TOKEN", "token")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "c1.kubeconfig"), "apiVersion: v1\nkind: Config\n")
	path := writeFile(t, filepath.Join(dir, "config.yaml"), `
server: {resources: {}}
receivers:
  - {name: canaries, type: flagger, secret: {env: FLOTILLA_TEST_TOKEN}}
fleet:
  clusters: [{name: c1, kubeconfig: c1.kubeconfig}]
  waves: [{clusters: [c1]}]
applications:
  - {name: shop, image: registry.example.com/shop, workload: {name: shop}, service: {port: 80}}
`)
	web := Application{Name: "web", Image: "registry.example.com/web", Workload: Workload{Name: "web"}, Service: Service{Port: 8080}}
	given := []Application{web}
	c, fileApps, err := LoadWith(path, given)
	if err != nil {
		t.Fatal(err)
	}
	if fileApps != 1 || len(c.Applications) != 2 || c.Applications[1].Name != "web" {
		t.Fatalf("fileApps %d, applications %+v", fileApps, c.Applications)
	}
	if got := c.Applications[1]; got.Track != TrackMinorVersion || got.Namespace != "default" || got.Workload.Kind != KindDeployment {
		t.Errorf("web not defaulted: track %q, namespace %q, kind %q", got.Track, got.Namespace, got.Workload.Kind)
	}
	if diff := cmp.Diff([]Application{web}, given); diff != "" {
		t.Errorf("the applications given changed (-before +after):\n%s", diff)
	}

	bad := web
	bad.Name, bad.Semver = "api", "not a constraint"
	_, fileApps, err = LoadWith(path, []Application{web, bad})
	verr := (*ValidationError)(nil)
	if !errors.As(err, &verr) || fileApps != 1 {
		t.Fatalf("LoadWith = %v (fileApps %d), want a ValidationError", err, fileApps)
	}
	if len(verr.Problems) != 1 || verr.Problems[0].Path != "applications[2].semver" {
		t.Errorf("problems %v, want one at applications[2].semver", verr.Problems)
	}
}

// TestResources: server.resources' namespaces are DNS labels, each once;
// with it the file may have no application.
func TestResources(t *testing.T) {
	t.Setenv("FLOTILLA_TEST_TOKEN", "token")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "c1.kubeconfig"), "apiVersion: v1\nkind: Config\n")
	_, err := Parse([]byte(resourcesDoc), dir)
	verr := (*ValidationError)(nil)
	if !errors.As(err, &verr) {
		t.Fatalf("Parse = %v, want a ValidationError", err)
	}
	var paths []string
	for _, p := range verr.Problems {
		paths = append(paths, p.Path)
	}
	want := []string{"server.resources.namespaces[1]", "server.resources.namespaces[2]",
		"server.resources.platformNamespaces[1]", "server.resources.platformNamespaces[2]"}
	if diff := cmp.Diff(want, paths); diff != "" {
		t.Errorf("problems (-want +got):\n%s\n%v", diff, verr)
	}
	none := `
server: {resources: {namespaces: [team-a]}}
receivers:
  - {name: canaries, type: flagger, secret: {env: FLOTILLA_TEST_TOKEN}}
fleet:
  clusters: [{name: c1, kubeconfig: c1.kubeconfig}]
  waves: [{clusters: [c1]}]
`
	if _, err := Parse([]byte(none), dir); err != nil {
		t.Errorf("no application with server.resources: %v", err)
	}
	// The Cluster resources may bring every cluster: the file may have
	// none, and a wave's selector may select none of the file's.
	platform := `
server: {resources: {namespaces: [team-a], platformNamespaces: [platform]}}
receivers:
  - {name: canaries, type: flagger, secret: {env: FLOTILLA_TEST_TOKEN}}
fleet:
  waves: [{selector: {matchLabels: {tier: prod}}}]
`
	if _, err := Parse([]byte(platform), dir); err != nil {
		t.Errorf("no cluster with server.resources.platformNamespaces: %v", err)
	}
	_, err = Parse([]byte(strings.Replace(platform, ", platformNamespaces: [platform]", "", 1)), dir)
	if !errors.As(err, &verr) || len(verr.Problems) != 2 || verr.Problems[0].Path != "fleet.clusters" || verr.Problems[1].Path != "fleet.waves[0].selector" {
		t.Errorf("no cluster without platformNamespaces: %v, want fleet.clusters and fleet.waves[0].selector refused", err)
	}
}

// TestLoadExtraWaves: the waves given replace the file's waves, wave
// policy and freeze windows, validated with the rest; their problems are
// at the file's paths.
func TestLoadExtraWaves(t *testing.T) {
	t.Setenv("FLOTILLA_TEST_TOKEN", "token")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "c1.kubeconfig"), "apiVersion: v1\nkind: Config\n")
	path := filepath.Join(dir, "config.yaml")
	writeFile(t, path, `
receivers:
  - {name: canaries, type: flagger, secret: {env: FLOTILLA_TEST_TOKEN}}
fleet:
  clusters: [{name: c1, kubeconfig: c1.kubeconfig, labels: {tier: prod}}, {name: c2, kubeconfig: c1.kubeconfig, labels: {tier: canary}}]
  waves: [{name: all, clusters: [c1, c2]}]
  wavePolicy: {bakeTime: 1m}
applications:
  - {name: shop, image: registry.example.com/shop, workload: {name: shop}, service: {port: 80}}
`)
	two := &Waves{Waves: []Wave{
		{Name: "canary", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "canary"}}},
		{Name: "prod", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "prod"}}, Approvals: &Approvals{Required: 1}},
	}}
	c, _, err := LoadExtra(path, Extra{Waves: two})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, w := range c.Fleet.Waves {
		got[w.Name] = w.ClusterNames()
	}
	if diff := cmp.Diff(map[string][]string{"canary": {"c2"}, "prod": {"c1"}}, got); diff != "" {
		t.Errorf("waves (-want +got):\n%s", diff)
	}
	if c.Fleet.WavePolicy.BakeTime != nil || c.Fleet.Waves[1].Policy(c.Fleet.WavePolicy).Approvers() != 1 {
		t.Errorf("wave policy %+v: want the given one (no bake time), prod's approvals kept", c.Fleet.WavePolicy)
	}
	if two.Waves[0].Members != nil {
		t.Error("the waves given were changed")
	}
	one := &Waves{Waves: []Wave{{Name: "canary", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "canary"}}}}}
	_, _, err = LoadExtra(path, Extra{Waves: one})
	verr := (*ValidationError)(nil)
	if !errors.As(err, &verr) || len(verr.Problems) != 1 || verr.Problems[0].Path != "fleet.clusters[0]" || !strings.Contains(verr.Problems[0].Message, "is in no wave") {
		t.Errorf("waves leaving c1 out: %v, want c1 in no wave", err)
	}
}

// TestProjectNamespaces: an Application resource's application is the
// project's whose namespaces have its namespace; one another project
// lists by name is refused at its metadata.namespace, unless the lister
// names no namespace (then it is the lister's); a namespace is one
// project's, and only with server.resources.
func TestProjectNamespaces(t *testing.T) {
	t.Setenv("FLOTILLA_TEST_TOKEN", "token")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "c1.kubeconfig"), "apiVersion: v1\nkind: Config\n")
	doc := func(resources, projects string) string {
		return resources + `
receivers:
  - {name: canaries, type: flagger, secret: {env: FLOTILLA_TEST_TOKEN}}
fleet:
  clusters: [{name: c1, kubeconfig: c1.kubeconfig}]
  waves: [{clusters: [c1]}]
applications:
  - {name: shop, image: registry.example.com/shop, workload: {name: shop}, service: {port: 80}}
projects: ` + projects + "\n"
	}
	const watched = "server: {resources: {namespaces: [team-a, team-b, team-c]}}"
	web := func(ns string) Application {
		return Application{Name: "web", ResourceNamespace: ns, Image: "registry.example.com/web", Workload: Workload{Name: "web"}, Service: Service{Port: 80}}
	}
	tests := []struct {
		name     string
		doc      string
		ns       string // web's resource's namespace
		project  string // web's project
		problems map[string]string
	}{
		{name: "its namespace's project", doc: doc(watched, `[{name: a, namespaces: [team-a]}, {name: b, namespaces: [team-b]}]`), ns: "team-a", project: "a"},
		{name: "a namespace of no project", doc: doc(watched, `[{name: a, namespaces: [team-a]}]`), ns: "team-c", project: DefaultProject},
		{name: "listed by its namespace's project", doc: doc(watched, `[{name: a, applications: [web], namespaces: [team-a]}]`), ns: "team-a", project: "a"},
		{name: "listed by a project without namespaces", doc: doc(watched, `[{name: a, applications: [web]}]`), ns: "team-c", project: "a"},
		{name: "listed by another team's project", doc: doc(watched, `[{name: a, namespaces: [team-a]}, {name: b, applications: [web], namespaces: [team-b]}]`), ns: "team-a",
			problems: map[string]string{"applications[1].metadata.namespace": ProblemProjectConflict + `project "b" lists the application "web" (projects[1].applications), but its namespace team-a is project "a"'s`}},
		{name: "listed by a project, from a namespace of none", doc: doc(watched, `[{name: b, applications: [web], namespaces: [team-b]}]`), ns: "team-c",
			problems: map[string]string{"applications[1].metadata.namespace": ProblemProjectConflict + `project "b" lists the application "web" (projects[0].applications), but its namespace team-c is not among the project's namespaces [team-b]`}},
		{name: "a namespace in two projects", doc: doc(watched, `[{name: a, namespaces: [team-a]}, {name: b, namespaces: [team-a]}]`), ns: "team-c",
			problems: map[string]string{"projects[1].namespaces[0]": `namespace "team-a" is project a's already`}},
		{name: "namespaces without server.resources", doc: doc("", `[{name: a, namespaces: [team-a]}]`),
			problems: map[string]string{"projects[0].namespaces[0]": "a project's namespaces are those of the Application resources"}},
		{name: "a project lists an application absent for now", doc: doc(watched, `[{name: a, applications: [gone], namespaces: [team-a]}]`), ns: "team-a", project: "a"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("config-%d.yaml", i))
			writeFile(t, path, tc.doc)
			var extra []Application
			if tc.ns != "" {
				extra = []Application{web(tc.ns)}
			}
			c, _, err := LoadWith(path, extra)
			verr := (*ValidationError)(nil)
			switch {
			case len(tc.problems) == 0 && err != nil:
				t.Fatal(err)
			case len(tc.problems) > 0:
				if !errors.As(err, &verr) {
					t.Fatalf("LoadWith = %v, want problems %v", err, tc.problems)
				}
				got := map[string]string{}
				for _, p := range verr.Problems {
					got[p.Path] = p.Message
				}
				for path, want := range tc.problems {
					if !strings.HasPrefix(got[path], want) {
						t.Errorf("problem at %s = %q, want %q...", path, got[path], want)
					}
				}
				if len(got) != len(tc.problems) {
					t.Errorf("problems %v, want %d", verr.Problems, len(tc.problems))
				}
				return
			}
			if got := c.ProjectOf("web"); got != tc.project {
				t.Errorf("ProjectOf(web) = %q, want %q", got, tc.project)
			}
		})
	}
}
