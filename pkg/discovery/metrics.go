package discovery

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the discovery's gauges, registered once by the composition
// root (also without fleet.discovery: they read 0 then).
type Metrics struct {
	clusters *prometheus.GaugeVec
	leftOut  *prometheus.GaugeVec
}

// NewMetrics registers the discovery's gauges with reg (none when nil).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		clusters: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flotilla_discovered_clusters",
			Help: "Clusters the discovery source found, as it last read them (fleet.discovery; source argocd: Argo CD's cluster Secrets, clusterprofile: the ClusterProfiles, clusterapi: Cluster API's Clusters).",
		}, []string{"source"}),
		leftOut: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flotilla_discovery_left_out",
			Help: "Inventory entries the discovery source read that are no cluster (a Secret without a server, a ClusterProfile whose control plane is not healthy or that lists no configured access provider, a Cluster API Cluster without its kubeconfig Secret, a name that is no DNS label, a name an older entry has), left out; the log says why.",
		}, []string{"source"}),
	}
	for _, src := range []string{sourceArgoCD, sourceClusterProfile, sourceClusterAPI} {
		m.clusters.WithLabelValues(src)
		m.leftOut.WithLabelValues(src)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.clusters, m.leftOut} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("registering discovery metrics: %w", err)
			}
		}
	}
	return m, nil
}

// The source labels: Argo CD's cluster Secrets, the ClusterProfiles,
// Cluster API's Clusters.
const (
	sourceArgoCD         = "argocd"
	sourceClusterProfile = "clusterprofile"
	sourceClusterAPI     = "clusterapi"
)

// set records what a read found.
func (m *Metrics) set(source string, clusters, leftOut int) {
	if m == nil {
		return
	}
	m.clusters.WithLabelValues(source).Set(float64(clusters))
	m.leftOut.WithLabelValues(source).Set(float64(leftOut))
}
