package charttest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

// A host's config becomes the pod's: no listen address or data directory,
// kubeconfigs and secret files moved into the chart's Secrets, loopback API
// servers named by the node's address (HTTPS ones still checked for
// 127.0.0.1), files outside the scenario's directory left alone.
func TestPodConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	kubeconfig := func(name, server string) string {
		kc := clientcmdapi.NewConfig()
		kc.Clusters[name] = &clientcmdapi.Cluster{Server: server}
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: name}
		kc.CurrentContext = name
		p := filepath.Join(dir, name+".kubeconfig")
		if err := clientcmd.WriteToFile(*kc, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	token := write("registry.token", "t0k3n\n")
	var cfg map[string]any
	src := `
server: {listen: "127.0.0.1:0", dataDir: /tmp/x, externalURL: "http://10.96.0.250:8080"}
receivers:
  - {name: registry, type: distribution, secret: {file: ` + token + `}}
  - {name: other, type: distribution, secret: {file: /etc/elsewhere/token}}
fleet:
  clusters:
    - {name: a, kubeconfig: ` + kubeconfig("a", "https://127.0.0.1:6443") + `}
    - {name: b, kubeconfig: ` + kubeconfig("b", "http://127.0.0.1:7000") + `}
`
	if err := yaml.Unmarshal([]byte(src), &cfg); err != nil {
		t.Fatal(err)
	}
	secrets, kubeconfigs, err := PodConfig(cfg, dir, "10.244.7.1")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal([]byte(`
server: {externalURL: "http://10.96.0.250:8080"}
receivers:
  - {name: registry, type: distribution, secret: {file: /etc/flotilla/secrets/registry.token}}
  - {name: other, type: distribution, secret: {file: /etc/elsewhere/token}}
fleet:
  clusters:
    - {name: a, kubeconfig: /etc/flotilla/kubeconfigs/a.kubeconfig}
    - {name: b, kubeconfig: /etc/flotilla/kubeconfigs/b.kubeconfig}
`), &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"registry.token": "t0k3n\n"}, secrets); diff != "" {
		t.Errorf("secrets (-want +got):\n%s", diff)
	}
	for name, want := range map[string][2]string{
		"a.kubeconfig": {"https://10.244.7.1:6443", "127.0.0.1"},
		"b.kubeconfig": {"http://10.244.7.1:7000", ""},
	} {
		kc, err := clientcmd.Load([]byte(kubeconfigs[name]))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, c := range kc.Clusters {
			if got := [2]string{c.Server, c.TLSServerName}; got != want {
				t.Errorf("%s: server, tls-server-name %q, want %q", name, got, want)
			}
		}
	}
}
