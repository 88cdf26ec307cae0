package features

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cucumber/godog"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/pkg/canary"
)

// Simulate held honest on release sets (docs/simulate.md): the story of a
// set's rollout on the real fleet, then `flotilla simulate` of the same
// story against the very config flotilla served, and the decisions both
// must agree on. Not the interleaving of one wave's clusters: on the fleet
// a cluster of the failing wave may promote before the failing one fails,
// or not, as the real Flagger's analyses come; simulate's Flagger gives
// each its analysis time. So a cluster's verdict is compared unless it
// races a failure of its wave, and the rollback's order wave by wave
// (newest first, the engine's rule), each wave's clusters as a set.

func (s *scenario) registerSimulateSetSteps(sc *godog.ScenarioContext, r *simulateRun) {
	sc.Step("^`flotilla simulate` runs this story of the set against the scenario's config:$", func(ctx context.Context, doc *godog.DocString) error {
		dir, err := os.MkdirTemp("", "flotilla-simulate-honesty-*")
		if err != nil {
			return err
		}
		s.cleanups = append(s.cleanups, func() { _ = os.RemoveAll(dir) })
		r.feature = filepath.Join(dir, "honesty.feature")
		story := doc.Content
		if s.w.git != nil {
			// The story names the repository's commits as the real fleet
			// ran them: simulate names a git member's version by them.
			story = strings.NewReplacer("{first commit}", s.w.git.commits["first"], "{that commit}", s.w.git.commits["that"]).Replace(story)
		}
		if strings.Contains(story, "{") {
			return fmt.Errorf("the story names a commit the scenario has not made:\n%s", story)
		}
		r.story = story
		if err := os.WriteFile(r.feature, []byte(story), 0o600); err != nil {
			return err
		}
		start := time.Now()
		out, code, err := runFlotilla(ctx, "simulate", "--config", s.configPath(), "--format", "progress", r.feature)
		r.out, r.code, r.wall = out, code, time.Since(start)
		return err
	})
	const agreed = `: the waves started, each verdict not racing a failure of its wave, the clusters rolled back wave by wave, the outcome and what each cluster's members run$`
	sc.Step(`^simulate agreed with the real fleet on the set's rollout of "([^"]+)"`+agreed, func(ctx context.Context, tuple string) error {
		return s.simulateAgreedOnSet(ctx, r, tuple)
	})
	sc.Step(`^simulate agreed with the real fleet on the set's rollout of that commit and "([^"]+)" of "([^"]+)"`+agreed, func(ctx context.Context, version, app string) error {
		if s.w.set == nil || app != s.w.set.frontend {
			return fmt.Errorf("the scenario's set has no image member %q", app)
		}
		return s.simulateAgreedOnSet(ctx, r, s.mixedTag(s.w.git.commits["that"], version))
	})
}

// setDecisions are what a set's rollout decided that the real fleet and
// simulate must agree on.
type setDecisions struct {
	WavesStarted int
	Verdicts     map[string]string // cluster -> its first verdict, but those racing a failure of their wave
	RolledBack   []string          // the reverted clusters, wave by wave newest first: "c2,c4", "c1"
	Outcome      string
	Runs         map[string]string // cluster -> "member version, ..." in the set's order, once the rollout ended
}

// failing are the clusters a story makes fail (`"1.1.0" fails in cluster
// "c4"`).
var failing = regexp.MustCompile(`"[^"]+" fails in cluster "([^"]+)"`)

// setDecisionsOf reads the decisions from what happened; racing are the
// clusters whose verdict is not compared (a wave's other clusters, when
// one of it fails).
func setDecisionsOf(hs []happening, waves []honestyWave, racing map[string]bool) setDecisions {
	d := decide(hs, waves)
	out := setDecisions{WavesStarted: d.WavesStarted, Verdicts: map[string]string{}, Outcome: d.Outcome}
	for c, v := range d.Verdicts {
		if !racing[c] {
			out.Verdicts[c] = v
		}
	}
	for i := len(waves) - 1; i >= 0; i-- {
		var cs []string
		for _, c := range waves[i].clusters {
			if slices.Contains(d.RollbackOrder, c) {
				cs = append(cs, c)
			}
		}
		if len(cs) > 0 {
			slices.Sort(cs)
			out.RolledBack = append(out.RolledBack, strings.Join(cs, ","))
		}
	}
	return out
}

// simulateAgreedOnSet compares the real fleet's rollout of tuple (its
// events, and what each cluster's members run now) with simulate's (its
// report).
func (s *scenario) simulateAgreedOnSet(ctx context.Context, r *simulateRun, tuple string) error {
	if r.code != 0 {
		return fmt.Errorf("simulate exited %d:\n%s", r.code, r.out)
	}
	id, err := s.rolloutID(ctx, tuple)
	if err != nil {
		return err
	}
	waves, err := s.honestyWaves(ctx, id, time.Time{})
	if err != nil {
		return err
	}
	racing := map[string]bool{}
	for _, m := range failing.FindAllStringSubmatch(r.story, -1) {
		for _, w := range waves {
			if slices.Contains(w.clusters, m[1]) {
				for _, c := range w.clusters {
					racing[c] = racing[c] || c != m[1]
				}
			}
		}
	}
	onFleet := setDecisionsOf(happeningsOfEvents(s.w.sink.all(), id, time.Time{}, waves), waves, racing)
	if onFleet.Runs, err = s.setRuns(ctx, id); err != nil {
		return err
	}
	simulated := setDecisionsOf(happeningsOfReport(r.out), waves, racing)
	simulated.Runs = setRunsOfReport(r.out)
	if onFleet.WavesStarted == 0 || onFleet.Outcome == "" || len(onFleet.Verdicts) == 0 {
		return fmt.Errorf("the real fleet's rollout of %s shows too little to compare: %+v", tuple, onFleet)
	}
	if diff := cmp.Diff(onFleet, simulated); diff != "" {
		return fmt.Errorf("simulate decided otherwise than the real fleet (-real +simulate):\n%s\nsimulate's report:\n%s", diff, r.out)
	}
	fmt.Printf("simulate and the real fleet agree on %s: %+v\n", tuple, onFleet)
	return nil
}

// setRuns reads what each member of rollout id's set runs in every
// cluster, as simulate's report names it: a Job member the commit its Job
// ran, a member with a canary what its primary runs, the commit of its
// revision (a git member), else its image's tag as the rollout's version
// or previous version has that digest.
func (s *scenario) setRuns(ctx context.Context, id string) (map[string]string, error) {
	var ro struct {
		Members          []string
		Versions         []struct{ Application, Tag, Digest string }
		PreviousVersions []struct{ Application, Tag, Digest string }
	}
	if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
		return nil, err
	}
	tags := map[string]string{} // member/digest -> tag
	for _, v := range slices.Concat(ro.Versions, ro.PreviousVersions) {
		tags[v.Application+"/"+v.Digest] = v.Tag
	}
	out := map[string]string{}
	for _, c := range s.w.clusters {
		var parts []string
		for _, m := range ro.Members {
			var ref string
			if s.w.set != nil && m == s.w.set.job {
				j, err := c.Kube.BatchV1().Jobs(s.w.namespace).Get(ctx, m, metav1.GetOptions{})
				if err != nil {
					return nil, fmt.Errorf("reading the Job %s in %s: %w", m, c.Name, err)
				}
				ref = j.Spec.Template.Annotations[canary.AnnotationRevision]
			} else {
				d, err := c.Kube.AppsV1().Deployments(s.w.namespace).Get(ctx, m+"-primary", metav1.GetOptions{})
				if err != nil {
					return nil, fmt.Errorf("reading %s-primary in %s: %w", m, c.Name, err)
				}
				ref = d.Spec.Template.Annotations[canary.AnnotationRevision]
				if !strings.Contains(ref, "@sha") && strings.Contains(ref, "@") {
					ref = ref[strings.LastIndex(ref, "@")+1:] // a git member's commit
				} else {
					ref = d.Spec.Template.Spec.Containers[0].Image
				}
			}
			v := ref
			if i := strings.LastIndex(ref, "@"); i >= 0 {
				v = ref[i+1:]
				if t, ok := tags[m+"/"+v]; ok && strings.HasPrefix(v, "sha256:") {
					v = t
				}
			}
			parts = append(parts, m+" "+v)
		}
		out[c.Name] = strings.Join(parts, ", ")
	}
	return out, nil
}

// reportRow is a row of simulate's waves x clusters table: wave, cluster,
// version (the set's members', with single spaces), state.
var reportRow = regexp.MustCompile(`^  (\S+)\s{2,}(\S+)\s{2,}(.+?)\s{2,}(\S+)$`)

// setRunsOfReport reads what each cluster's members run from simulate's
// table (its one scenario's).
func setRunsOfReport(out string) map[string]string {
	runs := map[string]string{}
	table := false
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "waves x clusters:") {
			table = true
			continue
		}
		if m := reportRow.FindStringSubmatch(l); table && m != nil && m[2] != "cluster" {
			runs[m[2]] = m[3]
		}
	}
	return runs
}
