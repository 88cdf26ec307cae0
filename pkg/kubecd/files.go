package kubecd

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// DefaultEnvironmentsFile is KubeCD's environments file's name.
const DefaultEnvironmentsFile = "environments.yaml"

// ErrInvalid is a KubeCD file flotilla cannot honour: unreadable, with an
// unknown or refused field, or inconsistent.
var ErrInvalid = errors.New("kubecd")

// Error lists every problem of KubeCD's files, each naming its file and
// field. It wraps ErrInvalid.
type Error struct{ Problems []string }

func (e *Error) Error() string {
	return ErrInvalid.Error() + ": " + strings.Join(e.Problems, "; ")
}

func (e *Error) Unwrap() error { return ErrInvalid }

// Tracks are the values of an image trigger's track.
var Tracks = []string{"PatchLevel", "MinorVersion", "MajorVersion", "Newest"}

// Files are KubeCD's files of one repository, paths relative to its root
// (slash-separated).
type Files struct {
	// EnvironmentsFile is the environments file read.
	EnvironmentsFile string
	Environments     []Environment
	// HelmRepos are the named Helm repositories chart references use
	// ("name/chart").
	HelmRepos map[string]string
	// KubeConfig is environments.yaml's kubeConfig, resolved against the
	// file ("" when unset).
	KubeConfig string
}

// Environment is one KubeCD environment: a namespace in a cluster.
type Environment struct {
	Name string
	// Cluster is the cluster's name: the clusters entry environments name
	// with clusterName, or their inline provider's cluster.
	Cluster string
	// Context is the kubeconfig context the provider names (gcloud's and
	// az's names for GKE and AKS, minikube, docker-for-desktop or an
	// existing context).
	Context   string
	Namespace string
	// DefaultValuesFile and DefaultValues are merged into every release
	// that does not skip them.
	DefaultValuesFile string
	DefaultValues     map[string]any
	// ReleaseFiles are the release files read, in order.
	ReleaseFiles []string
	Releases     []Release
}

// Release is one release of an environment, its paths resolved.
type Release struct {
	Name string
	// File is the release file declaring it.
	File string
	// ChartDir is a chart directory in the repository; Ref a chart
	// reference. At most one; neither: the release is its resource files.
	ChartDir string
	Ref      *ChartRef
	// ValuesFile and Values are the release's own values (Values win).
	ValuesFile string
	Values     map[string]any
	// SkipDefaultValues leaves the environment's default values out.
	SkipDefaultValues bool
	// ResourceFiles are plain manifests applied with the release: its own,
	// and for the first release of a file, the file's.
	ResourceFiles []string
	Triggers      []Trigger
}

// ChartRef is a chart pulled from a repository, pinned by version.
type ChartRef struct {
	// Repository is an oci:// reference of the chart's repository (its
	// name included) or the URL of a Helm repository (index.yaml).
	Repository string `json:"repository"`
	// Name is the chart's name in a Helm repository ("" for OCI).
	Name    string `json:"name,omitempty"`
	Version string `json:"version"`
}

// String is the reference as KubeCD users read it.
func (r ChartRef) String() string {
	if r.Name == "" {
		return r.Repository + ":" + r.Version
	}
	return strings.TrimSuffix(r.Repository, "/") + "/" + r.Name + ":" + r.Version
}

// Trigger is an image upgrade trigger: the release tracks the image its
// values name at RepoValue (after the registry prefix at PrefixValue), and
// a pushed tag Track accepts is written to its values at TagValue
// (Images resolves it in an environment).
type Trigger struct {
	Track string
	// RepoValue, TagValue: default image.repository and image.tag.
	RepoValue string
	TagValue  string
	// PrefixValue is KubeCD's repoPrefixValue. Default: RepoValue with its
	// last name "repository" replaced by "prefix" (image.prefix,
	// zookeeper.image.prefix), none when RepoValue ends otherwise.
	PrefixValue string
}

// The files' schema, as KubeCD writes them (the design document's and
// kubecd's pkg/model). Fields flotilla refuses are decoded so that the
// refusal names them.
type (
	environmentsFile struct {
		Environments []envEntry      `json:"environments"`
		Clusters     []clusterEntry  `json:"clusters"`
		HelmRepos    []helmRepoEntry `json:"helmRepos"`
		KubeConfig   string          `json:"kubeConfig"`
	}
	clusterEntry struct {
		Name     string    `json:"name"`
		Provider *provider `json:"provider"`
	}
	provider struct {
		GKE *struct {
			Project     string `json:"project"`
			ClusterName string `json:"clusterName"`
			Zone        string `json:"zone"`
			Region      string `json:"region"`
		} `json:"gke"`
		AKS *struct {
			ResourceGroup string `json:"resourceGroup"`
			ClusterName   string `json:"clusterName"`
		} `json:"aks"`
		Minikube         *struct{} `json:"minikube"`
		DockerForDesktop *struct{} `json:"dockerForDesktop"`
		ExistingContext  *struct {
			ContextName string `json:"contextName"`
		} `json:"existingContext"`
	}
	helmRepoEntry struct {
		Name string `json:"name"`
		URL  string `json:"url"`
	}
	envEntry struct {
		Name              string    `json:"name"`
		ClusterName       string    `json:"clusterName"`
		Provider          *provider `json:"provider"`
		KubeNamespace     string    `json:"kubeNamespace"`
		Namespace         string    `json:"namespace"`
		Releases          []string  `json:"releases"`
		ReleasesFiles     []string  `json:"releasesFiles"`
		DefaultValues     []value   `json:"defaultValues"`
		DefaultValuesFile string    `json:"defaultValuesFile"`
	}
	value struct {
		Key       string `json:"key"`
		Value     any    `json:"value"`
		ValueFrom any    `json:"valueFrom"`
	}
	releaseFile struct {
		ResourceFiles []string       `json:"resourceFiles"`
		Releases      []releaseEntry `json:"releases"`
	}
	releaseEntry struct {
		Name              string    `json:"name"`
		Chart             *chart    `json:"chart"`
		ValuesFile        string    `json:"valuesFile"`
		Values            []value   `json:"values"`
		Trigger           *trigger  `json:"trigger"`
		Triggers          []trigger `json:"triggers"`
		SkipDefaultValues bool      `json:"skipDefaultValues"`
		ResourceFiles     []string  `json:"resourceFiles"`
	}
	chart struct {
		Dir       string `json:"dir"`
		Reference string `json:"reference"`
		Version   string `json:"version"`
	}
	trigger struct {
		Image *struct {
			Track           string `json:"track"`
			RepoValue       string `json:"repoValue"`
			TagValue        string `json:"tagValue"`
			RepoPrefixValue string `json:"repoPrefixValue"`
			// PrefixValue is no KubeCD field: refused, naming the one.
			PrefixValue string `json:"prefixValue"`
		} `json:"image"`
		Helm any `json:"helm"`
	}
)

// loader reads the files of one repository and collects every problem.
type loader struct {
	root      string
	helmRepos map[string]string
	problems  []string
}

func (l *loader) addf(format string, args ...any) {
	l.problems = append(l.problems, fmt.Sprintf(format, args...))
}

// Load reads the environments file envFile (relative to the repository's
// root dir) and every release file its environments name. Every problem
// is reported at once, in an *Error.
//
// Honoured: clusters (name, provider), helmRepos, kubeConfig;
// environments' name, clusterName or provider, kubeNamespace (or
// namespace), releases (or releasesFiles), defaultValues,
// defaultValuesFile; release files' resourceFiles and releases; releases'
// name, chart (dir, or reference with version), valuesFile, values (key,
// value), triggers (and trigger: image with track, repoValue, tagValue,
// repoPrefixValue), skipDefaultValues, resourceFiles. Refused, named: any
// other field (prefixValue, which is not KubeCD's, among them), values'
// valueFrom (flotilla reads no cloud resource), Helm chart triggers.
func Load(root, envFile string) (*Files, error) {
	l := &loader{root: root}
	f := l.load(envFile)
	if len(l.problems) > 0 {
		return nil, &Error{Problems: l.problems}
	}
	return f, nil
}

func (l *loader) load(envFile string) *Files {
	envFile = path.Clean(filepath.ToSlash(envFile))
	var ef environmentsFile
	if !l.decode(envFile, &ef) {
		return nil
	}
	f := &Files{EnvironmentsFile: envFile, HelmRepos: map[string]string{}}
	if ef.KubeConfig != "" {
		f.KubeConfig = ef.KubeConfig
		if !filepath.IsAbs(f.KubeConfig) {
			f.KubeConfig = filepath.Join(l.root, filepath.FromSlash(path.Dir(envFile)), f.KubeConfig)
		}
	}
	for i, r := range ef.HelmRepos {
		p := fmt.Sprintf("%s: helmRepos[%d]", envFile, i)
		switch {
		case r.Name == "" || r.URL == "":
			l.addf("%s: name and url are required", p)
		case f.HelmRepos[r.Name] != "":
			l.addf("%s: %q is listed twice", p, r.Name)
		case !strings.HasPrefix(r.URL, "https://") && !strings.HasPrefix(r.URL, "http://"):
			l.addf("%s.url: %q: want an http(s) URL of a Helm repository (OCI charts are referenced as oci://...)", p, r.URL)
		default:
			f.HelmRepos[r.Name] = r.URL
		}
	}
	l.helmRepos = f.HelmRepos
	clusters := map[string]clusterEntry{}
	for i, c := range ef.Clusters {
		p := fmt.Sprintf("%s: clusters[%d]", envFile, i)
		if c.Name == "" {
			l.addf("%s.name: required", p)
			continue
		}
		if _, dup := clusters[c.Name]; dup {
			l.addf("%s.name: %q is listed twice", p, c.Name)
		}
		clusters[c.Name] = c
	}
	seen := map[string]bool{}
	for i, e := range ef.Environments {
		p := fmt.Sprintf("%s: environments[%d]", envFile, i)
		if e.Name == "" {
			l.addf("%s.name: required", p)
		} else if seen[e.Name] {
			l.addf("%s.name: %q is listed twice", p, e.Name)
		}
		seen[e.Name] = true
		env := Environment{Name: e.Name}
		switch {
		case e.ClusterName != "" && e.Provider != nil:
			l.addf("%s: set either clusterName or provider", p)
		case e.ClusterName != "":
			c, ok := clusters[e.ClusterName]
			if !ok {
				l.addf("%s.clusterName: %q is not among clusters", p, e.ClusterName)
				break
			}
			env.Cluster = c.Name
			_, env.Context = l.provider(p+".clusters."+c.Name+".provider", c.Provider)
		default:
			env.Cluster, env.Context = l.provider(p+".provider", e.Provider)
		}
		switch {
		case e.KubeNamespace != "" && e.Namespace != "" && e.KubeNamespace != e.Namespace:
			l.addf("%s: kubeNamespace %q and namespace %q differ", p, e.KubeNamespace, e.Namespace)
		default:
			env.Namespace = cmp.Or(e.KubeNamespace, e.Namespace, "default")
		}
		env.DefaultValues = l.values(p+".defaultValues", e.DefaultValues)
		env.DefaultValuesFile = l.path(p+".defaultValuesFile", envFile, e.DefaultValuesFile)
		files := slices.Concat(e.Releases, e.ReleasesFiles)
		if len(files) == 0 {
			l.addf("%s.releases: at least one release file", p)
		}
		names := map[string]bool{}
		for j, rf := range files {
			file := l.path(fmt.Sprintf("%s.releases[%d]", p, j), envFile, rf)
			if file == "" {
				continue
			}
			env.ReleaseFiles = append(env.ReleaseFiles, file)
			for _, r := range l.releases(file) {
				if names[r.Name] {
					l.addf("%s: release %q is declared twice (in %s)", p, r.Name, file)
				}
				names[r.Name] = true
				env.Releases = append(env.Releases, r)
			}
		}
		f.Environments = append(f.Environments, env)
	}
	if len(ef.Environments) == 0 {
		l.addf("%s: environments: at least one", envFile)
	}
	return f
}

// provider returns the cluster's name and kubeconfig context a provider
// names.
func (l *loader) provider(p string, pr *provider) (name, context string) {
	if pr == nil {
		l.addf("%s: required (or clusterName)", p)
		return "", ""
	}
	n := 0
	if g := pr.GKE; g != nil {
		n++
		loc := cmp.Or(g.Zone, g.Region)
		if g.Project == "" || g.ClusterName == "" || loc == "" {
			l.addf("%s.gke: project, clusterName and zone (or region) are required", p)
		}
		// gcloud container clusters get-credentials names it so.
		name, context = g.ClusterName, "gke_"+g.Project+"_"+loc+"_"+g.ClusterName
	}
	if a := pr.AKS; a != nil {
		n++
		if a.ClusterName == "" {
			l.addf("%s.aks.clusterName: required", p)
		}
		// az aks get-credentials names the context after the cluster.
		name, context = a.ClusterName, a.ClusterName
	}
	if pr.Minikube != nil {
		n++
		name, context = "minikube", "minikube"
	}
	if pr.DockerForDesktop != nil {
		n++
		name, context = "docker-for-desktop", "docker-for-desktop"
	}
	if e := pr.ExistingContext; e != nil {
		n++
		if e.ContextName == "" {
			l.addf("%s.existingContext.contextName: required", p)
		}
		name, context = e.ContextName, e.ContextName
	}
	if n != 1 {
		l.addf("%s: want exactly one of gke, aks, minikube, dockerForDesktop, existingContext", p)
	}
	return name, context
}

// releases reads a release file.
func (l *loader) releases(file string) []Release {
	var rf releaseFile
	if !l.decode(file, &rf) {
		return nil
	}
	var shared []string
	for i, f := range rf.ResourceFiles {
		if p := l.path(fmt.Sprintf("%s: resourceFiles[%d]", file, i), file, f); p != "" {
			shared = append(shared, p)
		}
	}
	if len(rf.Releases) == 0 && len(shared) > 0 {
		l.addf("%s: resourceFiles need a release in the file to be applied with", file)
	}
	var out []Release
	for i, e := range rf.Releases {
		p := fmt.Sprintf("%s: releases[%d]", file, i)
		if e.Name == "" {
			l.addf("%s.name: required", p)
		} else {
			p = fmt.Sprintf("%s: release %s", file, e.Name)
		}
		r := Release{Name: e.Name, File: file, SkipDefaultValues: e.SkipDefaultValues}
		if c := e.Chart; c != nil {
			switch {
			case c.Dir != "" && c.Reference != "":
				l.addf("%s.chart: set either dir or reference", p)
			case c.Dir != "":
				r.ChartDir = l.path(p+".chart.dir", file, c.Dir)
				if c.Version != "" {
					l.addf("%s.chart.version: only for a chart reference (a chart directory is versioned by the repository)", p)
				}
			case c.Reference != "":
				r.Ref = l.reference(p+".chart", c.Reference, c.Version)
			default:
				l.addf("%s.chart: dir or reference is required", p)
			}
		}
		r.ValuesFile = l.path(p+".valuesFile", file, e.ValuesFile)
		r.Values = l.values(p+".values", e.Values)
		for j, f := range e.ResourceFiles {
			if rp := l.path(fmt.Sprintf("%s.resourceFiles[%d]", p, j), file, f); rp != "" {
				r.ResourceFiles = append(r.ResourceFiles, rp)
			}
		}
		if e.Chart == nil && len(r.ResourceFiles) == 0 {
			l.addf("%s: must define either chart or resourceFiles", p)
		}
		if i == 0 {
			r.ResourceFiles = append(shared, r.ResourceFiles...)
		}
		ts := e.Triggers
		if e.Trigger != nil {
			ts = append([]trigger{*e.Trigger}, ts...)
		}
		for j, t := range ts {
			tp := fmt.Sprintf("%s.triggers[%d]", p, j)
			if t.Helm != nil {
				l.addf("%s.helm: refused: flotilla does not look for new chart versions (pin chart.version and push a change)", tp)
			}
			if t.Image == nil {
				if t.Helm == nil {
					l.addf("%s.image: required", tp)
				}
				continue
			}
			tr := Trigger{Track: t.Image.Track, RepoValue: cmp.Or(t.Image.RepoValue, "image.repository"), TagValue: cmp.Or(t.Image.TagValue, "image.tag"), PrefixValue: t.Image.RepoPrefixValue}
			if tr.PrefixValue == "" {
				tr.PrefixValue = defaultPrefixValue(tr.RepoValue)
			}
			if !slices.Contains(Tracks, tr.Track) {
				l.addf("%s.image.track: %q: want one of %s", tp, tr.Track, strings.Join(Tracks, ", "))
			}
			if t.Image.PrefixValue != "" {
				l.addf("%s.image.prefixValue: unknown field: KubeCD's is repoPrefixValue", tp)
			}
			for _, k := range []struct{ name, key string }{{"repoValue", tr.RepoValue}, {"tagValue", tr.TagValue}, {"repoPrefixValue", tr.PrefixValue}} {
				if _, err := splitKey(k.key); k.key != "" && err != nil {
					l.addf("%s.image.%s: %v", tp, k.name, err)
				}
			}
			r.Triggers = append(r.Triggers, tr)
		}
		out = append(out, r)
	}
	return out
}

// defaultPrefixValue is the registry prefix's key beside the repository's
// key: image.repository's is image.prefix.
func defaultPrefixValue(repoValue string) string {
	if repoValue == "repository" {
		return "prefix"
	}
	if base, ok := strings.CutSuffix(repoValue, ".repository"); ok {
		return base + ".prefix"
	}
	return ""
}

// reference parses a chart reference: oci://host/path/chart, or
// repo/chart with repo a helmRepos entry (checked by the caller).
func (l *loader) reference(p, ref, version string) *ChartRef {
	if version == "" {
		l.addf("%s.version: required for a chart reference (%s): pin the chart's version", p, ref)
	}
	if strings.HasPrefix(ref, "oci://") {
		rest := strings.TrimPrefix(ref, "oci://")
		host, repo, ok := strings.Cut(rest, "/")
		switch {
		case !ok || host == "" || repo == "":
			l.addf("%s.reference: %q: want oci://<registry>/<path>/<chart>", p, ref)
		case strings.ContainsAny(repo, ":@"):
			l.addf("%s.reference: %q: no tag or digest in the reference; the version is chart.version", p, ref)
		}
		return &ChartRef{Repository: ref, Version: version}
	}
	repo, name, ok := strings.Cut(ref, "/")
	if !ok || repo == "" || name == "" || strings.Contains(name, "/") {
		l.addf("%s.reference: %q: want <helmRepos name>/<chart> or oci://<registry>/<path>/<chart>", p, ref)
		return nil
	}
	url, known := l.helmRepos[repo]
	if !known {
		l.addf("%s.reference: %q: no helmRepos entry of environments.yaml is named %q", p, ref, repo)
		return nil
	}
	return &ChartRef{Repository: url, Name: name, Version: version}
}

// values turns KubeCD's key/value list into Helm values: keys are dotted
// paths (a "\." is a dot in a key), later entries win.
func (l *loader) values(p string, vs []value) map[string]any {
	if len(vs) == 0 {
		return nil
	}
	out := map[string]any{}
	for i, v := range vs {
		vp := fmt.Sprintf("%s[%d]", p, i)
		if v.ValueFrom != nil {
			l.addf("%s.valueFrom: refused: flotilla reads no cloud resource; set value", vp)
			continue
		}
		if v.Key == "" {
			l.addf("%s.key: required", vp)
			continue
		}
		if err := SetValue(out, v.Key, v.Value); err != nil {
			l.addf("%s.key: %v", vp, err)
		}
	}
	return out
}

// SetValue sets the dotted key (a "\." is a dot inside a name) in m,
// creating maps on the way.
func SetValue(m map[string]any, key string, v any) error {
	parts, err := splitKey(key)
	if err != nil {
		return err
	}
	for i, part := range parts {
		if i == len(parts)-1 {
			m[part] = v
			return nil
		}
		next, ok := m[part].(map[string]any)
		if !ok {
			if _, set := m[part]; set {
				return fmt.Errorf("%q: %s is set to a value, not a map", key, strings.Join(parts[:i+1], "."))
			}
			next = map[string]any{}
			m[part] = next
		}
		m = next
	}
	return nil
}

// splitKey splits a dotted key into its names (a "\." is a dot inside a
// name); an empty name is an error.
func splitKey(key string) ([]string, error) {
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(key); i++ {
		switch {
		case key[i] == '\\' && i+1 < len(key) && key[i+1] == '.':
			cur.WriteByte('.')
			i++
		case key[i] == '.':
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(key[i])
		}
	}
	parts = append(parts, cur.String())
	for _, part := range parts {
		if part == "" {
			return nil, fmt.Errorf("%q: empty name in a dotted key", key)
		}
	}
	return parts, nil
}

// path resolves p (relative to the file naming it) to a path relative to
// the repository's root, refusing one outside it; "" stays "".
func (l *loader) path(field, file, p string) string {
	if p == "" {
		return ""
	}
	if path.IsAbs(p) {
		l.addf("%s: %q: want a path relative to %s", field, p, file)
		return ""
	}
	rel := path.Join(path.Dir(file), filepath.ToSlash(p))
	if rel == ".." || strings.HasPrefix(rel, "../") {
		l.addf("%s: %q leaves the repository", field, p)
		return ""
	}
	return rel
}

// decode reads a file strictly: an unknown field is refused by name.
func (l *loader) decode(file string, into any) bool {
	data, err := os.ReadFile(filepath.Join(l.root, filepath.FromSlash(file)))
	if err != nil {
		l.addf("reading %s: %v", file, err)
		return false
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		l.addf("%s: %s", file, strings.TrimPrefix(strings.TrimPrefix(err.Error(), "error unmarshaling JSON: "), "while decoding JSON: "))
		return false
	}
	return true
}
