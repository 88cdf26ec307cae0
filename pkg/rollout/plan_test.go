package rollout_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/versionpolicy"
)

func TestDecideVersion(t *testing.T) {
	minor := config.Application{Name: "app", Track: config.TrackMinorVersion, DenyTags: []string{".*-debug"}}
	newest := config.Application{Name: "app", Track: config.TrackNewest}
	deployed := rollout.AppState{DeployedTag: "1.2.0", DeployedDigest: "sha256:d120", DeployedCreated: t0}
	tests := []struct {
		name     string
		app      config.Application
		st       rollout.AppState
		inFlight []rollout.Rollout
		v        events.ImageVerified
		want     versionpolicy.Decision
	}{
		{name: "a newer minor rolls out", app: minor, st: deployed, v: events.ImageVerified{Tag: "1.3.0", Digest: "sha256:d130"},
			want: versionpolicy.Decision{Accept: true}},
		{name: "an older one does not", app: minor, st: deployed, v: events.ImageVerified{Tag: "1.1.0", Digest: "sha256:d110"},
			want: versionpolicy.Decision{Reason: "1.1.0 is older than the current 1.2.0"}},
		{name: "the same tag with a new digest is a new version", app: minor, st: deployed, v: events.ImageVerified{Tag: "1.2.0", Digest: "sha256:rebuilt"},
			want: versionpolicy.Decision{Accept: true, Reason: "1.2.0 was pushed again with a new digest"}},
		{name: "a quarantined version never", app: minor,
			st: rollout.AppState{DeployedTag: "1.2.0", Quarantined: []rollout.Quarantine{{Tag: "1.3.0", By: "alice", Reason: "leaks"}}},
			v:  events.ImageVerified{Tag: "1.3.0", Digest: "sha256:d130"}, want: versionpolicy.Decision{Reason: "1.3.0 is quarantined (by alice: leaks)"}},
		{name: "a denied tag never", app: minor, st: deployed, v: events.ImageVerified{Tag: "1.3.0-debug"},
			want: versionpolicy.Decision{Reason: `1.3.0-debug matches the application's denyTags pattern ".*-debug"`}},
		{name: "not newer than the rollout in flight", app: minor, st: deployed, v: events.ImageVerified{Tag: "1.3.0", Digest: "sha256:d130"},
			inFlight: []rollout.Rollout{{ID: "app-1", Tag: "1.4.0", Digest: "sha256:d140", Phase: rollout.Progressing}},
			want:     versionpolicy.Decision{Reason: "1.3.0 is not newer than 1.4.0, which rollout app-1 is rolling out"}},
		{name: "being rolled out already", app: minor, st: deployed, v: events.ImageVerified{Tag: "1.3.0", Digest: "sha256:d130"},
			inFlight: []rollout.Rollout{{ID: "app-1", Tag: "1.3.0", Digest: "sha256:d130", Phase: rollout.Progressing}},
			want:     versionpolicy.Decision{Reason: "1.3.0 is being rolled out (rollout app-1)"}},
		{name: "signed since its unsigned rollout started", app: minor, st: deployed,
			v:        events.ImageVerified{Tag: "1.3.0", Digest: "sha256:d130", SignedBy: map[string]string{"app": "ci@example.com"}},
			inFlight: []rollout.Rollout{{ID: "app-1", Tag: "1.3.0", Digest: "sha256:d130", Phase: rollout.Progressing, StopsBefore: "prod"}},
			want:     versionpolicy.Decision{Accept: true, Reason: "1.3.0 is signed now (ci@example.com); rollout app-1 took it unsigned"}},
		{name: "a failing rollout is no baseline", app: minor, st: deployed, v: events.ImageVerified{Tag: "1.3.0", Digest: "sha256:d130"},
			inFlight: []rollout.Rollout{{ID: "app-1", Tag: "1.4.0", Phase: rollout.Failed}},
			want:     versionpolicy.Decision{Accept: true}},
		{name: "track Newest: built before the deployed", app: newest, st: deployed, v: events.ImageVerified{Tag: "zzz", Created: t0.Add(-time.Hour)},
			want: versionpolicy.Decision{Reason: "zzz was built at 2026-11-28T08:00:00Z, before the deployed 1.2.0 (2026-11-28T09:00:00Z); track Newest follows when images were built"}},
		{name: "a commit deployed already", app: config.Application{Name: "app", Source: &config.Source{Git: &config.GitSource{URL: "https://git.test/x"}}},
			st: rollout.AppState{DeployedDigest: "abc"}, v: events.ImageVerified{Tag: "main@abc", Digest: "abc"},
			want: versionpolicy.Decision{Reason: "commit abc (main@abc) is deployed already"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rollout.DecideVersion(tt.app, tt.st, tt.inFlight, tt.v)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want.Accept && tt.want.Reason == "" {
				got.Reason = "" // the version policy's own words
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("DecideVersion (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMakeWay(t *testing.T) {
	ro := rollout.Rollout{ID: "new"}
	tests := []struct {
		name          string
		onNewVersion  string
		inFlight      []rollout.Rollout
		wantQueue     bool
		wantSupersede []string
	}{
		{"supersede the running one", config.OnNewVersionSupersede, []rollout.Rollout{{ID: "a", Phase: rollout.Progressing}}, false, []string{"a"}},
		{"queue behind the running one", config.OnNewVersionQueue, []rollout.Rollout{{ID: "a", Phase: rollout.Progressing}}, true, nil},
		{"a rollback under way is never cut short", config.OnNewVersionSupersede, []rollout.Rollout{{ID: "a", Phase: rollout.Failed}}, true, nil},
		{"only the newest waits", config.OnNewVersionQueue, []rollout.Rollout{{ID: "a", Phase: rollout.Progressing}, {ID: "b", Phase: rollout.Queued}}, true, []string{"b"}},
		{"a failed rollback is taken over", config.OnNewVersionSupersede, []rollout.Rollout{{ID: "a", Phase: rollout.RollbackFailed}}, false, []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			queue, supersede := rollout.MakeWay(config.Application{OnNewVersion: tt.onNewVersion}, tt.inFlight, ro)
			if queue != tt.wantQueue || !cmp.Equal(supersede, tt.wantSupersede) {
				t.Errorf("MakeWay = %v, %v; want %v, %v", queue, supersede, tt.wantQueue, tt.wantSupersede)
			}
		})
	}
}

// Polled: what a poll of the registry feeds in, of the tags it listed.
func TestPolled(t *testing.T) {
	minor := config.Application{Name: "app", Track: config.TrackMinorVersion, DenyTags: []string{".*-debug"}}
	patch := config.Application{Name: "app", Track: config.TrackPatchLevel, Semver: "<1.2.9"}
	filtered := config.Application{Name: "app", Track: config.TrackMajorVersion,
		TagFilter: &config.TagFilter{Pattern: `^release-(?P<v>[0-9.]+)$`, Extract: "$v"}}
	deployed := rollout.AppState{DeployedTag: "1.2.0", DeployedDigest: "sha256:d120", LatestTag: "1.2.0"}
	tags := []string{"1.0.0", "1.2.0", "1.2.1", "1.3.0", "1.3.1-rc.1", "1.4.0-debug", "2.0.0", "latest", "sha256-abc.sig"}
	tests := []struct {
		name     string
		app      config.Application
		st       rollout.AppState
		inFlight []rollout.Rollout
		tags     []string
		want     string
		reason   string
	}{
		{name: "the newest the track takes", app: minor, st: deployed, tags: tags, want: "1.3.0"},
		{name: "nothing deployed: the newest version", app: minor, tags: []string{"0.9.0", "1.1.0", "v1.1.1"}, want: "v1.1.1"},
		{name: "patch level within its constraint", app: patch, st: deployed, tags: tags, want: "1.2.1"},
		{name: "what the webhook brought already changes nothing", app: minor,
			st: rollout.AppState{DeployedTag: "1.2.0", LatestTag: "1.3.0"}, tags: tags,
			reason: "none of the 9 tags is newer than 1.3.0 that the application takes"},
		{name: "the version in flight is not fed again", app: minor, st: deployed, tags: tags,
			inFlight: []rollout.Rollout{{ID: "app-1", Tag: "1.3.0", Digest: "sha256:d130", Phase: rollout.Progressing}},
			reason:   "none of the 9 tags is newer than 1.2.0 that the application takes"},
		{name: "a failed version is not brought back", app: minor,
			st: rollout.AppState{DeployedTag: "1.2.0", LatestTag: "1.3.0"}, tags: []string{"1.2.0", "1.3.0"},
			reason: "none of the 2 tags is newer than 1.3.0 that the application takes"},
		{name: "a newer one than the failed version", app: minor,
			st: rollout.AppState{DeployedTag: "1.2.0", LatestTag: "1.3.0"}, tags: []string{"1.2.0", "1.3.0", "1.3.1"}, want: "1.3.1"},
		{name: "a quarantined tag is skipped", app: minor,
			st:   rollout.AppState{DeployedTag: "1.2.0", Quarantined: []rollout.Quarantine{{Tag: "1.3.0"}}},
			tags: []string{"1.2.0", "1.2.5", "1.3.0"}, want: "1.2.5"},
		{name: "tag filter and extract", app: filtered, st: rollout.AppState{DeployedTag: "release-1.0"},
			tags: []string{"release-1.0", "release-2.1", "release-10.0", "10.0", "debug-99"}, want: "release-10.0"},
		{name: "an empty repository", app: minor, tags: nil, reason: "none of the 0 tags is a version the application takes"},
		{name: "track Newest goes to PolledNewest", app: config.Application{Name: "app", Track: config.TrackNewest}, tags: tags,
			reason: "track Newest: tags are ordered by build time (PolledNewest)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason, err := rollout.Polled(tt.app, tt.st, tt.inFlight, tt.tags)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{tt.want, tt.reason}, []string{got, reason}); diff != "" {
				t.Errorf("Polled (-want +got):\n%s", diff)
			}
		})
	}
}

// PolledCommit: a git branch's head, as a poll read it.
func TestPolledCommit(t *testing.T) {
	const head = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name     string
		st       rollout.AppState
		inFlight []rollout.Rollout
		want     bool
		reason   string
	}{
		{name: "a commit no webhook brought", st: rollout.AppState{DeployedDigest: "fedcba", LatestTag: "main@fedcba"}, want: true},
		{name: "nothing deployed yet", want: true},
		{name: "deployed already", st: rollout.AppState{DeployedDigest: head},
			reason: "commit " + head + " (main@0123456789ab) is deployed already"},
		{name: "being rolled out", inFlight: []rollout.Rollout{{ID: "web-1", Digest: head, Phase: rollout.Progressing}},
			reason: "commit " + head + " (main@0123456789ab) is being rolled out (rollout web-1)"},
		{name: "a rollout was started for it (it failed)", st: rollout.AppState{DeployedDigest: "fedcba", LatestTag: "main@0123456789ab"},
			reason: "commit 0123456789ab is the newest a rollout was started for"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason := rollout.PolledCommit(tt.st, tt.inFlight, "main", head)
			if diff := cmp.Diff([]any{tt.want, tt.reason}, []any{got, reason}); diff != "" {
				t.Errorf("PolledCommit (-want +got):\n%s", diff)
			}
		})
	}
}
