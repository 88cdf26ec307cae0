package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRestartFields: what a reload may swap in live, and the fields it
// names when it may not (pkg/reload refuses the whole file then).
func TestRestartFields(t *testing.T) {
	dir := testDir(t)
	fleet := func(c2Labels, extra string) string {
		return `
fleet:
  clusters:
    - name: c1
      kubeconfig: c1.kubeconfig
      labels: {tier: canary}
    - name: c2
      kubeconfig: c2.kubeconfig
      labels: {` + c2Labels + `}
    - {name: c3, kubeconfig: c3.kubeconfig, labels: {tier: prod}}
` + extra + `
  waves:
    - name: canaries
      selector: {matchLabels: {tier: canary}}
    - name: prod
      selector: {matchLabels: {tier: prod}}
      maxParallel: 1
`
	}
	base := sections{fleet: fleet("tier: prod", "")}
	two := `
applications:
  - name: podinfo
    image: registry.example.com/demo/podinfo
    workload: {name: podinfo}
    service: {port: 9898}
  - name: other
    image: registry.example.com/demo/other
    workload: {name: other}
    service: {port: 8080}
`
	tests := []struct {
		name string
		next sections
		edit func(c *Config)
		want []string
	}{
		{name: "the same file", next: base},
		{name: "an application added", next: sections{fleet: base.fleet, applications: two}},
		{name: "an application changed", next: sections{fleet: base.fleet, applications: `
applications:
  - name: podinfo
    image: registry.example.com/demo/podinfo2
    track: MinorVersion
    workload: {name: podinfo}
    service: {port: 9898}
`}},
		{name: "a cluster's label moves it to another wave", next: sections{fleet: fleet("tier: canary", "")}},
		{name: "a wave's policy and a freeze window", next: sections{fleet: fleet("tier: prod", `
  wavePolicy: {bakeTime: 5m, approvals: 1}
  freezeWindows: [{name: nights, schedule: "0 22 * * *", duration: 8h}]
`)}},
		{name: "the reconcile's interval changed", next: sections{fleet: fleet("tier: prod", "  reconcile: {interval: 2m}\n")}},
		{name: "the reconcile turned off", next: sections{fleet: fleet("tier: prod", "  reconcile: {interval: 0s}\n")},
			want: []string{"fleet.reconcile.interval (turned on or off)"}},
		{name: "listen and workers", next: sections{server: "server: {listen: 127.0.0.1:9999, workers: 4}\n", fleet: base.fleet},
			want: []string{"server.listen", "server.workers"}},
		{name: "an API token's secret changed behind the same reference", next: base,
			edit: func(c *Config) { c.Server.APITokenValue = "another" }, want: []string{"server.apiToken"}},
		{name: "a receiver changed", next: sections{fleet: base.fleet, receivers: `receivers:
  - name: registry
    type: distribution
    header: X-Other
    secret: {env: FLOTILLA_TEST_TOKEN}
`}, want: []string{"receivers[registry]"}},
		{name: "a cluster's kubeconfig changed: its client is made anew", next: sections{fleet: `
fleet:
  clusters:
    - name: c1
      kubeconfig: c2.kubeconfig
      labels: {tier: canary}
    - name: c2
      kubeconfig: c2.kubeconfig
      labels: {tier: prod}
    - {name: c3, kubeconfig: c3.kubeconfig, labels: {tier: prod}}
  waves:
    - name: canaries
      selector: {matchLabels: {tier: canary}}
    - name: prod
      selector: {matchLabels: {tier: prod}}
      maxParallel: 1
`}},
		{name: "a cluster removed: it leaves the rollouts in flight", next: sections{fleet: `
fleet:
  clusters:
    - {name: c1, kubeconfig: c1.kubeconfig, labels: {tier: canary}}
    - {name: c2, kubeconfig: c2.kubeconfig, labels: {tier: prod}}
  waves:
    - name: canaries
      selector: {matchLabels: {tier: canary}}
    - name: prod
      selector: {matchLabels: {tier: prod}}
`}},
		{name: "an application's signature policy", next: base,
			edit: func(c *Config) { c.Applications[0].Verify = &Verify{IgnoreTlog: true} }, want: []string{"applications[podinfo].verify"}},
		{name: "an application added with a signature policy", next: sections{fleet: base.fleet, applications: two},
			edit: func(c *Config) { c.Applications[1].Verify = &Verify{IgnoreTlog: true} }, want: []string{"applications[other].verify"}},
		{name: "the executor and a sink", next: sections{fleet: fleet("tier: prod", "  executor: embedded\n"), events: "events: {sink: http://127.0.0.1:1/}\n"},
			want: []string{"events.sink"}},
	}
	old, err := Parse([]byte(base.doc()), dir)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next, err := Parse([]byte(tc.next.doc()), dir)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if tc.edit != nil {
				tc.edit(next)
			}
			if diff := cmp.Diff(tc.want, RestartFields(old, next)); diff != "" {
				t.Errorf("RestartFields (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLive: a Store is seen by the next Current, and wakes whoever waits
// on Changed (once: Changed is then a new channel).
func TestLive(t *testing.T) {
	a, b := &Config{Server: Server{Instance: "a"}}, &Config{Server: Server{Instance: "b"}}
	l := NewLive(a)
	changed := l.Changed()
	select {
	case <-changed:
		t.Fatal("Changed closed before any Store")
	default:
	}
	l.Store(b)
	select {
	case <-changed:
	case <-time.After(time.Second):
		t.Fatal("Changed not closed by Store")
	}
	if got := l.Current().Server.Instance; got != "b" {
		t.Errorf("Current after Store is %q, want b", got)
	}
	select {
	case <-l.Changed():
		t.Error("the next Changed is closed already")
	default:
	}
	var src Provider = a
	if src.Current() != a {
		t.Error("a *Config is not its own Provider")
	}
}

// Under the Tekton executor a cluster's kubeconfig went into a Secret at
// its first run: changing it needs a restart; adding or removing a
// cluster does not.
func TestRestartFieldsTekton(t *testing.T) {
	old := &Config{Fleet: Fleet{Executor: ExecutorTekton, Clusters: []Cluster{
		{Name: "c1", Kubeconfig: "c1.kubeconfig"}, {Name: "c2", Kubeconfig: "c2.kubeconfig"}}}}
	next := &Config{Fleet: Fleet{Executor: ExecutorTekton, Clusters: []Cluster{
		{Name: "c1", Kubeconfig: "c1.kubeconfig", Context: "other"}, {Name: "c3", Kubeconfig: "c3.kubeconfig"}}}}
	if diff := cmp.Diff([]string{"fleet.clusters[c1] (the tekton executor's kubeconfig Secret)"}, RestartFields(old, next)); diff != "" {
		t.Errorf("RestartFields (-want +got):\n%s", diff)
	}
}

// fleet.discovery's watch is started once: changing it needs a restart
// (the clusters it discovers change live).
func TestRestartFieldsDiscovery(t *testing.T) {
	old := &Config{Fleet: Fleet{Discovery: &Discovery{ArgoCD: &ArgoCDDiscovery{Namespace: "argocd"}}}}
	next := &Config{Fleet: Fleet{Discovery: &Discovery{ArgoCD: &ArgoCDDiscovery{Namespace: "argocd", Selector: "fleet=flotilla"}},
		Clusters: []Cluster{{Name: "found", KubeconfigData: []byte("x")}}}}
	if diff := cmp.Diff([]string{"fleet.discovery"}, RestartFields(old, next)); diff != "" {
		t.Errorf("RestartFields (-want +got):\n%s", diff)
	}
}
