package simulate

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

// stubKubeconfig points at an address nothing listens on: the simulation
// reaches no cluster.
const stubKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: sim, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: sim, user: {token: simulated}}]
contexts: [{name: sim, context: {cluster: sim, user: sim}}]
current-context: sim
`

// loadConfig reads the user's config for a simulation, offline: secrets
// that are not there (environment variables unset, files missing) get a
// placeholder, every kubeconfig a stub (no cluster is reached, not even
// one whose kubeconfig is there: the resync would read its canaries into
// the simulation), and edit changes the document before it is validated (the
// scenario's freeze windows); the key authorities of signature policies
// get stand-ins (signatures.go: nil when there is none). It is validated
// as `flotilla serve` would;
// then the polls and the catch-up and drift loop are turned off
// (offline).
func loadConfig(path, tmp string, edit func(doc map[string]any) error) (_ *config.Config, _ *signers, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading config %q: %w", path, err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("parsing config %q: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, err
	}
	base := filepath.Dir(abs)
	stub := filepath.Join(tmp, "stub.kubeconfig")
	if err := os.WriteFile(stub, []byte(stubKubeconfig), 0o600); err != nil {
		return nil, nil, err
	}
	n := 0
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if _, ok := x.(string); ok && k == "kubeconfig" {
					v[k] = stub
					continue
				}
				if m, ok := x.(map[string]any); ok && len(m) == 1 && !notSecrets[k] {
					if env, ok := m["env"].(string); ok && envName.MatchString(env) && os.Getenv(env) == "" {
						n++
						v[k] = map[string]any{"file": placeholder(tmp, n)}
						continue
					}
					if file, ok := m["file"].(string); ok {
						if !filepath.IsAbs(file) {
							file = filepath.Join(base, file)
						}
						if _, err := os.Stat(file); err != nil {
							n++
							v[k] = map[string]any{"file": placeholder(tmp, n)}
							continue
						}
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	if _, ok := doc["fleet"].(map[string]any); !ok {
		doc["fleet"] = map[string]any{}
	}
	if edit != nil {
		if err := edit(doc); err != nil {
			return nil, nil, err
		}
	}
	sg, err := standInSigners(doc, tmp)
	if err != nil {
		return nil, nil, fmt.Errorf("config %q: %w", path, err)
	}
	defer func() {
		if err != nil {
			sg.close()
		}
	}()
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := config.Parse(out, base)
	if err != nil {
		return nil, nil, fmt.Errorf("config %q: %w", path, err)
	}
	offline(cfg)
	return cfg, sg, nil
}

// offline turns off, once the config is validated as `flotilla serve`
// validates it, what would reach the world: the poll of every
// application's registry or branch (the fleet's and each application's
// own, also one KubeCD's releases gave), catch-up and drift (they read the
// clusters), the scale-out bus (the simulation's state is embedded, in its
// temporary directory: never a push journaled into the fleet's NATS, which
// the real replicas would act on), the FleetRollout objects, the
// Application resources (only the file's applications are simulated), single
// sign-on, the sinks (events.sink, events.cdevents) and the traces'
// export: no simulated rollout is posted anywhere.
func offline(cfg *config.Config) {
	cfg.Fleet.Poll = config.Poll{Disabled: true}
	for i := range cfg.Applications {
		cfg.Applications[i].Poll = &config.Poll{Disabled: true}
	}
	cfg.Fleet.Reconcile.Interval = &config.Duration{}
	cfg.Server.Bus = nil
	cfg.Server.FleetRollouts = nil
	cfg.Server.Resources = nil // the file's applications only: the management cluster is not read
	cfg.Server.SSO = nil
	cfg.Events = config.Events{}
	cfg.Telemetry.Tracing = config.Tracing{}
}

// notSecrets are the keys whose one-key maps ({env: prod}) are labels,
// not secrets.
var notSecrets = map[string]bool{"labels": true, "matchLabels": true, "annotations": true, "nodeSelector": true}

// envName is an environment variable's name, as secrets name them.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// placeholder writes the n-th placeholder secret and returns its path.
func placeholder(tmp string, n int) string {
	p := filepath.Join(tmp, fmt.Sprintf("secret-%d", n))
	_ = os.WriteFile(p, []byte(fmt.Sprintf("simulated-secret-%d", n)), 0o600)
	return p
}
