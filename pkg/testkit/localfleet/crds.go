package localfleet

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/flotilla-cd/flotilla/pkg/kube"
)

// CRDSet names the custom resource definitions of one traffic provider,
// which build.sh fetches from the provider's pinned Go module and
// InstallCRDs installs in a cluster on demand.
type CRDSet string

// The CRD sets of the providers Flagger routes through.
const (
	// GatewayAPICRDs is the Gateway API's standard channel (Gateway,
	// GatewayClass, HTTPRoute, GRPCRoute, ReferenceGrant).
	GatewayAPICRDs CRDSet = "gatewayapi"
	// IstioCRDs is every CRD of Istio (VirtualService and DestinationRule
	// are the ones Flagger writes).
	IstioCRDs CRDSet = "istio"
	// KumaCRDs is Kuma's TrafficRoute (kuma.io/v1alpha1, cluster-scoped).
	KumaCRDs CRDSet = "kuma"
	// LinkerdCRDs is the SMI TrafficSplit (split.smi-spec.io/v1alpha1)
	// Flagger's linkerd provider writes.
	LinkerdCRDs CRDSet = "linkerd"
	// ContourCRDs is every CRD of Contour (HTTPProxy is Flagger's).
	ContourCRDs CRDSet = "contour"
	// TraefikCRDs is Traefik's TraefikService (traefik.containo.us/v1alpha1).
	TraefikCRDs CRDSet = "traefik"
	// ClusterProfileCRDs is the sig-multicluster ClusterProfile API
	// (multicluster.x-k8s.io/v1alpha1), which fleet.discovery.clusterProfiles
	// reads: its CRD as sigs.k8s.io/cluster-inventory-api v0.1.2 ships it
	// (config/crd/bases), kept in testdata since flotilla does not import
	// that module.
	ClusterProfileCRDs CRDSet = "clusterprofile"
	// ClusterAPICRDs is Cluster API's Cluster (cluster.x-k8s.io), which
	// fleet.discovery.clusterAPI reads: its CRD as Cluster API v1.13.5
	// ships it (config/crd/bases), kept in testdata.
	ClusterAPICRDs CRDSet = "clusterapi"
)

//go:embed testdata/multicluster.x-k8s.io_clusterprofiles.yaml
var clusterProfileCRD []byte

//go:embed testdata/cluster.x-k8s.io_clusters.yaml
var clusterAPICRD []byte

// embeddedCRDs are the sets this package holds itself.
var embeddedCRDs = map[CRDSet][]byte{ClusterProfileCRDs: clusterProfileCRD, ClusterAPICRDs: clusterAPICRD}

// crdFiles maps each set to its file in BinDir()/crds.
var crdFiles = map[CRDSet]string{
	GatewayAPICRDs: "gateway-api-" + GatewayAPIVersion + ".yaml",
	IstioCRDs:      "istio-" + IstioAPIVersion + ".yaml",
	KumaCRDs:       "kuma-" + KumaVersion + ".yaml",
	LinkerdCRDs:    "linkerd-smi-" + Linkerd2Version + ".yaml",
	ContourCRDs:    "contour-" + ContourVersion + ".yaml",
	TraefikCRDs:    "traefik-" + TraefikVersion + ".yaml",
}

// CRDSets lists every set InstallCRDs knows, sorted.
func CRDSets() []CRDSet {
	sets := make([]CRDSet, 0, len(crdFiles)+len(embeddedCRDs))
	for s := range crdFiles {
		sets = append(sets, s)
	}
	for s := range embeddedCRDs {
		sets = append(sets, s)
	}
	slices.Sort(sets)
	return sets
}

// InstallCRDs applies the CRDs of the sets to a cluster of the fleet and
// waits until the API server serves them. Applying a set again changes
// nothing, so scenarios that share a cluster may each ask for it.
func (f *Fleet) InstallCRDs(ctx context.Context, cluster string, sets ...CRDSet) error {
	c, ok := f.Cluster(cluster)
	if !ok {
		return fmt.Errorf("the fleet has no cluster %q", cluster)
	}
	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	a, err := kube.NewApplier(cfg, "flotilla-fleet")
	if err != nil {
		return err
	}
	for _, set := range sets {
		b, path, err := crdYAML(f.binDir(), set)
		if err != nil {
			return err
		}
		objs, err := kube.Decode(b)
		if err != nil {
			return fmt.Errorf("decoding %s: %w", path, err)
		}
		var names []string
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				return fmt.Errorf("%s holds a %s, not only CRDs", path, o.GetKind())
			}
			names = append(names, o.GetName())
		}
		if err := a.Apply(ctx, objs...); err != nil {
			return fmt.Errorf("applying the %s CRDs to %s: %w", set, cluster, err)
		}
		if err := kube.WaitCRDsEstablished(ctx, cfg, names...); err != nil {
			return fmt.Errorf("the %s CRDs in %s: %w", set, cluster, err)
		}
	}
	return nil
}

// crdYAML is the set's CRDs and where they were read.
func crdYAML(binDir string, set CRDSet) ([]byte, string, error) {
	if b, ok := embeddedCRDs[set]; ok {
		return b, "the embedded " + string(set) + " CRDs", nil
	}
	file, ok := crdFiles[set]
	if !ok {
		return nil, "", fmt.Errorf("unknown CRD set %q (known: %v)", set, CRDSets())
	}
	path := filepath.Join(binDir, "crds", file)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("reading the %s CRDs (run make fleet-build): %w", set, err)
	}
	return b, path, nil
}

// binDir is where the fleet's binaries are (BinDir() for a fleet loaded
// from an older state file).
func (f *Fleet) binDir() string {
	if f.BinDir != "" {
		return f.BinDir
	}
	return BinDir()
}
