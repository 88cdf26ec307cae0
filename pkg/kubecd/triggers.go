package kubecd

import (
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/versionpolicy"
)

// Image is an image a release tracks in an environment through one of its
// image triggers (KubeCD's upgrade triggers, its design's step 5): a push
// of a new tag of Repository that Track accepts over Tag is written to the
// release's values at TagValue in File.
type Image struct {
	Environment string
	Release     string
	// File is the release file declaring the release: the bump goes to its
	// values (KubeCD patches the file the trigger came from).
	File string
	// Trigger is the trigger's index among the release's triggers.
	Trigger int
	Track   string
	// Repository is the value at the trigger's repoValue, after the value
	// at repoPrefixValue when the values have one.
	Repository string
	// Tag is the value at TagValue: the tag the release runs ("" when the
	// values have none).
	Tag      string
	TagValue string
}

// Values are the values the release renders with in environment e, read
// from the repository checked out at root, merged as flotilla's render
// merges them (maps merge, later ones win): the chart directory's
// values.yaml (a chart reference's values are not read: the chart is
// pulled only to render), the environment's defaultValuesFile and
// defaultValues (unless the release skips them), the release's
// valuesFile, its values.
func (f *Files) Values(root string, e *Environment, r Release) (map[string]any, error) {
	out := map[string]any{}
	read := func(p string, optional bool) error {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		if optional && os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading values file %s: %w", p, err)
		}
		var v map[string]any
		if err := yaml.Unmarshal(b, &v); err != nil {
			return fmt.Errorf("values file %s: %w", p, err)
		}
		out = MergeValues(out, v)
		return nil
	}
	if r.ChartDir != "" {
		if err := read(path.Join(r.ChartDir, "values.yaml"), true); err != nil {
			return nil, err
		}
	}
	for _, p := range e.DefaultValueFiles(r) {
		if err := read(p, false); err != nil {
			return nil, err
		}
	}
	out = MergeValues(out, e.DefaultValueSet(r))
	if r.ValuesFile != "" {
		if err := read(r.ValuesFile, false); err != nil {
			return nil, err
		}
	}
	return MergeValues(out, r.Values), nil
}

// MergeValues merges src into dst, src winning; maps merge recursively, as
// Helm merges values files (pkg/render merges a release's values with it).
func MergeValues(dst, src map[string]any) map[string]any {
	out := maps.Clone(dst)
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := out[k].(map[string]any); ok {
				out[k] = MergeValues(dm, sm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// Lookup is the value at the dotted key (a "\." is a dot inside a name)
// in values, and whether there is one (a null is none).
func Lookup(values map[string]any, key string) (any, bool) {
	parts, err := splitKey(key)
	if err != nil {
		return nil, false
	}
	var cur any = values
	for _, p := range parts {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, cur != nil
}

// scalar is a value as a chart's template prints it: a string as it is, a
// YAML number without a trailing ".0" (Helm's %v of a float64).
func scalar(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case bool, int, int64:
		return fmt.Sprint(x), true
	}
	return "", false
}

// Images resolves the image triggers of release r in environment e
// against its values (Values): the repository each tracks, the tag it
// runs. A trigger whose repository the values do not give (or give as no
// string) is an error naming it: flotilla cannot tell which image it
// tracks.
func (f *Files) Images(root string, e *Environment, r Release) ([]Image, error) {
	if len(r.Triggers) == 0 {
		return nil, nil
	}
	values, err := f.Values(root, e, r)
	if err != nil {
		return nil, fmt.Errorf("%s: release %s of environment %s: %w", r.File, r.Name, e.Name, err)
	}
	var out []Image
	var problems []string
	for i, t := range r.Triggers {
		p := fmt.Sprintf("%s: release %s of environment %s: triggers[%d].image", r.File, r.Name, e.Name, i)
		v, ok := Lookup(values, t.RepoValue)
		repo, isString := v.(string)
		switch {
		case !ok:
			where := "the chart's values.yaml, the environment's defaults, valuesFile and values"
			if r.Ref != nil {
				where = "the environment's defaults, valuesFile and values; a chart reference's own values are not read"
			}
			problems = append(problems, fmt.Sprintf("%s.repoValue: %q has no value in the release's values (%s): set it, flotilla must know which image the trigger tracks", p, t.RepoValue, where))
			continue
		case !isString || repo == "":
			problems = append(problems, fmt.Sprintf("%s.repoValue: %q is %v, not an image repository", p, t.RepoValue, v))
			continue
		}
		if pv, ok := Lookup(values, t.PrefixValue); t.PrefixValue != "" && ok {
			prefix, isString := pv.(string)
			if !isString {
				problems = append(problems, fmt.Sprintf("%s.repoPrefixValue: %q is %v, not a registry prefix", p, t.PrefixValue, pv))
				continue
			}
			repo = prefix + repo
		}
		img := Image{Environment: e.Name, Release: r.Name, File: r.File, Trigger: i, Track: t.Track, Repository: repo, TagValue: t.TagValue}
		if tv, ok := Lookup(values, t.TagValue); ok {
			if img.Tag, ok = scalar(tv); !ok {
				problems = append(problems, fmt.Sprintf("%s.tagValue: %q is %v, not a tag", p, t.TagValue, tv))
				continue
			}
		}
		out = append(out, img)
	}
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	return out, nil
}

// Policy is flotilla's version track a trigger's track maps to: KubeCD's
// tracks are flotilla's tracks of the same names (pkg/versionpolicy).
func Policy(track string) (versionpolicy.Track, error) {
	switch t := versionpolicy.Track(track); t {
	case versionpolicy.PatchLevel, versionpolicy.MinorVersion, versionpolicy.MajorVersion, versionpolicy.Newest:
		return t, nil
	}
	return "", fmt.Errorf("%w: track %q: want one of %s", ErrInvalid, track, strings.Join(Tracks, ", "))
}

// Decide says whether a pushed tag replaces the release's current one
// under the trigger's track, with flotilla's tracks (versionpolicy.Decide).
// As KubeCD does, a current tag that is not a version (latest, a build
// id) is older than any version the track recognises.
func (i Image) Decide(candidate string) (versionpolicy.Decision, error) {
	track, err := Policy(i.Track)
	if err != nil {
		return versionpolicy.Decision{}, err
	}
	d, err := versionpolicy.Decide(track, i.Tag, candidate)
	if err != nil || d.Accept || track == versionpolicy.Newest || i.Tag == "" {
		return d, err
	}
	if cur, _ := versionpolicy.Decide(versionpolicy.MajorVersion, "", i.Tag); cur.Accept {
		return d, nil // the current tag is a version: the track's answer stands
	}
	if fresh, _ := versionpolicy.Decide(track, "", candidate); !fresh.Accept {
		return d, nil // the candidate is no version the track recognises
	}
	return versionpolicy.Decision{Accept: true, Reason: fmt.Sprintf(
		"%s is a version and the current tag %q is not; KubeCD takes any version as newer than it (track %s)", candidate, i.Tag, track)}, nil
}
