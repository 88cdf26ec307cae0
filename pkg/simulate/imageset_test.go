package simulate

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
)

// imageSetConfig is the example of a release set of image members: shop,
// shop-api then shop-frontend (track MinorVersion each), in waves c1 then
// c2.
var imageSetConfig = filepath.Join("..", "..", "config", "examples", "release-set-images.yaml")

// TestImageSet plays a release set of image members as the engine rolls
// it out: a push of one member is the set's, its version the tuple of
// that member at the pushed tag and the others at what the fleet runs,
// decided by the member's own policy (a tag outside its track, or not
// newer, skipped with plan's reason); each member's workload its own in
// every cluster, applied in order, the first failing stopping the
// cluster, which rolls every cluster back to what it ran. Catches a
// fleet model that plays the set as one workload (the frontend would run
// the api's tag), a tuple without the members the scenario said the
// fleet runs (tag "shop-api:1.1.0"), a member's tag judged by no policy,
// a rollback that leaves a member on the failed version, and a
// superseding push that drops the first one's member.
func TestImageSet(t *testing.T) {
	type rolloutOf struct{ Tag, Phase, Previous string }
	type outcome struct {
		Rollouts   []rolloutOf
		Runs       map[string]string // cluster -> the members' versions
		Skipped    []string          // plan's reasons
		RolledBack []string          // in order
	}
	const (
		before = "shop-api 1.0.0, shop-frontend 2.0.0"
		prev   = "shop-api:1.0.0,shop-frontend:2.0.0"
	)
	given := func(s *scenario) error {
		if err := s.fleetRuns("1.0.0"); err != nil {
			return err
		}
		return s.fleetRunsOf("2.0.0", "shop-frontend")
	}
	tests := []struct {
		name  string
		steps []func(s *scenario) error
		want  outcome
	}{
		{"a push of the api moves the set with the frontend unchanged", []func(*scenario) error{
			given,
			func(s *scenario) error { return s.pushedApp("1.1.0", "shop-api") },
			(*scenario).untilEnded,
		}, outcome{
			Rollouts: []rolloutOf{{"shop-api:1.1.0,shop-frontend:2.0.0", "Succeeded", prev}},
			Runs:     map[string]string{"c1": "shop-api 1.1.0, shop-frontend 2.0.0", "c2": "shop-api 1.1.0, shop-frontend 2.0.0"},
		}},
		{"a tag outside the api's track, and one not newer, skipped with plan's reasons", []func(*scenario) error{
			given,
			func(s *scenario) error { return s.pushedApp("2.0.0", "shop-api") },
			func(s *scenario) error { return s.pushedApp("0.9.0", "shop-api") },
			(*scenario).untilEnded,
		}, outcome{
			Runs: map[string]string{"c1": before, "c2": before},
			Skipped: []string{
				"shop-api: 2.0.0 is a major upgrade of 1.0.0; track MinorVersion allows minor and patch upgrades only",
				"shop-api: 0.9.0 is older than the current 1.0.0",
			},
		}},
		{"the api failing in wave 2 rolls both members back everywhere", []func(*scenario) error{
			given,
			func(s *scenario) error { return s.outcomeCluster("1.1.0", "fails", "c2") },
			func(s *scenario) error { return s.pushedApp("2.1.0", "shop-frontend") },
			func(s *scenario) error { return s.pushedApp("1.1.0", "shop-api") },
			(*scenario).untilEnded,
		}, outcome{
			Rollouts: []rolloutOf{
				{"shop-api:1.0.0,shop-frontend:2.1.0", "Superseded", prev},
				{"shop-api:1.1.0,shop-frontend:2.1.0", "RolledBack", prev},
			},
			Runs:       map[string]string{"c1": before, "c2": before},
			RolledBack: []string{"c2", "c1"},
		}},
		{"a push of the frontend while the api's rollout runs carries both", []func(*scenario) error{
			given,
			func(s *scenario) error { return s.pushedApp("1.1.0", "shop-api") },
			func(s *scenario) error { return s.passes("1m") },
			func(s *scenario) error { return s.pushedApp("2.1.0", "shop-frontend") },
			(*scenario).untilEnded,
		}, outcome{
			Rollouts: []rolloutOf{
				{"shop-api:1.1.0,shop-frontend:2.0.0", "Superseded", prev},
				{"shop-api:1.1.0,shop-frontend:2.1.0", "Succeeded", prev},
			},
			Runs: map[string]string{"c1": "shop-api 1.1.0, shop-frontend 2.1.0", "c2": "shop-api 1.1.0, shop-frontend 2.1.0"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scenario{opts: Options{Config: imageSetConfig}}
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
				got.Rollouts = append(got.Rollouts, rolloutOf{ro.Tag, string(ro.Phase), ro.PreviousVersions.Tag()})
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

// The members of a set are their own workloads: the api's and the
// frontend's versions in a cluster are each its own, the set's what they
// make up (as `flotilla describe rollout` names it, without digests).
// Catches a Version that answers a member with its set's lead.
func TestImageSetMemberVersions(t *testing.T) {
	s := &scenario{opts: Options{Config: imageSetConfig}}
	s.reset(t.Context())
	t.Cleanup(func() {
		if s.en != nil {
			_ = s.en.stop()
		}
	})
	if err := s.fleetRuns("1.0.0"); err != nil {
		t.Fatal(err)
	}
	if err := s.fleetRunsOf("2.0.0", "shop-frontend"); err != nil {
		t.Fatal(err)
	}
	if err := s.ensure(); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, app := range []string{"shop-api", "shop-frontend", "shop"} {
		got[app], _ = s.en.fleet.Version("c1", app)
	}
	want := map[string]string{"shop-api": "1.0.0", "shop-frontend": "2.0.0", "shop": "shop-api 1.0.0, shop-frontend 2.0.0"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("versions in c1 (-want +got):\n%s", d)
	}
}

// testdata/imagesets.feature against config/examples/release-set-images.yaml:
// the steps a user writes of a set of image members, and the report naming
// the set's rollout, its members and each member's version as `flotilla
// describe rollout` does. Catches a report without the versions, and a
// step that cannot name a member (the fleet runs, a member's run).
func TestImageSetFeature(t *testing.T) {
	var gout, report bytes.Buffer
	status, err := Run(t.Context(), Options{Config: imageSetConfig, Paths: []string{filepath.Join("testdata", "imagesets.feature")},
		Format: "progress", Output: &gout, Report: &report})
	if err != nil {
		t.Fatal(err)
	}
	if status != 0 {
		t.Fatalf("status %d:\n%s\n%s", status, gout.String(), report.String())
	}
	versions := regexp.MustCompile(`(?m)^rollout \S+ of shop shop-api:1\.1\.0,shop-frontend:2\.0\.0: Succeeded\nmembers: shop-api -> shop-frontend\n` +
		`versions: shop-api 1\.1\.0 \(sha256:[0-9a-f]{12}\), shop-frontend 2\.0\.0 \(sha256:[0-9a-f]{12}\)\n` +
		`previous: shop-api 1\.0\.0 \(sha256:[0-9a-f]{12}\), shop-frontend 2\.0\.0 \(sha256:[0-9a-f]{12}\)$`)
	if !versions.MatchString(report.String()) {
		t.Errorf("the report names no rollout of the set with its members' versions:\n%s", report.String())
	}
	if !strings.Contains(report.String(), "reason=shop-api: 2.0.0") {
		t.Errorf("the report's timeline says nothing of the skipped push's reason:\n%s", report.String())
	}
}
