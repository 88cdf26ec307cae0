package events

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodePayload(t *testing.T) {
	for _, p := range []struct {
		typ     string
		payload any
	}{
		{TypeImagePushed, ImagePushed{Registry: "r.example.com", Repository: "shop/api", Tag: "1.0.0"}},
		{TypeWaveStarted, WaveStarted{RolloutID: "r1", Wave: 1, Clusters: []string{"c2"}}},
		{TypeClusterReverted, ClusterResult{RolloutID: "r1", Cluster: "c2", Reason: "observed"}},
		{TypeRolloutRolledBack, RolloutResult{RolloutID: "r1", Reason: "wave 2 failed"}},
	} {
		e, err := New("id", Source, p.typ, p.payload)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodePayload(e)
		if err != nil {
			t.Fatalf("%s: %v", p.typ, err)
		}
		if diff := cmp.Diff(p.payload, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", p.typ, diff)
		}
	}
	e, err := New("id", Source, "dev.example.other.v1", map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodePayload(e); !IsPermanent(err) {
		t.Errorf("DecodePayload(unknown type) = %v, want a permanent error", err)
	}
}

// Every type of the catalogue has a payload.
func TestPayloadsCoverTheCatalogue(t *testing.T) {
	for _, typ := range []string{
		TypeImagePushed, TypeGitPushed, TypeCanary, TypePipelineRun, TypeImageVerified, TypeImageRejected,
		TypeRolloutStarted, TypeRolloutSkipped, TypeWaveStarted, TypeClusterApplied, TypeWaveSucceeded,
		TypeRolloutSucceeded, TypeRolloutFailed, TypeClusterSucceeded, TypeClusterFailed, TypeClusterReverted,
		TypeRolloutRolledBack, TypeFunctionFailed, TypeEventQuarantined, TypeJournalDamaged,
	} {
		if _, ok := payloadTypes[typ]; !ok {
			t.Errorf("no payload for %s", typ)
		}
	}
}
