package events

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/store"
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
	if _, err := DecodePayload(e); !fault.IsPermanent(err) {
		t.Errorf("DecodePayload(unknown type) = %v, want a permanent error", err)
	}
}

// Every type of the catalogue has a payload.
func TestPayloadsCoverTheCatalogue(t *testing.T) {
	for _, typ := range []string{
		TypeImagePushed, TypeGitPushed, TypeCanary, TypePipelineRun, TypeImageVerified, TypeImageRejected, TypeGitVerified, TypeGitRejected,
		TypeRolloutStarted, TypeRolloutSkipped, TypeWaveStarted, TypeClusterApplied, TypeWaveSucceeded,
		TypeRolloutSucceeded, TypeRolloutFailed, TypeClusterSucceeded, TypeClusterFailed, TypeClusterReverted,
		TypeRolloutRolledBack, TypeFunctionFailed, TypeEventQuarantined, TypeJournalDamaged,
		TypeGitPullRequest, TypePullRequestRequested, TypePullRequestStatus,
		TypePipelineRunRequested, TypePipelineRunStarted, TypePipelineRunFinished, TypePruneRequested, TypeClusterPruned,
		TypeAuditRecorded,
	} {
		if _, ok := payloadTypes[typ]; !ok {
			t.Errorf("no payload for %s", typ)
		}
	}
}

// The journal's repair writes its tombstones without importing the
// catalogue: its type and payload must be the catalogue's.
func TestJournalDamagedMatchesTheStore(t *testing.T) {
	if TypeJournalDamaged != store.TypeJournalDamaged {
		t.Errorf("TypeJournalDamaged = %q, the store writes %q", TypeJournalDamaged, store.TypeJournalDamaged)
	}
	raw, err := json.Marshal(store.Damaged{Seq: 10, Segment: "00000000000000000001.log", Offset: 4242, Reason: "CRC mismatch"})
	if err != nil {
		t.Fatal(err)
	}
	var got JournalDamaged
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := JournalDamaged{Seq: 10, Segment: "00000000000000000001.log", Offset: 4242, Reason: "CRC mismatch"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("store.Damaged as JournalDamaged (-want +got):\n%s", diff)
	}
}
