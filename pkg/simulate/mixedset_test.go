package simulate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
)

// mixedSetConfig is the example of a release set of git and image
// members: shop, the Job shop-migrate then shop-api from the deployments
// repository, then shop-frontend's image (track MinorVersion), in waves c1
// then c2.
var mixedSetConfig = filepath.Join("..", "..", "config", "examples", "release-set-mixed.yaml")

// TestMixedSet plays a release set of git and image members as the engine
// rolls it out: a commit to the branch and a push of the frontend's image
// each become the set's rollout of the tuple (rollout.DecideSetCommit,
// DecideSetPush: the git members at the commit, the frontend at its
// image, the other entries at what the fleet runs); each member its own
// workload in every cluster, applied in dependsOn order (the Job at the
// commit, the api at the commit's revision, the frontend at its image);
// the api failing rolls every cluster back to what its members ran.
// Catches a fleet model that plays the set as one workload (the frontend
// would run the commit), a git member left on the previous commit (the
// run's revision not applied to git members), a tuple without the
// deployed commit (the frontend's push skipped as if the set had none), a
// rollback that leaves a member on the failed version, and a superseding
// push that drops the commit.
func TestMixedSet(t *testing.T) {
	type rolloutOf struct{ Phase, Versions, Previous string }
	type outcome struct {
		Rollouts   []rolloutOf
		Runs       map[string]string // cluster -> the members' versions
		Skipped    []string          // plan's reasons
		RolledBack []string          // in order
	}
	const (
		before = "shop-migrate r1, shop-api r1, shop-frontend 2.0.0"
		// The tuples as describe rollout names them (Commit: the
		// simulated repository's commit of a name).
		r1   = "main@4f63bb0dbf3e (4f63bb0dbf3ea1c64d7e53030a76db9ca6fa80dd)"
		r2   = "main@e52cea9ea2fe (e52cea9ea2fe6fa2faaf4af4a052b318c9859c0f)"
		f200 = "shop-frontend 2.0.0 (sha256:5853dfebb7f5)"
		f210 = "shop-frontend 2.1.0 (sha256:258187e4d6d6)"
		prev = "shop-migrate " + r1 + ", shop-api " + r1 + ", " + f200
	)
	given := func(s *scenario) error {
		if err := s.fleetRuns("r1"); err != nil {
			return err
		}
		return s.fleetRunsOf("2.0.0", "shop-frontend")
	}
	tests := []struct {
		name  string
		steps []func(s *scenario) error
		want  outcome
	}{
		{"a commit moves the git members with the frontend unchanged", []func(*scenario) error{
			given,
			func(s *scenario) error { return s.pushedApp("r2", "shop-api") },
			(*scenario).untilEnded,
		}, outcome{
			Rollouts: []rolloutOf{{"Succeeded", "shop-migrate " + r2 + ", shop-api " + r2 + ", " + f200, prev}},
			Runs:     map[string]string{"c1": "shop-migrate r2, shop-api r2, shop-frontend 2.0.0", "c2": "shop-migrate r2, shop-api r2, shop-frontend 2.0.0"},
		}},
		{"the first commit, before any frontend's version, moves the git members alone", []func(*scenario) error{
			func(s *scenario) error { return s.pushedApp("r1", "shop") },
			(*scenario).untilEnded,
		}, outcome{
			Rollouts: []rolloutOf{{"Succeeded", "shop-migrate " + r1 + ", shop-api " + r1, ""}},
			Runs:     map[string]string{"c1": "shop-migrate r1, shop-api r1, shop-frontend -", "c2": "shop-migrate r1, shop-api r1, shop-frontend -"},
		}},
		{"the frontend's image moves the frontend at the deployed commit", []func(*scenario) error{
			given,
			func(s *scenario) error { return s.pushedApp("2.1.0", "shop-frontend") },
			(*scenario).untilEnded,
		}, outcome{
			Rollouts: []rolloutOf{{"Succeeded", "shop-migrate " + r1 + ", shop-api " + r1 + ", " + f210, prev}},
			Runs:     map[string]string{"c1": "shop-migrate r1, shop-api r1, shop-frontend 2.1.0", "c2": "shop-migrate r1, shop-api r1, shop-frontend 2.1.0"},
		}},
		{"the frontend's image before any commit, and a tag outside its track, skipped", []func(*scenario) error{
			func(s *scenario) error { return s.fleetRunsOf("2.0.0", "shop-frontend") },
			func(s *scenario) error { return s.pushedApp("2.1.0", "shop-frontend") },
			func(s *scenario) error { return s.pushedApp("r1", "shop") },
			(*scenario).untilEnded,
			func(s *scenario) error { return s.pushedApp("3.0.0", "shop-frontend") },
			(*scenario).untilEnded,
		}, outcome{
			// The first commit's tuple takes the frontend from what the
			// fleet runs (the set's deployed version without a commit).
			Rollouts: []rolloutOf{{"Succeeded", prev, f200}},
			Runs:     map[string]string{"c1": before, "c2": before},
			Skipped: []string{
				"release set shop has no commit of its git members yet: push to its branch first",
				"shop-frontend: 3.0.0 is a major upgrade of 2.0.0; track MinorVersion allows minor and patch upgrades only",
			},
		}},
		{"the api failing in wave 2 rolls every member back everywhere", []func(*scenario) error{
			given,
			func(s *scenario) error { return s.outcomeCluster("r2", "fails", "c2") },
			func(s *scenario) error { return s.pushedApp("r2", "shop") },
			(*scenario).untilEnded,
		}, outcome{
			Rollouts:   []rolloutOf{{"RolledBack", "shop-migrate " + r2 + ", shop-api " + r2 + ", " + f200, prev}},
			Runs:       map[string]string{"c1": before, "c2": before},
			RolledBack: []string{"c2", "c1"},
		}},
		{"the frontend's push while the commit's rollout runs carries both", []func(*scenario) error{
			given,
			func(s *scenario) error { return s.pushedApp("r2", "shop-api") },
			func(s *scenario) error { return s.passes("1m") },
			func(s *scenario) error { return s.pushedApp("2.1.0", "shop-frontend") },
			(*scenario).untilEnded,
		}, outcome{
			Rollouts: []rolloutOf{
				{"Superseded", "shop-migrate " + r2 + ", shop-api " + r2 + ", " + f200, prev},
				{"Succeeded", "shop-migrate " + r2 + ", shop-api " + r2 + ", " + f210, prev},
			},
			Runs: map[string]string{"c1": "shop-migrate r2, shop-api r2, shop-frontend 2.1.0", "c2": "shop-migrate r2, shop-api r2, shop-frontend 2.1.0"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scenario{opts: Options{Config: mixedSetConfig}}
			s.reset(t.Context())
			t.Cleanup(func() {
				s.signers.close()
				if s.en != nil {
					if err := s.en.stop(); err != nil {
						t.Error(err)
					}
				}
			})
			for _, step := range tt.steps {
				if err := step(s); err != nil {
					t.Fatal(err)
				}
			}
			ros, err := s.en.rollouts(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			got := outcome{Runs: map[string]string{}, RolledBack: s.reverted()}
			for _, ro := range ros {
				got.Rollouts = append(got.Rollouts, rolloutOf{string(ro.Phase), ro.Versions.Describe(), ro.PreviousVersions.Describe()})
			}
			for _, c := range []string{"c1", "c2"} {
				got.Runs[c], _ = s.en.fleet.Version(c, "shop")
			}
			for _, x := range s.en.eventsOf(events.TypeRolloutSkipped) {
				r, err := events.Decode[events.RolloutSkipped](x.e)
				if err != nil {
					t.Fatal(err)
				}
				got.Skipped = append(got.Skipped, r.Reason)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("outcome (-want +got):\n%s", d)
			}
		})
	}
}

// The members of a set of git and image members are their own
// workloads: each git member's version in a cluster is the scenario's name
// of its commit, the frontend's its tag, the set's what they make up.
// Catches a Version that answers a git member with the set's lead, or the
// set with one workload's.
func TestMixedSetMemberVersions(t *testing.T) {
	s := &scenario{opts: Options{Config: mixedSetConfig}}
	s.reset(t.Context())
	t.Cleanup(func() {
		if s.en != nil {
			_ = s.en.stop()
		}
	})
	if err := s.fleetRuns("r1"); err != nil {
		t.Fatal(err)
	}
	if err := s.fleetRunsOf("2.0.0", "shop-frontend"); err != nil {
		t.Fatal(err)
	}
	if err := s.ensure(); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, app := range []string{"shop-migrate", "shop-api", "shop-frontend", "shop"} {
		got[app], _ = s.en.fleet.Version("c1", app)
	}
	want := map[string]string{"shop-migrate": "r1", "shop-api": "r1", "shop-frontend": "2.0.0", "shop": "shop-migrate r1, shop-api r1, shop-frontend 2.0.0"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("versions in c1 (-want +got):\n%s", d)
	}
}

// testdata/mixedsets.feature against config/examples/release-set-mixed.yaml:
// the steps a user writes of a set of git and image members (a commit
// pushed naming the set or a git member, a member's image), and the report
// naming the set's rollout, its members (the Job marked) and each entry
// as `flotilla describe rollout` does. Catches a report without the
// versions, and a step that cannot name a member.
func TestMixedSetFeature(t *testing.T) {
	var gout, report bytes.Buffer
	status, err := Run(t.Context(), Options{Config: mixedSetConfig, Paths: []string{filepath.Join("testdata", "mixedsets.feature")},
		Format: "progress", Output: &gout, Report: &report})
	if err != nil {
		t.Fatal(err)
	}
	if status != 0 {
		t.Fatalf("status %d:\n%s\n%s", status, gout.String(), report.String())
	}
	commit := `main@[0-9a-f]{12} \([0-9a-f]{40}\)`
	versions := regexp.MustCompile(`(?m)^rollout \S+ of shop shop-migrate:main@[0-9a-f]{12},shop-api:main@[0-9a-f]{12},shop-frontend:2\.0\.0: Succeeded\n` +
		`members: shop-migrate \(job\) -> shop-api -> shop-frontend\n` +
		`versions: shop-migrate ` + commit + `, shop-api ` + commit + `, shop-frontend 2\.0\.0 \(sha256:[0-9a-f]{12}\)\n` +
		`previous: shop-migrate ` + commit + `, shop-api ` + commit + `, shop-frontend 2\.0\.0 \(sha256:[0-9a-f]{12}\)\n` +
		`.*\n  wave-1 +c1 +shop-migrate r2, shop-api r2, shop-frontend 2\.0\.0 +Succeeded$`)
	if !versions.MatchString(report.String()) {
		t.Errorf("the report names no rollout of the set with its members' versions:\n%s", report.String())
	}
}

// A release set of git and image members led by its image member
// (config/examples/release-set-mixed-frontend-lead.yaml) is not simulated
// yet: a push of the frontend, or a commit naming the set, is refused
// naming the set and its lead, not played with the fleet model's git lead.
func TestMixedSetImageLeadRefused(t *testing.T) {
	for _, step := range []string{`"2.1.0" of "shop-frontend" is pushed`, `"r2" of "shop" is pushed`} {
		feature := filepath.Join(t.TempDir(), "lead.feature")
		if err := os.WriteFile(feature, []byte("Feature: shop led by its frontend\n  Scenario: a push\n    When "+step+
			"\n    And the rollout runs until it ends\n    Then the rollout is Succeeded\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		var gout bytes.Buffer
		status, err := Run(t.Context(), Options{Config: filepath.Join("..", "..", "config", "examples", "release-set-mixed-frontend-lead.yaml"),
			Paths: []string{feature}, Format: "progress", Output: &gout})
		if err == nil && status == 0 {
			t.Fatalf("%s: simulate passed:\n%s", step, gout.String())
		}
		if want, got := `release set "shop" of git and image members led by its image member shop-frontend is not simulated yet`, fmt.Sprint(err)+gout.String(); !strings.Contains(got, want) {
			t.Errorf("%s: simulate says nothing of %q:\n%s", step, want, got)
		}
	}
}
