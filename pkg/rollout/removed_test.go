package rollout_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

func TestRemoveClusters(t *testing.T) {
	tests := []struct {
		name        string
		rollout     func() *rollout.Rollout
		gone        []string
		wantRemoved []string
		want        []string
		wantPhases  map[string]rollout.ClusterPhase
		wantPhase   rollout.Phase
		wantWave    int
	}{{
		name: "a pending cluster of the current wave leaves: the wave, done without it, succeeds and the next starts",
		rollout: func() *rollout.Rollout {
			return waves([]rollout.Cluster{cl("c1", rollout.ClusterSucceeded, ""), cl("c2", rollout.ClusterPending, "")},
				[]rollout.Cluster{cl("c3", rollout.ClusterPending, "")})
		},
		gone: []string{"c2"}, wantRemoved: []string{"c2"},
		want:       []string{events.TypeWaveSucceeded, events.TypeWaveStarted},
		wantPhases: map[string]rollout.ClusterPhase{"c1": rollout.ClusterSucceeded, "c2": rollout.ClusterRemoved, "c3": rollout.ClusterPending},
		wantPhase:  rollout.Progressing, wantWave: 1,
	}, {
		name: "a cluster under analysis leaves while another still runs: the wave waits for the other",
		rollout: func() *rollout.Rollout {
			return waves([]rollout.Cluster{cl("c1", rollout.ClusterProgressing, ""), cl("c2", rollout.ClusterProgressing, "")})
		},
		gone: []string{"c1"}, wantRemoved: []string{"c1"},
		wantPhases: map[string]rollout.ClusterPhase{"c1": rollout.ClusterRemoved, "c2": rollout.ClusterProgressing},
		wantPhase:  rollout.Progressing,
	}, {
		name: "the last cluster running of the last wave leaves: the rollout succeeds with those that remain",
		rollout: func() *rollout.Rollout {
			r := waves([]rollout.Cluster{cl("c1", rollout.ClusterSucceeded, "")},
				[]rollout.Cluster{cl("c2", rollout.ClusterSucceeded, ""), cl("c3", rollout.ClusterApplying, "")})
			r.Wave = 1
			return r
		},
		gone: []string{"c3"}, wantRemoved: []string{"c3"},
		want:       []string{events.TypeWaveSucceeded, events.TypeRolloutSucceeded},
		wantPhases: map[string]rollout.ClusterPhase{"c1": rollout.ClusterSucceeded, "c2": rollout.ClusterSucceeded, "c3": rollout.ClusterRemoved},
		wantPhase:  rollout.Succeeded, wantWave: 1,
	}, {
		name: "every cluster of a later wave leaves: that wave passes empty once reached",
		rollout: func() *rollout.Rollout {
			return waves([]rollout.Cluster{cl("c1", rollout.ClusterProgressing, "")}, []rollout.Cluster{cl("c2", rollout.ClusterPending, "")})
		},
		gone: []string{"c2"}, wantRemoved: []string{"c2"},
		wantPhases: map[string]rollout.ClusterPhase{"c1": rollout.ClusterProgressing, "c2": rollout.ClusterRemoved},
		wantPhase:  rollout.Progressing,
	}, {
		name: "what a cluster finished stays its history",
		rollout: func() *rollout.Rollout {
			return waves([]rollout.Cluster{cl("c1", rollout.ClusterSucceeded, ""), cl("c2", rollout.ClusterFailed, "")},
				[]rollout.Cluster{cl("c3", rollout.ClusterProgressing, "")})
		},
		gone:       []string{"c1", "c2"},
		wantPhases: map[string]rollout.ClusterPhase{"c1": rollout.ClusterSucceeded, "c2": rollout.ClusterFailed, "c3": rollout.ClusterProgressing},
		wantPhase:  rollout.Progressing,
	}, {
		name: "a rollout rolling back is left alone",
		rollout: func() *rollout.Rollout {
			r := waves([]rollout.Cluster{cl("c1", rollout.ClusterReverting, "old"), cl("c2", rollout.ClusterPending, "")})
			r.Phase = rollout.Failed
			return r
		},
		gone:       []string{"c1", "c2"},
		wantPhases: map[string]rollout.ClusterPhase{"c1": rollout.ClusterReverting, "c2": rollout.ClusterPending},
		wantPhase:  rollout.Failed,
	}, {
		name: "a queued rollout starts without the cluster",
		rollout: func() *rollout.Rollout {
			r := waves([]rollout.Cluster{cl("c1", rollout.ClusterPending, ""), cl("c2", rollout.ClusterPending, "")})
			r.Phase = rollout.Queued
			return r
		},
		gone: []string{"c2"}, wantRemoved: []string{"c2"},
		wantPhases: map[string]rollout.ClusterPhase{"c1": rollout.ClusterPending, "c2": rollout.ClusterRemoved},
		wantPhase:  rollout.Queued,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.rollout()
			if r.Phase == "" {
				r.Phase = rollout.Progressing
			}
			removed, evs, err := r.RemoveClusters(cause(t), tt.gone, "removed from the fleet's configuration", rollout.Gates{Now: t0})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantRemoved, removed); diff != "" {
				t.Errorf("removed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, types(evs)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			got := map[string]rollout.ClusterPhase{}
			for _, w := range r.Waves {
				for _, c := range w.Clusters {
					got[c.Name] = c.Phase
					if c.Phase == rollout.ClusterRemoved && (c.Message == "" || c.Run != "" || !c.Deadline.IsZero()) {
						t.Errorf("removed cluster %s: message %q, run %q, deadline %s: want a message, no run, no deadline", c.Name, c.Message, c.Run, c.Deadline)
					}
				}
			}
			if diff := cmp.Diff(tt.wantPhases, got); diff != "" {
				t.Errorf("cluster phases (-want +got):\n%s", diff)
			}
			if r.Phase != tt.wantPhase || r.Wave != tt.wantWave {
				t.Errorf("rollout %s in wave %d, want %s in wave %d", r.Phase, r.Wave, tt.wantPhase, tt.wantWave)
			}
		})
	}
}

// A late result of a removed cluster (its Flagger still reports) changes
// nothing.
func TestRecordIgnoresARemovedCluster(t *testing.T) {
	r := waves([]rollout.Cluster{cl("c1", rollout.ClusterRemoved, ""), cl("c2", rollout.ClusterProgressing, "")})
	r.Phase = rollout.Progressing
	moves, err := r.Record(events.ClusterResult{RolloutID: r.ID, Cluster: "c1"}, false)
	if err != nil || moves {
		t.Fatalf("Record = %v, %v; want no move, no error", moves, err)
	}
	if c, _, _ := r.Cluster("c1"); c.Phase != rollout.ClusterRemoved {
		t.Errorf("c1 is %s, want %s", c.Phase, rollout.ClusterRemoved)
	}
}
