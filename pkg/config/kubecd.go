package config

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/kubecd"
)

// KubeCD makes applications, clusters and waves of a repository's KubeCD
// files (environments.yaml and its release files, read as KubeCD writes
// them, see pkg/kubecd and docs/kubecd.md):
//   - each KubeCD cluster (an environment's clusterName, or its inline
//     provider's cluster) is the fleet's cluster of that name, or a new
//     one reached through Kubeconfig with the provider's context;
//   - without fleet.waves, each environment in file order is a wave of the
//     clusters no earlier environment had (named after the environment);
//   - each release (by name and namespace) is a git application of the
//     repository, render kubecd, on the clusters of the environments that
//     declare it: a cluster renders the release as its environment
//     declares it at the rolled-out commit, and its canary targets the
//     Deployment named after the release.
type KubeCD struct {
	// Dir is the checkout holding the files (relative to this config
	// file); the files are read from it when flotilla starts. Required.
	Dir string `json:"dir"`
	// Environments is the environments file in Dir. Default
	// environments.yaml.
	Environments string `json:"environments"`
	// Kubeconfig reaches the clusters the fleet does not list. Default
	// environments.yaml's kubeConfig, else $KUBECONFIG's first file, else
	// ~/.kube/config.
	Kubeconfig string `json:"kubeconfig"`
	// Application is what every release's application has besides what
	// the files say: service, delivery, workload.kind, validation,
	// source.git's url (default: the repository holding Dir), branch,
	// tags, prune, allowedImages and credentials, ... Refused here: name,
	// image, namespace, workload.name, clusterSelector and source.git's
	// paths, render and helm, which the files give.
	Application *Application `json:"application"`
}

// KubeCDSource is the KubeCD release a git application renders (set from
// Config.KubeCD; there is no YAML for it).
type KubeCDSource struct {
	// EnvironmentsFile is environments.yaml's path in the repository.
	EnvironmentsFile string
	Release          string
	// Environments names each cluster's environment; Tracked its paths.
	Environments map[string]string
	Tracked      map[string][]string
	// Images are what the release's image triggers track in each of its
	// environments, as the files flotilla started with resolve them: a
	// verified push of a new tag of one of them that the trigger's track
	// accepts is committed to the release's values (pkg/gitops/triggers),
	// and that commit rolls out.
	Images []kubecd.Image
}

// DefaultKubeCDServicePort is the port a KubeCD release's canary serves on
// unless kubecd.application.service.port says otherwise: the files name no
// port.
const DefaultKubeCDServicePort = 80

// LabelKubeCDPrefix prefixes the label put on each cluster a KubeCD
// release's application targets (its clusterSelector).
const LabelKubeCDPrefix = "kubecd.flotilla.dev/"

// RenderKubeCD is GitSource.Render of the applications made of KubeCD's
// files.
const RenderKubeCD = "kubecd"

// expandKubeCD adds the applications, clusters and waves of c.KubeCD to c,
// base being the config file's directory. What cannot be honoured is
// returned as problems at kubecd.*.
func expandKubeCD(c *Config, base string) []Problem {
	k := c.KubeCD
	if k == nil {
		return nil
	}
	var ps []Problem
	add := func(path, format string, args ...any) {
		ps = append(ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if k.Dir == "" {
		add("kubecd.dir", "required: the checkout holding environments.yaml")
		return ps
	}
	tmpl := &Application{}
	if k.Application != nil {
		tmpl = k.Application
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"name", tmpl.Name != ""}, {"image", tmpl.Image != ""}, {"namespace", tmpl.Namespace != ""},
		{"workload.name", tmpl.Workload.Name != ""}, {"clusterSelector", tmpl.ClusterSelector != nil},
		{"source.git.paths", tmpl.Git() != nil && len(tmpl.Git().Paths) > 0}, {"source.git.render", tmpl.Git() != nil && tmpl.Git().Render != ""},
		{"source.git.helm", tmpl.Git() != nil && tmpl.Git().Helm != nil},
	} {
		if f.set {
			add("kubecd.application."+f.name, "given by KubeCD's files: leave it out")
		}
	}
	if tmpl.Source != nil && tmpl.Git() == nil {
		add("kubecd.application.source.git", "required under source (or leave source out)")
	}
	dir := resolvePath(base, k.Dir)
	root := gitRoot(dir)
	rel, err := filepath.Rel(root, filepath.Join(dir, cmp.Or(k.Environments, kubecd.DefaultEnvironmentsFile)))
	if err != nil || strings.HasPrefix(rel, "..") {
		add("kubecd.environments", "%q: want a file inside %s", k.Environments, dir)
		return ps
	}
	files, err := kubecd.Load(root, filepath.ToSlash(rel))
	if kerr := (*kubecd.Error)(nil); errors.As(err, &kerr) {
		for _, m := range kerr.Problems {
			add("kubecd", "%s", m)
		}
	} else if err != nil {
		add("kubecd", "%v", err)
	}
	if len(ps) > 0 {
		return ps
	}
	kubecdClusters(c, k, base, files)
	if len(c.Fleet.Waves) == 0 {
		placed := map[string]bool{}
		for _, e := range files.Environments {
			if placed[e.Cluster] {
				continue
			}
			placed[e.Cluster] = true
			c.Fleet.Waves = append(c.Fleet.Waves, Wave{Name: e.Name, Clusters: []string{e.Cluster}})
		}
	}
	// One application per release name and namespace; a name used in two
	// namespaces is prefixed with the namespace.
	type key struct{ release, namespace string }
	var keys []key
	namespaces := map[string]map[string]bool{}
	for _, e := range files.Environments {
		for _, r := range e.Releases {
			kk := key{r.Name, e.Namespace}
			if !slices.Contains(keys, kk) {
				keys = append(keys, kk)
			}
			if namespaces[r.Name] == nil {
				namespaces[r.Name] = map[string]bool{}
			}
			namespaces[r.Name][e.Namespace] = true
		}
	}
	url := root
	if g := tmpl.Git(); g != nil && g.URL != "" {
		url = g.URL
	}
	for _, kk := range keys {
		name := kk.release
		if len(namespaces[kk.release]) > 1 {
			name = kk.namespace + "-" + kk.release
		}
		a, err := copyApplication(tmpl)
		if err != nil {
			add("kubecd.application", "%v", err)
			return ps
		}
		a.Name, a.Namespace, a.Workload.Name = name, kk.namespace, kk.release
		if a.Service.Port == 0 {
			a.Service.Port = DefaultKubeCDServicePort
		}
		g := a.Git()
		if g == nil {
			g = &GitSource{}
			a.Source = &Source{Git: g}
		}
		g.URL, g.Render = url, RenderKubeCD
		src := &KubeCDSource{EnvironmentsFile: files.EnvironmentsFile, Release: kk.release, Environments: map[string]string{}, Tracked: map[string][]string{}}
		label := LabelKubeCDPrefix + name
		for _, e := range files.Environments {
			r := e.Release(kk.release)
			if r == nil || e.Namespace != kk.namespace {
				continue
			}
			if other, dup := src.Environments[e.Cluster]; dup {
				add("kubecd", "release %s is declared in environments %s and %s, both in namespace %s of cluster %s: one of them must go", kk.release, other, e.Name, e.Namespace, e.Cluster)
				continue
			}
			src.Environments[e.Cluster] = e.Name
			src.Tracked[e.Cluster] = files.TrackedPaths(&e, *r)
			imgs, err := files.Images(root, &e, *r)
			if kerr := (*kubecd.Error)(nil); errors.As(err, &kerr) {
				for _, m := range kerr.Problems {
					add("kubecd", "%s", m)
				}
			} else if err != nil {
				add("kubecd", "%v", err)
			}
			if len(imgs) > 0 && len(src.Images) == 0 && (tmpl.Git() == nil || tmpl.Git().URL == "") {
				add("kubecd.application.source.git.url", "required: release %s has image triggers, and flotilla commits their new tags there (kubecd.dir is a checkout flotilla only reads)", kk.release)
			}
			src.Images = append(src.Images, imgs...)
			for i := range c.Fleet.Clusters {
				if cl := &c.Fleet.Clusters[i]; cl.Name == e.Cluster {
					if cl.Labels == nil {
						cl.Labels = map[string]string{}
					}
					cl.Labels[label] = "true"
				}
			}
		}
		g.KubeCD = src
		a.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{label: "true"}}
		c.Applications = append(c.Applications, a)
	}
	return ps
}

// kubecdClusters adds to the fleet the clusters the environments name and
// the fleet does not list, reached through the KubeCD kubeconfig with each
// provider's context.
func kubecdClusters(c *Config, k *KubeCD, base string, files *kubecd.Files) {
	kubeconfig := ""
	switch {
	case k.Kubeconfig != "":
		kubeconfig = resolvePath(base, k.Kubeconfig)
	case files.KubeConfig != "":
		kubeconfig = files.KubeConfig
	case os.Getenv("KUBECONFIG") != "":
		kubeconfig = filepath.SplitList(os.Getenv("KUBECONFIG"))[0]
	default:
		if home, err := os.UserHomeDir(); err == nil {
			kubeconfig = filepath.Join(home, ".kube", "config")
		}
	}
	var names []string
	for _, e := range files.Environments {
		if slices.Contains(names, e.Cluster) {
			continue
		}
		names = append(names, e.Cluster)
		if slices.ContainsFunc(c.Fleet.Clusters, func(cl Cluster) bool { return cl.Name == e.Cluster }) {
			continue
		}
		c.Fleet.Clusters = append(c.Fleet.Clusters, Cluster{Name: e.Cluster, Kubeconfig: kubeconfig, Context: e.Context})
	}
}

// copyApplication is a deep copy of the template.
func copyApplication(a *Application) (Application, error) {
	b, err := yaml.Marshal(a)
	if err != nil {
		return Application{}, err
	}
	var out Application
	return out, yaml.Unmarshal(b, &out)
}

// gitRoot is the repository holding dir: the nearest directory with a
// .git, else dir itself.
func gitRoot(dir string) string {
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir
		}
		d = parent
	}
}

// KubeCDNotices are what config check says about a KubeCD config beside
// its problems: what each image trigger tracks, and where its new tags go.
func (c *Config) KubeCDNotices() []string {
	var out []string
	for _, a := range c.Applications {
		g := a.Git()
		if g == nil || g.KubeCD == nil {
			continue
		}
		for _, i := range g.KubeCD.Images {
			out = append(out, fmt.Sprintf("release %s of environment %s: trigger %d tracks %s (track %s, now %s): a push of a tag the track accepts is committed to %s of %s in %s",
				i.Release, i.Environment, i.Trigger, i.Repository, i.Track, cmp.Or(i.Tag, "no tag"), i.TagValue, i.Release, i.File))
		}
	}
	return out
}

// KubeCDTriggered are the applications of KubeCD's releases whose image
// triggers track image ("registry/repository"), as the files flotilla
// started with name it.
func (c *Config) KubeCDTriggered(image string) []Application {
	var out []Application
	for _, a := range c.Applications {
		g := a.Git()
		if g == nil || g.KubeCD == nil {
			continue
		}
		if slices.ContainsFunc(g.KubeCD.Images, func(i kubecd.Image) bool { return SameImage(i.Repository, image) }) {
			out = append(out, a)
		}
	}
	return out
}

// LoadKubeCD is Load of a config that is only `kubecd: {dir, kubeconfig}`
// (`flotilla config check --kubecd DIR`): the applications, clusters and
// waves of KubeCD's files with every other setting's default.
func LoadKubeCD(dir, kubeconfig string) (*Config, error) {
	abs := func(p string) (string, error) {
		if p == "" {
			return "", nil
		}
		return filepath.Abs(p)
	}
	d, err := abs(dir)
	if err != nil {
		return nil, fmt.Errorf("resolving %q: %w", dir, err)
	}
	kc, err := abs(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("resolving %q: %w", kubeconfig, err)
	}
	k := map[string]string{"dir": d}
	if kc != "" {
		k["kubeconfig"] = kc
	}
	data, err := yaml.Marshal(map[string]any{"kubecd": k})
	if err != nil {
		return nil, err
	}
	c, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("reading KubeCD files in %q: %w", dir, err)
	}
	ps := expandKubeCD(c, d)
	applyDefaults(c, d)
	if verr := validate(c, ps...); verr != nil {
		// How pushes reach flotilla, and where triggers commit, is the
		// config's business, not the files'.
		verr.Problems = slices.DeleteFunc(verr.Problems, func(p Problem) bool {
			return p.Path == "receivers" || p.Path == "kubecd.application.source.git.url"
		})
		if len(verr.Problems) > 0 {
			return nil, fmt.Errorf("validating KubeCD files in %q: %w", dir, verr)
		}
	}
	return c, nil
}
