package localfleet

import (
	"testing"

	"github.com/flotilla-cd/flotilla/pkg/kube"
)

// TestCRDFiles checks that every set's file, as build.sh fetched it, holds
// only CRDs, and at least the ones Flagger writes for the provider.
func TestCRDFiles(t *testing.T) {
	want := map[CRDSet][]string{
		GatewayAPICRDs:     {"httproutes.gateway.networking.k8s.io", "gateways.gateway.networking.k8s.io"},
		IstioCRDs:          {"virtualservices.networking.istio.io", "destinationrules.networking.istio.io"},
		KumaCRDs:           {"trafficroutes.kuma.io"},
		LinkerdCRDs:        {"trafficsplits.split.smi-spec.io"},
		ContourCRDs:        {"httpproxies.projectcontour.io"},
		TraefikCRDs:        {"traefikservices.traefik.containo.us"},
		ClusterProfileCRDs: {"clusterprofiles.multicluster.x-k8s.io"},
		ClusterAPICRDs:     {"clusters.cluster.x-k8s.io"},
	}
	if len(want) != len(CRDSets()) {
		t.Fatalf("the test knows %d sets, the fleet %d (%v)", len(want), len(CRDSets()), CRDSets())
	}
	for _, set := range CRDSets() {
		b, path, err := crdYAML(BinDir(), set)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := kube.Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", set, err)
		}
		names := map[string]bool{}
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				t.Errorf("%s holds a %s %s", path, o.GetKind(), o.GetName())
			}
			names[o.GetName()] = true
		}
		for _, n := range want[set] {
			if !names[n] {
				t.Errorf("%s has no CRD %s", path, n)
			}
		}
	}
}
