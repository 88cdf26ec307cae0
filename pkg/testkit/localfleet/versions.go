package localfleet

import (
	"fmt"
	"os"
	"path/filepath"
)

// Pinned versions of the fleet's components. deploy/tools/local/build.sh builds the
// same versions; keep them in step.
const (
	EtcdVersion    = "3.6.4"
	KubeVersion    = "1.34.4"
	KwokVersion    = "0.7.0"
	FlaggerVersion = "1.41.0"
	TektonVersion  = "1.9.0"
	// PrometheusOperatorVersion and GatewayAPIVersion are those of the
	// ServiceMonitor, PrometheusRule and HTTPRoute CRDs (ChartCRDs).
	PrometheusOperatorVersion = "0.85.0"
	GatewayAPIVersion         = "1.3.0"
	// IstioAPIVersion is that of Istio's CRDs (istio.io/api).
	IstioAPIVersion = "1.27.0"
	// PrometheusVersion is the prometheus module's (Prometheus 3.7).
	PrometheusVersion = "0.307.0"
	// HeyVersion is that of hey, the load generator of Flagger's load tester.
	HeyVersion = "0.1.4"
	// The modules the other providers' CRDs come from (build.sh says why
	// these versions).
	KumaVersion     = "1.8.1"
	Linkerd2Version = "0.0.0-20210617063832-395cc3677e31"
	ContourVersion  = "1.33.0"
	TraefikVersion  = "2.11.0"
)

// ChartCRDs are the files of the CRDs the optional objects of flotilla's
// chart need (ServiceMonitor, PrometheusRule, HTTPRoute), which build.sh
// fetches.
func ChartCRDs() []string {
	return []string{
		filepath.Join(BinDir(), "crds", "servicemonitors-"+PrometheusOperatorVersion+".yaml"),
		filepath.Join(BinDir(), "crds", "prometheusrules-"+PrometheusOperatorVersion+".yaml"),
		filepath.Join(BinDir(), "crds", "httproutes-"+GatewayAPIVersion+".yaml"),
	}
}

// CacheDir is where build.sh keeps its sources and binaries:
// $FLOTILLA_CACHE, else $XDG_CACHE_HOME/flotilla, else ~/.cache/flotilla.
func CacheDir() string {
	if d := os.Getenv("FLOTILLA_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "flotilla")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "flotilla-cache")
	}
	return filepath.Join(home, ".cache", "flotilla")
}

// BinDir is the directory of the built fleet binaries.
func BinDir() string { return filepath.Join(CacheDir(), "bin") }

// binaries names every file of BinDir the fleet needs.
type binaries struct {
	dir string
}

func (b binaries) path(name string) string { return filepath.Join(b.dir, name) }

func (b binaries) etcd() string          { return b.path("etcd-" + EtcdVersion) }
func (b binaries) apiserver() string     { return b.path("kube-apiserver-" + KubeVersion) }
func (b binaries) controllerMgr() string { return b.path("kube-controller-manager-" + KubeVersion) }
func (b binaries) scheduler() string     { return b.path("kube-scheduler-" + KubeVersion) }
func (b binaries) kwok() string          { return b.path("kwok-" + KwokVersion) }
func (b binaries) tekton() string        { return b.path("tekton-controller-" + TektonVersion) }
func (b binaries) tektonConfig() string  { return b.path("tekton-" + TektonVersion + "-config") }

// tektonImages holds the binaries of Tekton's images (entrypoint, nop,
// workingdirinit), which a real node serves its TaskRuns' pods.
func (b binaries) tektonImages() string { return b.path("tekton-" + TektonVersion + "-images") }
func (b binaries) flaggerCRD() string   { return b.path("flagger-" + FlaggerVersion + "-crd.yaml") }

func (b binaries) prometheus() string { return b.path("prometheus-" + PrometheusVersion) }
func (b binaries) loadTester() string { return b.path("flagger-loadtester-" + FlaggerVersion) }
func (b binaries) heyDir() string     { return b.path("hey-" + HeyVersion) }

func (b binaries) flagger(stock bool) string {
	if stock {
		return b.path("flagger-" + FlaggerVersion)
	}
	return b.path("flagger-" + FlaggerVersion + "-fast")
}

// check reports every missing binary at once, with the command that builds them.
func (b binaries) check(o Options) error {
	need := []string{b.etcd(), b.apiserver(), b.controllerMgr(), b.scheduler(), b.kwok(),
		b.flagger(true), b.flagger(false), b.flaggerCRD()}
	if o.Tekton {
		need = append(need, b.tekton(), b.tektonConfig(), b.tektonImages())
	}
	if o.Prometheus {
		need = append(need, b.prometheus())
	}
	if o.LoadTester {
		need = append(need, b.loadTester(), filepath.Join(b.heyDir(), "hey"))
	}
	var missing []string
	for _, p := range need {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("fleet binaries missing (run deploy/tools/local/build.sh or make fleet-build): %v", missing)
	}
	return nil
}

func (b binaries) kubelet() string   { return b.path("kubelet-" + KubeVersion) }
func (b binaries) kubeProxy() string { return b.path("kube-proxy-" + KubeVersion) }
