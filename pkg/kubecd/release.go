package kubecd

import "slices"

// Environment returns the environment named name, nil if there is none.
func (f *Files) Environment(name string) *Environment {
	for i := range f.Environments {
		if f.Environments[i].Name == name {
			return &f.Environments[i]
		}
	}
	return nil
}

// Release returns the environment's release named name, nil if there is
// none.
func (e *Environment) Release(name string) *Release {
	for i := range e.Releases {
		if e.Releases[i].Name == name {
			return &e.Releases[i]
		}
	}
	return nil
}

// DefaultValueFiles are the environment's values files the release takes
// (none when it skips default values).
func (e *Environment) DefaultValueFiles(r Release) []string {
	if r.SkipDefaultValues || e.DefaultValuesFile == "" {
		return nil
	}
	return []string{e.DefaultValuesFile}
}

// DefaultValueSet is the environment's key/value defaults the release
// takes (nil when it skips them).
func (e *Environment) DefaultValueSet(r Release) map[string]any {
	if r.SkipDefaultValues {
		return nil
	}
	return e.DefaultValues
}

// TrackedPaths are the repository paths whose change changes what the
// release renders in the environment: the environments file, the release
// files, the chart directory, the values files and the resource files.
func (f *Files) TrackedPaths(e *Environment, r Release) []string {
	ps := slices.Concat([]string{f.EnvironmentsFile}, e.ReleaseFiles, e.DefaultValueFiles(r), r.ResourceFiles)
	for _, p := range []string{r.ChartDir, r.ValuesFile} {
		if p != "" {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return slices.Compact(ps)
}
