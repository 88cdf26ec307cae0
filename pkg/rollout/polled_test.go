package rollout_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

func TestPolledNewest(t *testing.T) {
	newest := config.Application{Name: "app", Track: config.TrackNewest, DenyTags: []string{".*-debug"}}
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := func(minutes int) time.Time { return t0.Add(time.Duration(minutes) * time.Minute) }
	imgs := []rollout.Built{
		{Tag: "build-a", Digest: "sha256:a", Created: at(-20)},
		{Tag: "build-b", Digest: "sha256:b", Created: at(-10)},
		{Tag: "build-c", Digest: "sha256:c", Created: at(-1)},
		{Tag: "build-d-debug", Digest: "sha256:d", Created: at(0)},
		{Tag: "latest", Digest: "sha256:c", Created: at(-1)},
		{Tag: "no-date", Digest: "sha256:e"},
	}
	deployedB := rollout.AppState{DeployedTag: "build-b", DeployedDigest: "sha256:b", DeployedCreated: at(-10), LatestTag: "build-b"}
	tests := []struct {
		name     string
		st       rollout.AppState
		inFlight []rollout.Rollout
		imgs     []rollout.Built
		want     string
		reason   string
	}{
		{name: "the most recently built, not the lexically last", st: deployedB, imgs: imgs, want: "build-c"},
		{name: "nothing deployed: the most recently built", imgs: imgs[:3], want: "build-c"},
		{name: "built before the deployed one: nothing", st: deployedB, imgs: imgs[:2],
			reason: "none of the 2 tags read was built after build-b that the application takes"},
		{name: "being rolled out: not fed again", st: deployedB, imgs: imgs[:3],
			inFlight: []rollout.Rollout{{ID: "app-2", Tag: "build-c", Digest: "sha256:c", Phase: rollout.Progressing}},
			reason:   "none of the 3 tags read was built after build-b that the application takes"},
		{name: "a failed build is not brought back", imgs: imgs[:3],
			st:     rollout.AppState{DeployedTag: "build-b", DeployedDigest: "sha256:b", DeployedCreated: at(-10), LatestTag: "build-c"},
			reason: "none of the 3 tags read was built after build-c that the application takes"},
		{name: "a build after the failed one", imgs: append(imgs[:3:3], rollout.Built{Tag: "build-e", Digest: "sha256:e", Created: at(5)}),
			st:   rollout.AppState{DeployedTag: "build-b", DeployedDigest: "sha256:b", DeployedCreated: at(-10), LatestTag: "build-c"},
			want: "build-e"},
		{name: "quarantined: the next most recent", imgs: imgs[:3],
			st:   rollout.AppState{DeployedTag: "build-a", DeployedDigest: "sha256:a", DeployedCreated: at(-20), Quarantined: []rollout.Quarantine{{Tag: "build-c"}}},
			want: "build-b"},
		{name: "an empty repository", reason: "none of the 0 tags read is a build the application takes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, found, reason, err := rollout.PolledNewest(newest, tt.st, tt.inFlight, tt.imgs)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Tag); diff != "" || found != (tt.want != "") {
				t.Errorf("tag (-want +got):\n%s found %v", diff, found)
			}
			if reason != tt.reason {
				t.Errorf("reason = %q, want %q", reason, tt.reason)
			}
		})
	}
}

// A deployed tag a poll finds pointing at a new digest (rebuilt and pushed
// again) rolls out as a webhook's push of it would, once.
func TestPolledMoved(t *testing.T) {
	minor := config.Application{Name: "app", Track: config.TrackMinorVersion}
	deployed := rollout.AppState{DeployedTag: "1.0.0", DeployedDigest: "sha256:old", LatestTag: "1.0.0", DeployedRollout: "app-1", LatestRollout: "app-1"}
	rebuilt := rollout.Built{Tag: "1.0.0", Digest: "sha256:new"}
	type result struct {
		Moved  bool
		Reason string
	}
	tests := []struct {
		name     string
		app      config.Application
		st       rollout.AppState
		inFlight []rollout.Rollout
		img      rollout.Built
		latest   *rollout.Rollout
		want     result
	}{
		{name: "rebuilt: rolls out", app: minor, st: deployed, img: rebuilt, want: result{true, "1.0.0 was pushed again with a new digest"}},
		{name: "the deployed digest", app: minor, st: deployed, img: rollout.Built{Tag: "1.0.0", Digest: "sha256:old"},
			want: result{Reason: "1.0.0 points at the deployed digest"}},
		{name: "not the deployed tag", app: minor, st: deployed, img: rollout.Built{Tag: "1.1.0", Digest: "sha256:x"}},
		{name: "nothing deployed", app: minor, img: rebuilt},
		{name: "being rolled out", app: minor, st: deployed, img: rebuilt,
			inFlight: []rollout.Rollout{{ID: "app-2", Tag: "1.0.0", Digest: "sha256:new", Phase: rollout.Progressing}},
			want:     result{Reason: "1.0.0 is being rolled out (rollout app-2)"}},
		{name: "rolled out before and failed: not brought back", app: minor, st: deployed, img: rebuilt,
			latest: &rollout.Rollout{ID: "app-2", Tag: "1.0.0", Digest: "sha256:new", Phase: rollout.RolledBack},
			want:   result{Reason: "1.0.0's new digest sha256:new was rolled out before (rollout app-2, RolledBack)"}},
		{name: "rebuilt again after a failed build", app: minor, st: deployed, img: rollout.Built{Tag: "1.0.0", Digest: "sha256:newer"},
			latest: &rollout.Rollout{ID: "app-2", Tag: "1.0.0", Digest: "sha256:new", Phase: rollout.RolledBack},
			want:   result{true, "1.0.0 was pushed again with a new digest"}},
		{name: "quarantined", app: minor, img: rebuilt,
			st:   rollout.AppState{DeployedTag: "1.0.0", DeployedDigest: "sha256:old", Quarantined: []rollout.Quarantine{{Tag: "1.0.0", Digest: "sha256:new", By: "ops", Reason: "bad"}}},
			want: result{Reason: "1.0.0 is quarantined (by ops: bad)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			moved, reason, err := rollout.PolledMoved(tt.app, tt.st, tt.inFlight, tt.img, tt.latest)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, result{moved, reason}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
