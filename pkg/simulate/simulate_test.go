package simulate

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
)

func TestRunLastWaveFails(t *testing.T) {
	var out, report bytes.Buffer
	start := time.Now()
	status, err := Run(t.Context(), Options{
		Config: filepath.Join("..", "..", "config", "example.yaml"),
		Paths:  []string{filepath.Join("testdata", "lastwave.feature")},
		Format: "progress", Output: &out, Report: &report,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wall %s\n%s\n%s", time.Since(start), out.String(), report.String())
	// The second scenario fails: its step is unknown.
	if status != 1 {
		t.Fatalf("status %d, want 1 (the unknown step)", status)
	}
	for _, want := range []string{"rollback order: c2, c3, c1", `unknown step "the moon is full"`, "2 scenarios (1 passed, 1 failed)"} {
		if !strings.Contains(out.String()+report.String(), want) {
			t.Errorf("the output says nothing of %q", want)
		}
	}
}

// An unknown step fails naming it and the closest known steps. Catches a
// library that lets godog call it undefined (a pending step passes
// unless strict) or names no suggestion.
func TestUnknownStepSuggests(t *testing.T) {
	s := &scenario{}
	err := s.unknown(`"1.2.0" is pushd`)
	if err == nil || !strings.Contains(err.Error(), `unknown step "\"1.2.0\" is pushd"`) ||
		!strings.Contains(err.Error(), `When "1.2.0" is pushed`) {
		t.Errorf("unknown = %v", err)
	}
}

// The documented examples (docs/simulate/whatif.feature) pass against
// config/example.yaml: a freeze window, an approval, an unreachable
// cluster, a version that hangs.
func TestDocumentedExamples(t *testing.T) {
	var out bytes.Buffer
	status, err := Run(t.Context(), Options{
		Config: filepath.Join("..", "..", "config", "example.yaml"),
		Paths:  []string{filepath.Join("..", "..", "docs", "simulate", "whatif.feature")},
		Format: "progress", Output: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	if status != 0 {
		t.Fatalf("status %d:\n%s", status, out.String())
	}
}

// The simulation holds approvals to the API's rule (pkg/rollout's
// ApprovalRefused): automation ("default", server.apiToken), the pusher
// under separation of duties and those approvals.from does not name are
// refused, and an approval the API refuses fails its step. Catches an
// approval step that journals the approval whoever gives it (the first
// scenario's refusals would pass as approvals and the second would
// succeed).
func TestApproversArePeople(t *testing.T) {
	var out bytes.Buffer
	status, err := Run(t.Context(), Options{
		Config: filepath.Join("..", "..", "config", "example.yaml"),
		Paths:  []string{filepath.Join("testdata", "approvers.feature")},
		Format: "progress", Output: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 scenarios (1 passed, 1 failed)",
		"the API refuses default's approval of wave prod (403): default is automation and never counts as an approver"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output says nothing of %q:\n%s", want, out.String())
		}
	}
	if status != 1 {
		t.Errorf("status %d, want 1 (the refused approval)", status)
	}
}

// The same scenarios give the same report every run, wall time aside: the
// same events in the same order at the same virtual instants, the same
// rollback order and table, compared line by line, unsorted. Catches an
// idleness guessed from quiet and a simulated Flagger acting while the
// engine works (on a loaded machine a rollout ended 2h1m0s after the push
// instead of 2h0m40s: the canary's status read raced the Flagger's step).
// A dispatcher running keys and lanes in parallel under simulate (the runs
// of a wave's two clusters may end in either order, and so their results
// in the timeline) shows here only now and then (12 runs of each without
// app.Options.Sequential all agreed): pkg/dispatch's
// TestSequentialFollowsTheJournal catches it every run.
func TestReportIsTheSameEveryRun(t *testing.T) {
	const runs = 3
	tests := []struct {
		name  string
		paths []string
	}{
		{"the last wave fails", []string{filepath.Join("testdata", "lastwave.feature")}},
		{"the documented examples", []string{filepath.Join("..", "..", "docs", "simulate", "whatif.feature")}},
		{"a git application", []string{filepath.Join("testdata", "git.feature")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var first string
			for i := range runs {
				var out, report bytes.Buffer
				if _, err := Run(t.Context(), Options{
					Config: filepath.Join("..", "..", "config", "example.yaml"),
					Paths:  tc.paths, Format: "progress", Output: &out, Report: &report,
				}); err != nil {
					t.Fatal(err)
				}
				got := sameRun(report.String())
				if i == 0 {
					first = got
					continue
				}
				if diff := cmp.Diff(first, got); diff != "" {
					t.Fatalf("run %d differs from the first (-first +run):\n%s", i+1, diff)
				}
			}
		})
	}
}

// wallTime is the report's wall time, the one part that may differ.
var wallTime = regexp.MustCompile(`, wall [0-9.]+[a-zµ]+\)`)

// sameRun is a report as two runs of the same scenario must agree on: all
// of it but the wall time, in its order (the engine handles one event at a
// time in journal order under simulate: app.Options.Sequential).
func sameRun(report string) string {
	return wallTime.ReplaceAllString(report, ")")
}

// A git application runs in simulate: a commit pushed to its branch, or a
// tag its pattern matches, verified against the simulated repository,
// applied at once, and judged by the simulated Flagger like an image
// (testdata/git.feature, against config/example.yaml's frontend). Catches
// a simulation that refuses git applications, a fleet model with one
// workload per cluster (frontend's commit would show as podinfo's
// version), and a simulated repository that confirms no push (verify
// would reject it and no rollout start).
func TestGitApplication(t *testing.T) {
	var out, report bytes.Buffer
	status, err := Run(t.Context(), Options{
		Config: filepath.Join("..", "..", "config", "example.yaml"),
		Paths:  []string{filepath.Join("testdata", "git.feature")},
		Format: "progress", Output: &out, Report: &report,
	})
	if err != nil {
		t.Fatal(err)
	}
	if status != 0 {
		t.Fatalf("status %d:\n%s\n%s", status, out.String(), report.String())
	}
}

// No poll reaches the world: an application's own poll (here every second,
// podinfo's registry and frontend's git host both at a loopback address)
// is off in simulate as the fleet's is. A listener at that address counts
// the connections while a scenario runs and then while an engine idles
// for longer than the poll's interval. Catches a simulation that turns
// off fleet.poll only (the application's poll would list the tags at
// once, within the interval's jitter, and every second after).
func TestNoPollReachesTheWorld(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		var held []net.Conn
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			held = append(held, c) // never answered: a registry that hangs
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
	})
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	for _, a := range list(doc, "applications") {
		a["poll"] = map[string]any{"interval": "1s"}
		if _, ok := a["image"]; ok {
			a["image"] = addr + "/demo/podinfo"
		}
		if src, ok := a["source"].(map[string]any); ok {
			if g, ok := src["git"].(map[string]any); ok {
				g["url"] = "https://" + addr + "/platform/deployments.git"
			}
		}
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "flotilla.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	var gout bytes.Buffer
	status, err := Run(t.Context(), Options{
		Config: path, Paths: []string{filepath.Join("testdata", "git.feature")}, Format: "progress", Output: &gout,
	})
	if err != nil || status != 0 {
		t.Fatalf("simulate: status %d, %v:\n%s", status, err, gout.String())
	}
	// An engine left running for longer than the interval.
	cfg, _, err := loadConfig(path, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := dispatch.NewManualClock(DefaultStart)
	edir := filepath.Join(dir, "engine")
	if err := os.MkdirAll(edir, 0o700); err != nil {
		t.Fatal(err)
	}
	en, err := startEngine(t.Context(), cfg, edir, clock, newFleet(cfg, clock))
	if err != nil {
		t.Fatal(err)
	}
	if err := en.settle(t.Context()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := en.stop(); err != nil {
		t.Fatal(err)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the simulation made %d connections to the registry and git host at %s", n, addr)
	}
}

// The timeline shows a deadline only while it can still decide its step
// (issue #36's report): a cluster Flagger promoted at +30s has its
// deadline timer fire at +10m all the same, which observe drops. Catches
// the stale "deadline passed" line under a succeeded cluster (the report
// read as if c1 had timed out) and a report that drops every deadline
// (the hanging c2's, which failed the rollout, would be gone).
func TestReportLeavesOutDecidedDeadlines(t *testing.T) {
	var out, report bytes.Buffer
	if _, err := Run(t.Context(), Options{
		Config: filepath.Join("..", "..", "config", "example.yaml"),
		Paths:  []string{filepath.Join("testdata", "lastwave.feature"), filepath.Join("..", "..", "docs", "simulate", "whatif.feature")},
		Format: "progress", Output: &out, Report: &report,
	}); err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	for _, sec := range strings.Split(report.String(), "\n== ")[1:] {
		name, _, _ := strings.Cut(sec, " (")
		sections[name] = sec
	}
	deadlines := regexp.MustCompile(`(?m)deadline passed.*$`)
	for _, tc := range []struct {
		scenario string
		want     []string
	}{
		{"1.2.0 fails in prod after canary's two-hour bake and is rolled back", nil},
		{"a freeze window over the weekend holds prod until Monday", nil},
		// c2's deadline and the three extensions observe gives a canary
		// still Progressing; c1's (+10m) and c3's (+10m30s) come after
		// their verdicts.
		{"a version that hangs in prod fails at its deadline", slices.Repeat([]string{"deadline passed wave=prod cluster=c2"}, 4)},
	} {
		sec, ok := sections[tc.scenario]
		if !ok {
			t.Fatalf("no report of %q:\n%s", tc.scenario, report.String())
		}
		got := deadlines.FindAllString(sec, -1)
		for i := range got {
			got[i] = strings.Join(strings.Fields(got[i]), " ")
		}
		want := make([]string, len(tc.want))
		for i := range tc.want {
			want[i] = strings.Join(strings.Fields(tc.want[i]), " ")
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: deadline lines (-want +got):\n%s\n%s", tc.scenario, diff, sec)
		}
	}
}

// decided.stale, event by event: a deadline is left out once its step
// had a verdict or its rollout ended, and kept before.
func TestStaleDeadlines(t *testing.T) {
	ev := func(typ string, payload any) cloudevents.Event {
		t.Helper()
		e, err := newEvent(typ+"/x", typ, payload)
		if err != nil {
			t.Fatal(err)
		}
		e.SetExtension(events.ExtRolloutID, "r1")
		return e
	}
	deadline := func(cluster, purpose string) cloudevents.Event {
		return ev(events.TypeClusterDeadline, events.ClusterDeadline{RolloutID: "r1", Cluster: cluster, Purpose: purpose})
	}
	result := func(typ, cluster string) cloudevents.Event {
		return ev(typ, events.ClusterResult{RolloutID: "r1", Cluster: cluster})
	}
	tests := []struct {
		name   string
		before []cloudevents.Event
		e      cloudevents.Event
		want   bool
	}{
		{"an undecided apply", nil, deadline("c1", events.PurposeApply), false},
		{"after the cluster succeeded", []cloudevents.Event{result(events.TypeClusterSucceeded, "c1")}, deadline("c1", events.PurposeApply), true},
		{"another cluster succeeded", []cloudevents.Event{result(events.TypeClusterSucceeded, "c2")}, deadline("c1", events.PurposeApply), false},
		{"after the cluster failed", []cloudevents.Event{result(events.TypeClusterFailed, "c1")}, deadline("c1", events.PurposeApply), true},
		{"a revert after the apply succeeded", []cloudevents.Event{result(events.TypeClusterSucceeded, "c1")}, deadline("c1", events.PurposeRevert), false},
		{"a revert after it was rolled back", []cloudevents.Event{result(events.TypeClusterReverted, "c1")}, deadline("c1", events.PurposeRevert), true},
		{"an apply after the rollout failed", []cloudevents.Event{ev(events.TypeRolloutFailed, events.RolloutResult{RolloutID: "r1"})}, deadline("c1", events.PurposeApply), true},
		{"a revert after the rollout failed", []cloudevents.Event{ev(events.TypeRolloutFailed, events.RolloutResult{RolloutID: "r1"})}, deadline("c1", events.PurposeRevert), false},
		{"a revert after the rollout rolled back", []cloudevents.Event{ev(events.TypeRolloutRolledBack, events.RolloutResult{RolloutID: "r1"})}, deadline("c1", events.PurposeRevert), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := decided{}
			for _, e := range tc.before {
				if d.stale(e) {
					t.Fatalf("%s reads as a stale deadline", e.Type())
				}
			}
			if got := d.stale(tc.e); got != tc.want {
				t.Errorf("stale = %t, want %t", got, tc.want)
			}
		})
	}
}

// Signature policies are simulated, not refused: the verify function runs
// as configured and pkg/signature reads real signatures (made with the
// stand-ins of the policy's keys, testdata/signatures.feature) in a
// registry in process. Catches a simulation that refuses
// verify.signatures, one that fakes the verifier's decision (a version
// signed by another key or unsigned would roll out), one that signs
// nothing (the signed version would be refused), and a report that does
// not say why a push was refused.
func TestSignatures(t *testing.T) {
	var out, report bytes.Buffer
	status, err := Run(t.Context(), Options{
		Config: filepath.Join("..", "..", "config", "example.yaml"),
		Paths:  []string{filepath.Join("testdata", "signatures.feature")},
		Format: "progress", Output: &out, Report: &report,
	})
	if err != nil {
		t.Fatal(err)
	}
	if status != 0 {
		t.Fatalf("status %d:\n%s\n%s", status, out.String(), report.String())
	}
	for _, want := range []string{"push rejected", "reason=signature not trusted"} {
		if !strings.Contains(report.String(), want) {
			t.Errorf("the report says nothing of %q:\n%s", want, report.String())
		}
	}
}

// What simulate cannot play is refused at the push, naming the field: an
// application delivering by pull request (gitops.mode pullRequest) and a
// keyless signature authority. Catches a simulation that accepts the field
// and ignores it (the rollout would go on as in commit mode, or verify
// with no identity).
func TestRefusalsNameTheField(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(podinfo map[string]any)
		want string
	}{
		{"pull request mode", func(a map[string]any) {
			a["gitops"] = map[string]any{"url": "https://git.example.com/platform/deployments.git", "branch": "main",
				"paths": []any{"clusters/{cluster}/podinfo/kustomization.yaml"}, "edit": "kustomize", "token": map[string]any{"env": "SIM_TEST_TOKEN"},
				"mode": "pullRequest", "pullRequest": map[string]any{"host": "gitea"}}
		}, `gitops.mode pullRequest is not simulated`},
		{"a keyless authority", func(a map[string]any) {
			a["verify"] = map[string]any{"signatures": []any{map[string]any{"name": "ci", "keyless": map[string]any{
				"issuer": "https://token.actions.githubusercontent.com", "subject": "https://github.com/acme/.*",
				"trustedRoot": map[string]any{"file": "/nonexistent/trusted_root.json"}}}}}
		}, `verify.signatures[0].keyless (ci of podinfo)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var doc map[string]any
			if err := yaml.Unmarshal(data, &doc); err != nil {
				t.Fatal(err)
			}
			for _, a := range list(doc, "applications") {
				if a["name"] == "podinfo" {
					tc.edit(a)
				}
			}
			out, err := yaml.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "flotilla.yaml")
			if err := os.WriteFile(path, out, 0o600); err != nil {
				t.Fatal(err)
			}
			var gout bytes.Buffer
			status, err := Run(t.Context(), Options{Config: path, Paths: []string{filepath.Join("testdata", "lastwave.feature")}, Format: "progress", Output: &gout})
			if err == nil && status == 0 {
				t.Fatalf("simulate passed:\n%s", gout.String())
			}
			if got := fmt.Sprint(err) + gout.String(); !strings.Contains(got, tc.want) {
				t.Errorf("simulate says nothing of %q:\n%s", tc.want, got)
			}
		})
	}
}

// A release set is simulated as one application through the waves
// (testdata/sets.feature): the set "web" of frontend-api and frontend
// (config/example.yaml's frontend and a copy it depends on), pushed by its
// name or a member's, its members running what it runs, held by the
// waves' bake, approvals and freeze windows, rolled back as one; the
// report names the set's rollout and its members in order. Catches a set
// refused at its push, a member's push rolled out as the member's own
// rollout, and a report without the members.
func TestReleaseSet(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var api map[string]any
	for _, a := range list(doc, "applications") {
		if a["name"] == "frontend" {
			b, _ := yaml.Marshal(a)
			if err := yaml.Unmarshal(b, &api); err != nil {
				t.Fatal(err)
			}
			a["dependsOn"] = []any{map[string]any{"name": "frontend-api"}}
		}
	}
	api["name"], api["workload"] = "frontend-api", map[string]any{"name": "frontend-api"}
	doc["applications"] = append(doc["applications"].([]any), api)
	doc["releaseSets"] = []any{map[string]any{"name": "web", "applications": []any{"frontend", "frontend-api"}}}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "flotilla.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	var gout, report bytes.Buffer
	status, err := Run(t.Context(), Options{Config: path, Paths: []string{filepath.Join("testdata", "sets.feature")}, Format: "progress", Output: &gout, Report: &report})
	if err != nil {
		t.Fatal(err)
	}
	if status != 0 {
		t.Fatalf("status %d:\n%s\n%s", status, gout.String(), report.String())
	}
	// Each scenario's: the set's rollout, then its members.
	if n := len(regexp.MustCompile(`(?m)^rollout \S+ of web .*\nmembers: frontend-api -> frontend$`).FindAllString(report.String(), -1)); n != 3 {
		t.Errorf("the report names the set's rollout and its members %d times, want 3:\n%s", n, report.String())
	}
}
