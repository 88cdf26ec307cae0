package simulate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/identity"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Step is one step of the library: its pattern and an example of it.
type Step struct {
	Pattern string
	Example string
	fn      any
}

// Steps is the step library, in the order the help lists it.
func Steps() []Step { return (&scenario{}).steps() }

func (s *scenario) steps() []Step {
	return []Step{
		// Given: the world before the push. Steps that change the config
		// come before the first When.
		{`^it is "([^"]+)"$`, `Given it is "2026-12-04T16:00:00Z"`, s.itIs},
		{`^the fleet runs "([^"]+)"$`, `Given the fleet runs "1.1.0"`, s.fleetRuns},
		{`^the fleet runs "([^"]+)" of "([^"]+)"$`, `Given the fleet runs "2.0.0" of "shop-frontend"`, s.fleetRunsOf},
		{`^cluster "([^"]+)" is labelled "([^"=]+)=([^"]*)"$`, `Given cluster "c3" is labelled "env=prod"`, s.labelled},
		{`^wave "([^"]+)" bakes for (\S+)$`, `Given wave "canary" bakes for 2h`, s.bakes},
		{`^wave "([^"]+)" needs (\d+) approvals?$`, `Given wave "prod" needs 1 approval`, s.approvals},
		{`^wave "([^"]+)" needs (\d+) approvals? from "([^"]+)"( with separation of duties)?$`,
			`Given wave "prod" needs 2 approvals from "group:release-managers" with separation of duties`, s.approvalsFrom},
		{`^"([^"]+)" is in group "([^"]+)"$`, `Given "alice" is in group "release-managers"`, s.inGroup},
		{`^a freeze window "([^"]+)" on schedule "([^"]+)" for (\S+)$`, `Given a freeze window "friday" on schedule "0 17 * * 5" for 64h`, s.freezeAll},
		{`^a freeze window "([^"]+)" on schedule "([^"]+)" for (\S+) in wave "([^"]+)"$`, `Given a freeze window "night" on schedule "0 22 * * *" for 10h in wave "prod"`, s.freezeWave},
		{`^the canary analysis takes (\S+)$`, `Given the canary analysis takes 10m`, s.analysisTakes},
		{`^"([^"]+)" (fails|hangs|succeeds) in cluster "([^"]+)"$`, `Given "1.2.0" fails in cluster "c3"`, s.outcomeCluster},
		{`^"([^"]+)" (fails|hangs|succeeds) in wave "([^"]+)"$`, `Given "1.2.0" fails in wave "prod"`, s.outcomeWave},
		{`^"([^"]+)" (fails|hangs|succeeds) everywhere$`, `Given "1.2.0" hangs everywhere`, s.outcomeAll},
		{`^cluster "([^"]+)" is unreachable$`, `Given cluster "c2" is unreachable`, s.unreachable},
		{`^application "([^"]+)" verifies signatures by "([^"]+)"( ignoring the transparency log)?$`,
			`Given application "podinfo" verifies signatures by "release"`, s.verifiesSignatures},
		{`^"([^"]+)" is signed by "([^"]+)"$`, `Given "1.2.0" is signed by "release"`, s.signedBy},
		{`^"([^"]+)" is signed by another key$`, `Given "1.2.0" is signed by another key`, s.signedByOther},
		{`^"([^"]+)" is unsigned$`, `Given "1.2.0" is unsigned`, s.unsigned},
		// When: what happens.
		{`^"([^"]+)" is pushed$`, `When "1.2.0" is pushed`, s.pushed},
		{`^"([^"]+)" of "([^"]+)" is pushed$`, `When "1.2.0" of "podinfo" is pushed`, s.pushedApp},
		{`^"([^"]+)" is pushed by "([^"]+)"$`, `When "1.2.0" is pushed by "alice"`, s.pushedBy},
		{`^(\S+) pass(?:es)?$`, `When 2h passes`, s.passes},
		{`^the rollout runs until it ends$`, `When the rollout runs until it ends`, s.untilEnded},
		{`^"([^"]+)" approves wave "([^"]+)"$`, `When "alice" approves wave "prod"`, s.approves},
		{`^"([^"]+)" approves wave "([^"]+)" and is refused: "([^"]*)"$`,
			`When "robot" approves wave "prod" and is refused: "robot is automation and never counts as an approver"`, s.approvalRefused},
		{`^"([^"]+)" (pauses|resumes|aborts|rolls back) the rollout$`, `When "alice" pauses the rollout`, s.control},
		// Then: what the fleet and the rollout show.
		{`^cluster "([^"]+)" runs "([^"]+)"$`, `Then cluster "c1" runs "1.1.0"`, s.clusterRuns},
		{`^cluster "([^"]+)" runs "([^"]+)" of "([^"]+)"$`, `Then cluster "c1" runs "1.1.0" of "podinfo"`, s.clusterRunsOf},
		{`^every cluster runs "([^"]+)"$`, `Then every cluster runs "1.1.0"`, s.everyClusterRuns},
		{`^the clusters run:$`, "Then the clusters run:\n  | cluster | version |\n  | c1      | 1.1.0   |", s.clustersRun},
		{`^the rollout is (\w+)$`, `Then the rollout is RolledBack`, s.rolloutIs},
		{`^the push of "([^"]+)" is rejected: "([^"]*)"$`, `Then the push of "1.2.0" is rejected: "signature not trusted"`, s.pushRejected},
		{`^the push of "([^"]+)" is skipped: "([^"]*)"$`, `Then the push of "2.0.0" is skipped: "shop-api: 2.0.0 is outside"`, s.pushSkipped},
		{`^the rollout waits for "([^"]+)"$`, `Then the rollout waits for "approval"`, s.waitsFor},
		{`^the clusters were rolled back in the order "([^"]*)"$`, `Then the clusters were rolled back in the order "c3, c2, c1"`, s.rollbackOrder},
		{`^nothing was rolled back$`, `Then nothing was rolled back`, s.nothingRolledBack},
		{`^approval of wave "([^"]+)" was asked of "([^"]+)"$`, `Then approval of wave "prod" was asked of "group:release-managers"`, s.askedOf},
		{`^wave "([^"]+)" started (\S+) after the push$`, `Then wave "prod" started 2h after the push`, s.waveStartedAfter},
		{`^the rollout ended (\S+) after the push$`, `Then the rollout ended 2h20m after the push`, s.endedAfter},
		{`^the rollout ended within (\S+) of the push$`, `Then the rollout ended within 3h of the push`, s.endedWithin},
	}
}

// register adds the library to a godog scenario, and last a step that
// matches every other text and fails naming the closest known steps.
func (s *scenario) register(sc *godog.ScenarioContext) {
	for _, st := range s.steps() {
		sc.Step(st.Pattern, st.fn)
	}
	sc.Step(`^(.*)$`, s.unknown)
}

func (s *scenario) unknown(text string) error {
	return fmt.Errorf("unknown step %q; the closest known steps:\n  %s\n(flotilla simulate --help lists them all)",
		text, strings.Join(closest(text, s.steps(), 3), "\n  "))
}

// closest are the examples of the n steps nearest text (edit distance of
// the step without its keyword).
func closest(text string, steps []Step, n int) []string {
	type scored struct {
		ex string
		d  int
	}
	var all []scored
	for _, st := range steps {
		ex := st.Example
		body := ex
		if _, rest, ok := strings.Cut(ex, " "); ok {
			body = rest
		}
		body, _, _ = strings.Cut(body, "\n")
		all = append(all, scored{strings.SplitN(ex, "\n", 2)[0], distance(strings.ToLower(text), strings.ToLower(body))})
	}
	slices.SortStableFunc(all, func(a, b scored) int { return a.d - b.d })
	out := make([]string, 0, n)
	for _, x := range all[:min(n, len(all))] {
		out = append(out, x.ex)
	}
	return out
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// Given

func (s *scenario) beforeStart(step string) error {
	if s.en != nil {
		return fmt.Errorf("%s: the config is fixed once the simulation started: put this Given before the first When", step)
	}
	return nil
}

func (s *scenario) itIs(at string) error {
	if err := s.beforeStart("it is"); err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return fmt.Errorf("it is %q: want an RFC 3339 time, such as 2026-12-04T16:00:00Z", at)
	}
	s.startAt = t
	return nil
}

func (s *scenario) fleetRuns(version string) error {
	if err := s.beforeStart("the fleet runs"); err != nil {
		return err
	}
	s.initial = version
	return nil
}

// fleetRunsOf has application app (a member of a release set) run
// version before the push, whatever the fleet runs says of the others.
func (s *scenario) fleetRunsOf(version, app string) error {
	if err := s.beforeStart("the fleet runs"); err != nil {
		return err
	}
	if s.initialOf == nil {
		s.initialOf = map[string]string{}
	}
	s.initialOf[app] = version
	return nil
}

// initialVersion is what application app runs before the push ("" when
// the scenario did not say).
func (s *scenario) initialVersion(app string) string {
	if v, ok := s.initialOf[app]; ok {
		return v
	}
	return s.initial
}

func (s *scenario) labelled(cluster, key, value string) error {
	if err := s.beforeStart("labelled"); err != nil {
		return err
	}
	s.edits = append(s.edits, func(doc map[string]any) error {
		for _, c := range list(doc, "fleet", "clusters") {
			if c["name"] == cluster {
				labels, _ := c["labels"].(map[string]any)
				if labels == nil {
					labels = map[string]any{}
					c["labels"] = labels
				}
				labels[key] = value
				return nil
			}
		}
		return fmt.Errorf("no cluster %q in the config", cluster)
	})
	return nil
}

// waveEdit changes wave name of the config.
func (s *scenario) waveEdit(wave string, fn func(w map[string]any)) error {
	if err := s.beforeStart("wave " + wave); err != nil {
		return err
	}
	s.edits = append(s.edits, func(doc map[string]any) error {
		var names []string
		for i, w := range list(doc, "fleet", "waves") {
			name, _ := w["name"].(string)
			if name == "" {
				name = fmt.Sprintf("wave-%d", i+1)
			}
			if name == wave {
				fn(w)
				return nil
			}
			names = append(names, name)
		}
		return fmt.Errorf("no wave %q in the config (waves: %s)", wave, strings.Join(names, ", "))
	})
	return nil
}

func (s *scenario) bakes(wave, d string) error {
	if _, err := time.ParseDuration(d); err != nil {
		return fmt.Errorf("bakes for %q: %w", d, err)
	}
	return s.waveEdit(wave, func(w map[string]any) { delete(w, "requiredSoakTime"); w["bakeTime"] = d })
}

func (s *scenario) approvals(wave string, n int) error {
	return s.waveEdit(wave, func(w map[string]any) { w["approvals"] = n })
}

func (s *scenario) approvalsFrom(wave string, n int, from, sod string) error {
	return s.waveEdit(wave, func(w map[string]any) {
		w["approvals"] = map[string]any{"required": n, "from": strings.Split(from, ","), "separationOfDuties": sod != ""}
	})
}

// inGroup gives a person a group, as the OpenID provider's groups claim
// or server.apiTokens[].groups would: the approvals' from names groups.
func (s *scenario) inGroup(person, group string) error {
	if s.groups == nil {
		s.groups = map[string][]string{}
	}
	s.groups[person] = append(s.groups[person], group)
	return nil
}

func (s *scenario) freezeAll(name, schedule, d string) error {
	if err := s.beforeStart("a freeze window"); err != nil {
		return err
	}
	s.edits = append(s.edits, func(doc map[string]any) error {
		fleet := doc["fleet"].(map[string]any)
		ws, _ := fleet["freezeWindows"].([]any)
		fleet["freezeWindows"] = append(ws, map[string]any{"name": name, "schedule": schedule, "duration": d})
		return nil
	})
	return nil
}

func (s *scenario) freezeWave(name, schedule, d, wave string) error {
	return s.waveEdit(wave, func(w map[string]any) {
		ws, _ := w["freezeWindows"].([]any)
		w["freezeWindows"] = append(ws, map[string]any{"name": name, "schedule": schedule, "duration": d})
	})
}

func (s *scenario) analysisTakes(d string) error {
	v, err := time.ParseDuration(d)
	if err != nil || v <= 0 {
		return fmt.Errorf("the canary analysis takes %q: want a positive duration", d)
	}
	s.analysis = v
	return nil
}

func (s *scenario) outcome(version, outcome, key string) error {
	s.outcomes[version+"/"+key] = Outcome(outcome)
	return nil
}

func (s *scenario) outcomeCluster(version, outcome, cluster string) error {
	return s.outcome(version, outcome, cluster)
}

func (s *scenario) outcomeWave(version, outcome, wave string) error {
	return s.outcome(version, outcome, "wave:"+wave)
}

func (s *scenario) outcomeAll(version, outcome string) error { return s.outcome(version, outcome, "*") }

func (s *scenario) unreachable(cluster string) error {
	s.unreachableSet = append(s.unreachableSet, cluster)
	if s.en != nil {
		return s.applyUnreachable()
	}
	return nil
}

// verifiesSignatures gives application app a key authority named name
// in verify.signatures (what-if the policy were there): its key, as every
// key authority's, is the simulation's stand-in (signatures.go); with
// ignoring, verify.ignoreTlog.
func (s *scenario) verifiesSignatures(app, name, ignoring string) error {
	if err := s.beforeStart("verifies signatures"); err != nil {
		return err
	}
	s.edits = append(s.edits, func(doc map[string]any) error {
		for _, a := range list(doc, "applications") {
			if a["name"] != app {
				continue
			}
			v, _ := a["verify"].(map[string]any)
			if v == nil {
				v = map[string]any{}
				a["verify"] = v
			}
			sigs, _ := v["signatures"].([]any)
			v["signatures"] = append(sigs, map[string]any{"name": name, "key": map[string]any{"env": "FLOTILLA_SIMULATED_KEY"}})
			if ignoring != "" {
				v["ignoreTlog"] = true
			}
			return nil
		}
		return fmt.Errorf("no application %q in the config", app)
	})
	return nil
}

// signedBy, signedByOther and unsigned say how a version's push is
// signed (signatures.go): by a key authority of the application's
// verify.signatures (its stand-in key), by a key no policy names, or not
// at all. A version the scenario says nothing of is signed by the first
// key authority, as a release pipeline signs what it pushes.
func (s *scenario) signedBy(version, authority string) error {
	s.signing[version] = authority
	return nil
}

func (s *scenario) signedByOther(version string) error {
	s.signing[version] = signedByOther
	return nil
}

func (s *scenario) unsigned(version string) error {
	s.signing[version] = unsigned
	return nil
}

// When

func (s *scenario) pushed(tag string) error {
	if err := s.ensure(); err != nil {
		return err
	}
	return s.pushedApp(tag, s.cfg.Applications[0].Name)
}

// pushedBy pushes tag of the first application as the registry's webhook
// naming pusher does: the rollout's pushedBy, whom separation of duties
// refuses as an approver.
func (s *scenario) pushedBy(tag, pusher string) error {
	if err := s.ensure(); err != nil {
		return err
	}
	return s.push(tag, s.cfg.Applications[0].Name, pusher)
}

func (s *scenario) pushedApp(tag, name string) error { return s.push(tag, name, "simulate") }

// push sends what the registry's webhook sends for a push of tag of
// application name, or, for a git application, the git host's: a commit
// the scenario names tag pushed to the application's branch, or the git
// tag tag when the application's tags pattern matches it.
func (s *scenario) push(tag, name, pusher string) error {
	if err := s.ensure(); err != nil {
		return err
	}
	a, ok := s.cfg.Application(name)
	if !ok {
		return fmt.Errorf("no application %q in the config", name)
	}
	if g := a.GitOps; g != nil && g.Mode == config.GitOpsModePullRequest {
		return fmt.Errorf("application %q: gitops.mode %s is not simulated: the proposer pushes each wave's branch to the deployments repository and reads it back after the merge, whose files simulate does not have; simulate a copy of the config in gitops.mode %s",
			name, config.GitOpsModePullRequest, config.GitOpsModeCommit)
	}
	setApp := a
	if set, ok := s.cfg.Application(a.MemberOf); ok {
		setApp = set
	}
	if lead, ok := imageLed(setApp); ok {
		return fmt.Errorf("release set %q of git and image members led by its image member %s is not simulated yet (its fleet model applies the set's run as a git member leads it)", setApp.Name, lead)
	}
	if set, ok := s.cfg.Application(a.MemberOf); ok {
		// A member's push is its set's (as verify matches it): the set
		// rolls out as one application, its members with it. An image
		// member (of a set of image members, or of git and image members)
		// pushes its own image, which moves that member; a git member's
		// push is a commit to the set's branch, which moves every git
		// member.
		name = set.Name
		if a.Git() != nil || !rollout.TupleSet(set) {
			a = set
		}
	} else if rollout.ImageSet(a) {
		return fmt.Errorf("release set %q of image members has no image of its own: push one of its members' (%s)", name, strings.Join(a.Set.Names(), ", "))
	}
	if ts := s.cfg.KubeCDTriggered(a.Image); a.Image != "" && len(ts) > 0 {
		return fmt.Errorf("image %s of application %q: the image triggers of KubeCD release %q (the config's kubecd) are not simulated: they check the deployments repository out and commit to it, and simulate does not have its files",
			a.Image, name, ts[0].Name)
	}
	if s.signers != nil && a.Verify != nil && len(a.Verify.Signatures) > 0 && a.Image != "" {
		if err := s.signers.sign(s.ctx, name, a.Image, tag, s.signing[tag]); err != nil {
			return err
		}
	}
	s.app = name
	s.pushes++
	id := fmt.Sprintf("simulate/push/%d/%s", s.pushes, tag)
	var e cloudevents.Event
	var err error
	if g := a.Git(); g != nil {
		e, err = newEvent(id, events.TypeGitPushed, s.gitPush(g, tag, pusher))
	} else {
		host, repo, _ := strings.Cut(a.Image, "/")
		if _, err := s.en.fleet.Resolve(s.ctx, a.Image, tag); err != nil {
			return err
		}
		e, err = newEvent(id, events.TypeImagePushed, events.ImagePushed{
			Registry: host, Repository: repo, Tag: tag, Digest: Digest(a.Image, tag), Sender: "simulate", Receiver: "simulate",
			Pusher: pusher,
		})
	}
	if err != nil {
		return err
	}
	if s.pushedAt.IsZero() {
		s.pushedAt = s.en.clock.Now()
	}
	return s.en.journal(s.ctx, e)
}

// gitPush is the git host's push of the commit the scenario names name
// (Commit) to git source g's branch, or of the git tag name when g's tags
// pattern matches it; before is what the fleet runs, when the scenario
// said.
func (s *scenario) gitPush(g *config.GitSource, name, pusher string) events.GitPushed {
	f := s.en.fleet
	f.mu.Lock()
	after := Commit(g.URL, name)
	f.versions[after] = name
	before := ""
	if s.initial != "" {
		before = Commit(g.URL, s.initial)
	}
	f.mu.Unlock()
	p := events.GitPushed{RepoURL: config.DisplayURL(g.URL), Ref: "refs/heads/" + g.Branch, Branch: g.Branch, Before: before, After: after,
		Pusher: pusher, Sender: "simulate", Receiver: "simulate"}
	if g.Tags != "" && g.TagMatches(name) {
		p.Ref, p.Branch, p.Tag = "refs/tags/"+name, "", name
	}
	return p
}

func (s *scenario) passes(d string) error {
	v, err := time.ParseDuration(d)
	if err != nil || v < 0 {
		return fmt.Errorf("%q passes: want a duration such as 90m or 2h", d)
	}
	if err := s.ensure(); err != nil {
		return err
	}
	return s.en.advance(s.ctx, s.en.clock.Now().Add(v), nil)
}

func (s *scenario) untilEnded() error {
	if err := s.ensure(); err != nil {
		return err
	}
	return s.en.runUntilEnded(s.ctx)
}

func (s *scenario) waveIndex(ro rollout.Rollout, wave string) (int, error) {
	var names []string
	for i, w := range ro.Waves {
		if w.Name == wave {
			return i, nil
		}
		names = append(names, w.Name)
	}
	return 0, fmt.Errorf("rollout %s has no wave %q (waves: %s)", ro.ID, wave, strings.Join(names, ", "))
}

// principal is who person is to the API: a token of server.apiTokens by
// that name (its groups, automation) or a person logged in, with the
// groups the scenario gave them; "default" is automation when
// server.apiToken is set.
func (s *scenario) principal(person string) identity.Principal {
	p := identity.Principal{Subject: person, Name: person, Groups: slices.Clone(s.groups[person]), Via: identity.ViaSession}
	for _, t := range s.cfg.Server.APITokens {
		if t.Name == person {
			p.Token, p.Via, p.Groups = person, identity.ViaToken, append(p.Groups, t.Groups...)
		}
	}
	if slices.Contains(s.cfg.Server.AutomationTokens(), person) {
		p.Token, p.Via, p.Automation = person, identity.ViaToken, true
	}
	return p
}

// approval is person's approval of wave of the latest rollout: its
// rollout and wave index, and why the API would refuse it (pkg/rollout's
// ApprovalRefused, the rule the API holds approvals to), "" if it would
// not.
func (s *scenario) approval(person, wave string) (rollout.Rollout, int, string, error) {
	if err := s.ensure(); err != nil {
		return rollout.Rollout{}, 0, "", err
	}
	ro, err := s.en.latest(s.ctx)
	if err != nil {
		return ro, 0, "", err
	}
	i, err := s.waveIndex(ro, wave)
	if err != nil {
		return ro, 0, "", err
	}
	return ro, i, ro.ApprovalRefused(i, s.principal(person)), nil
}

// approves journals person's approval of wave as the API journals one it
// accepts; one the API would refuse fails the step, saying why.
func (s *scenario) approves(person, wave string) error {
	ro, i, why, err := s.approval(person, wave)
	if err != nil {
		return err
	}
	if why != "" {
		return fmt.Errorf("the API refuses %s's approval of wave %s (403): %s", person, wave, why)
	}
	e, err := newEvent(fmt.Sprintf("simulate/approval/%s/%d/%s", ro.ID, i, person), events.TypeWaveApprovalRequested,
		events.WaveApproval{RolloutID: ro.ID, Wave: i, Approver: person, User: person})
	if err != nil {
		return err
	}
	e.SetExtension(events.ExtRolloutID, ro.ID)
	return s.en.journal(s.ctx, e)
}

// approvalRefused checks that the API refuses person's approval of wave,
// saying want; nothing is journaled, as the API journals nothing of it but
// its audit record.
func (s *scenario) approvalRefused(person, wave, want string) error {
	_, _, why, err := s.approval(person, wave)
	switch {
	case err != nil:
		return err
	case why == "":
		return fmt.Errorf("the API accepts %s's approval of wave %s, want it refused: %s", person, wave, want)
	case why != want:
		return fmt.Errorf("the API refuses %s's approval of wave %s saying %q, want %q", person, wave, why, want)
	}
	return nil
}

func (s *scenario) control(person, verb string) error {
	if err := s.ensure(); err != nil {
		return err
	}
	ro, err := s.en.latest(s.ctx)
	if err != nil {
		return err
	}
	typ := map[string]string{
		"pauses": events.TypeRolloutPauseRequested, "resumes": events.TypeRolloutResumeRequested,
		"aborts": events.TypeRolloutAbortRequested, "rolls back": events.TypeRolloutRollbackRequested,
	}[verb]
	s.controls++
	e, err := newEvent(fmt.Sprintf("simulate/control/%d", s.controls), typ, events.Control{RolloutID: ro.ID, User: person})
	if err != nil {
		return err
	}
	e.SetExtension(events.ExtRolloutID, ro.ID)
	return s.en.journal(s.ctx, e)
}

// Then: what the clusters run is what the scenario's application runs
// there (application).

// application is the scenario's application: the last one pushed, else
// the config's first.
func (s *scenario) application() string {
	if s.app != "" {
		return s.app
	}
	return s.cfg.Applications[0].Name
}

func (s *scenario) clusterRuns(cluster, version string) error {
	if err := s.ensure(); err != nil {
		return err
	}
	got, ok := s.en.fleet.Version(cluster, s.application())
	if !ok {
		return fmt.Errorf("no cluster %q in the fleet", cluster)
	}
	if got != version {
		return fmt.Errorf("cluster %s runs %s, not %s", cluster, got, version)
	}
	return nil
}

// clusterRunsOf checks what application app runs in cluster, whichever
// the scenario pushed.
func (s *scenario) clusterRunsOf(cluster, version, app string) error {
	if err := s.ensure(); err != nil {
		return err
	}
	got, ok := s.en.fleet.Version(cluster, app)
	switch {
	case !ok:
		return fmt.Errorf("no cluster %q or application %q in the config", cluster, app)
	case got != version:
		return fmt.Errorf("cluster %s runs %s of %s, not %s", cluster, got, app, version)
	}
	return nil
}

func (s *scenario) everyClusterRuns(version string) error {
	if err := s.ensure(); err != nil {
		return err
	}
	a, _ := s.cfg.Application(s.application())
	var errs []error
	for _, c := range s.cfg.Fleet.Clusters {
		if a.Targets(c) {
			errs = append(errs, s.clusterRuns(c.Name, version))
		}
	}
	return errors.Join(errs...)
}

func (s *scenario) clustersRun(t *godog.Table) error {
	if err := s.ensure(); err != nil {
		return err
	}
	var errs []error
	for i, row := range t.Rows {
		if i == 0 || len(row.Cells) < 2 {
			continue
		}
		errs = append(errs, s.clusterRuns(row.Cells[0].Value, row.Cells[1].Value))
	}
	return errors.Join(errs...)
}

func (s *scenario) rolloutIs(phase string) error {
	if err := s.ensure(); err != nil {
		return err
	}
	ro, err := s.en.latest(s.ctx)
	if err != nil {
		return err
	}
	if string(ro.Phase) != phase {
		return fmt.Errorf("rollout %s is %s (%s), not %s", ro.ID, ro.Phase, ro.Reason, phase)
	}
	return nil
}

// pushRejected checks that verify rejected the push of tag, its reason
// saying want (a part of it): no rollout started of it.
func (s *scenario) pushRejected(tag, want string) error {
	return s.pushRefused(events.TypeImageRejected, "rejected", tag, want, func(x cloudevents.Event) (string, string, error) {
		r, err := events.Decode[events.ImageRejected](x)
		return r.Tag, r.Reason, err
	})
}

// pushSkipped checks that plan skipped the push of tag, its reason
// saying want (a part of it): no rollout started of it.
func (s *scenario) pushSkipped(tag, want string) error {
	return s.pushRefused(events.TypeRolloutSkipped, "skipped", tag, want, func(x cloudevents.Event) (string, string, error) {
		r, err := events.Decode[events.RolloutSkipped](x)
		return r.Tag, r.Reason, err
	})
}

// pushRefused checks that an event of typ (decoded by tagReason into its
// tag and reason) refused the push of tag, saying want (a part of it).
func (s *scenario) pushRefused(typ, verb, tag, want string, tagReason func(cloudevents.Event) (string, string, error)) error {
	if err := s.ensure(); err != nil {
		return err
	}
	var reasons []string
	for _, x := range s.en.eventsOf(typ) {
		t, reason, err := tagReason(x.e)
		if err != nil || t != tag {
			continue
		}
		if strings.Contains(reason, want) {
			return nil
		}
		reasons = append(reasons, reason)
	}
	if len(reasons) == 0 {
		return fmt.Errorf("the push of %s was not %s", tag, verb)
	}
	return fmt.Errorf("the push of %s was %s saying %q, not %q", tag, verb, strings.Join(reasons, "; "), want)
}

func (s *scenario) waitsFor(what string) error {
	if err := s.ensure(); err != nil {
		return err
	}
	ro, err := s.en.latest(s.ctx)
	if err != nil {
		return err
	}
	if ro.Phase != rollout.Progressing || !strings.Contains(strings.ToLower(ro.Waiting), strings.ToLower(what)) {
		return fmt.Errorf("rollout %s is %s and waits for %q, not %q", ro.ID, ro.Phase, ro.Waiting, what)
	}
	return nil
}

// reverted are the clusters rolled back, in the order their reverts were
// asked for (pipeline runs of purpose revert).
func (s *scenario) reverted() []string { return s.en.reverted() }

func (s *scenario) rollbackOrder(order string) error {
	if err := s.ensure(); err != nil {
		return err
	}
	var want []string
	for _, c := range strings.Split(order, ",") {
		if c = strings.TrimSpace(c); c != "" {
			want = append(want, c)
		}
	}
	if got := s.reverted(); !slices.Equal(got, want) {
		return fmt.Errorf("the clusters were rolled back in the order %q, not %q", strings.Join(got, ", "), strings.Join(want, ", "))
	}
	return nil
}

func (s *scenario) nothingRolledBack() error {
	if err := s.ensure(); err != nil {
		return err
	}
	if got := s.reverted(); len(got) > 0 {
		return fmt.Errorf("clusters were rolled back: %s", strings.Join(got, ", "))
	}
	return nil
}

func (s *scenario) askedOf(wave, who string) error {
	if err := s.ensure(); err != nil {
		return err
	}
	ro, err := s.en.latest(s.ctx)
	if err != nil {
		return err
	}
	i, err := s.waveIndex(ro, wave)
	if err != nil {
		return err
	}
	w := ro.Waves[i]
	if w.Approvals == 0 {
		return fmt.Errorf("wave %s needs no approval", wave)
	}
	from := w.ApprovalsFrom
	if len(from) == 0 {
		from = []string{"anyone"}
	}
	if !slices.Contains(from, who) {
		return fmt.Errorf("approval of wave %s is asked of %s, not %s", wave, strings.Join(from, ", "), who)
	}
	return nil
}

// waveStarted is when wave (by name) of the latest rollout first started.
func (s *scenario) waveStarted(wave string) (time.Time, error) {
	ro, err := s.en.latest(s.ctx)
	if err != nil {
		return time.Time{}, err
	}
	i, err := s.waveIndex(ro, wave)
	if err != nil {
		return time.Time{}, err
	}
	for _, x := range s.en.eventsOf(events.TypeWaveStarted) {
		var p struct {
			RolloutID string `json:"rolloutId"`
			Wave      int    `json:"wave"`
		}
		if err := x.e.DataAs(&p); err == nil && p.RolloutID == ro.ID && p.Wave == i {
			return x.at, nil
		}
	}
	return time.Time{}, fmt.Errorf("wave %s of rollout %s never started", wave, ro.ID)
}

func (s *scenario) waveStartedAfter(wave, d string) error {
	want, err := time.ParseDuration(d)
	if err != nil {
		return err
	}
	if err := s.ensure(); err != nil {
		return err
	}
	at, err := s.waveStarted(wave)
	if err != nil {
		return err
	}
	if got := at.Sub(s.pushedAt); got != want {
		return fmt.Errorf("wave %s started %s after the push, not %s", wave, got, want)
	}
	return nil
}

// ended is when the latest rollout ended, after the push.
func (s *scenario) ended() (time.Duration, error) {
	if err := s.ensure(); err != nil {
		return 0, err
	}
	ro, err := s.en.latest(s.ctx)
	if err != nil {
		return 0, err
	}
	for _, typ := range []string{events.TypeRolloutSucceeded, events.TypeRolloutRolledBack, events.TypeRolloutRollbackFailed, events.TypeRolloutSuperseded} {
		for _, x := range s.en.eventsOf(typ) {
			if id, _ := x.e.Extensions()[events.ExtRolloutID].(string); id == ro.ID {
				return x.at.Sub(s.pushedAt), nil
			}
		}
	}
	return 0, fmt.Errorf("rollout %s has not ended: it is %s (%s)", ro.ID, ro.Phase, cmpOr(ro.Waiting, ro.Reason))
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (s *scenario) endedAfter(d string) error {
	want, err := time.ParseDuration(d)
	if err != nil {
		return err
	}
	got, err := s.ended()
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("the rollout ended %s after the push, not %s", got, want)
	}
	return nil
}

func (s *scenario) endedWithin(d string) error {
	want, err := time.ParseDuration(d)
	if err != nil {
		return err
	}
	got, err := s.ended()
	if err != nil {
		return err
	}
	if got > want {
		return fmt.Errorf("the rollout ended %s after the push, later than %s", got, want)
	}
	return nil
}

// list is the list of maps at doc's path.
func list(doc map[string]any, path ...string) []map[string]any {
	var cur any = doc
	for _, p := range path {
		m, _ := cur.(map[string]any)
		cur = m[p]
	}
	xs, _ := cur.([]any)
	out := make([]map[string]any, 0, len(xs))
	for _, x := range xs {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

var _ = context.Background

// imageLed names the lead of set when set is a release set of git and
// image members led by an image member (docs/design/release-sets.md, "An
// image lead"), which simulate does not play yet.
func imageLed(set config.Application) (string, bool) {
	if set.Set == nil || !set.Set.Mixed() {
		return "", false
	}
	for _, m := range set.Set.Members {
		if !m.Job {
			return m.Name, m.Image != ""
		}
	}
	return "", false
}
