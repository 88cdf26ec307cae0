package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// Load reads the config file at path, decodes it strictly, applies defaults,
// resolves relative paths against the file's directory, reads secrets and
// validates the result. A config that decodes but is invalid yields an error
// wrapping a *ValidationError that lists every problem; use errors.As.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config %q: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("resolving config path %q: %w", path, err)
	}
	c, err := parse(data, filepath.Dir(abs))
	if verr := (*ValidationError)(nil); errors.As(err, &verr) {
		return nil, fmt.Errorf("validating config %q: %w", path, verr)
	}
	if err != nil {
		return nil, fmt.Errorf("parsing config %q: %w", path, err)
	}
	return c, nil
}

// LoadWith is Load of the file at path with the applications extra after
// the file's own (the management cluster's Application resources,
// pkg/resources): defaulted and validated with them as one configuration
// (paths of extra's fields resolve against the file's directory too). A
// problem of extra[i] is reported at applications[fileApps+i], fileApps
// being the file's own count (KubeCD's applications come after extra's).
// extra is not changed: the defaults go into copies.
func LoadWith(path string, extra []Application) (c *Config, fileApps int, err error) {
	return LoadExtra(path, Extra{Applications: extra})
}

// Extra is what other sources add to the file's configuration: the
// management cluster's Application resources (pkg/resources), the
// clusters fleet.discovery finds (pkg/discovery).
type Extra struct {
	Applications []Application
	// Clusters come after the file's own, each with its Source (what
	// their problems are reported at) and KubeconfigData.
	Clusters []Cluster
	// Waves, when set, replace the file's fleet.waves, fleet.wavePolicy
	// and fleet.freezeWindows (a WavePolicy resource, pkg/resources);
	// their problems are reported at the file's paths.
	Waves *Waves
}

// Waves are the fleet's waves, their policy and freeze windows.
type Waves struct {
	Waves         []Wave         `json:"waves"`
	WavePolicy    WavePolicy     `json:"wavePolicy"`
	FreezeWindows []FreezeWindow `json:"freezeWindows"`
}

// LoadExtra is LoadWith with extra's applications and clusters.
func LoadExtra(path string, extra Extra) (c *Config, fileApps int, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, fmt.Errorf("reading config %q: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, 0, fmt.Errorf("resolving config path %q: %w", path, err)
	}
	c, fileApps, err = parseWith(data, filepath.Dir(abs), extra)
	if verr := (*ValidationError)(nil); errors.As(err, &verr) {
		return nil, fileApps, fmt.Errorf("validating config %q: %w", path, verr)
	}
	if err != nil {
		return nil, fileApps, fmt.Errorf("parsing config %q: %w", path, err)
	}
	return c, fileApps, nil
}

// Parse is Load from bytes: relative paths resolve against baseDir (itself
// made absolute against the working directory). An invalid config yields a
// *ValidationError, unwrapped.
func Parse(data []byte, baseDir string) (*Config, error) {
	base, err := filepath.Abs(baseDir)
	if err != nil {
		return nil, fmt.Errorf("resolving base directory %q: %w", baseDir, err)
	}
	c, err := parse(data, base)
	if verr := (*ValidationError)(nil); errors.As(err, &verr) {
		return nil, verr
	}
	if err != nil {
		return nil, fmt.Errorf("parsing config: %w", err)
	}
	return c, nil
}

// parse decodes, defaults and validates a config whose relative paths
// resolve against base, an absolute directory. It returns either a decoding
// error or a *ValidationError.
func parse(data []byte, base string) (*Config, error) {
	c, _, err := parseWith(data, base, Extra{})
	return c, err
}

// parseWith is parse with the applications extra after the file's, whose
// count it returns too.
func parseWith(data []byte, base string, extra Extra) (*Config, int, error) {
	c, err := decode(data)
	if err != nil {
		return nil, 0, err
	}
	fileApps := len(c.Applications)
	if len(extra.Applications) > 0 {
		copies, err := copyApplications(extra.Applications)
		if err != nil {
			return nil, fileApps, err
		}
		for i := range copies { // not marshalled
			copies[i].ResourceNamespace = extra.Applications[i].ResourceNamespace
		}
		c.Applications = append(c.Applications, copies...)
	}
	for _, cl := range extra.Clusters {
		cl.Labels = maps.Clone(cl.Labels)
		c.Fleet.Clusters = append(c.Fleet.Clusters, cl)
	}
	if extra.Waves != nil {
		var w Waves
		if err := copyJSON(*extra.Waves, &w); err != nil {
			return nil, fileApps, fmt.Errorf("copying the waves: %w", err)
		}
		c.Fleet.Waves, c.Fleet.WavePolicy, c.Fleet.FreezeWindows = w.Waves, w.WavePolicy, w.FreezeWindows
	}
	aliases := kuratorAliases(c)
	aliases = append(aliases, expandKubeCD(c, base)...)
	aliases = append(aliases, releaseSetsBeforeDefaults(c)...)
	applyDefaults(c, base)
	if verr := validate(c, aliases...); verr != nil {
		rolloutPolicyPaths(c, verr)
		return nil, fileApps, verr
	}
	foldReleaseSets(c)
	return c, fileApps, nil
}

// copyApplications copies apps deeply (through JSON, as a file gives
// them: the fields never marshalled are Load's to set).
func copyApplications(apps []Application) ([]Application, error) {
	b, err := json.Marshal(apps)
	if err != nil {
		return nil, fmt.Errorf("copying applications: %w", err)
	}
	var out []Application
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("copying applications: %w", err)
	}
	return out, nil
}

// decode checks data against Config's schema, for errors that name lines
// and paths, then decodes it strictly (which also refuses duplicate keys).
func decode(data []byte) (*Config, error) {
	if err := checkSchema(data); err != nil {
		return nil, err
	}
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// copyJSON copies v into out through JSON (as a file gives them: the
// fields never marshalled are Load's to set).
func copyJSON(v, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
