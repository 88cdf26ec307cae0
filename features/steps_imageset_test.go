package features

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/canary"
)

// A release set of image members (docs/design/release-sets.md, "Image
// members"): the scenario's application, then a second image application
// depending on it, each its own repository of the registry and its own
// workload, promoted as one set.

// imageSetSpec is the release set of image members of a scenario: its
// name and its members in order (the first the scenario's application).
type imageSetSpec struct {
	name          string
	first, second string
}

// configure adds the set to cfg: releaseSets, and the second member
// depending on the first. The rollout's fields the steps set on the
// application (driftPolicy, ...) are the set's (a member's are refused).
func (is *imageSetSpec) configure(cfg map[string]any) {
	set := map[string]any{"name": is.name, "applications": []string{is.first, is.second}}
	for _, a := range cfg["applications"].([]map[string]any) {
		if a["name"] == is.second {
			a["dependsOn"] = []map[string]any{{"name": is.first}}
		}
		if a["name"] != is.first && a["name"] != is.second {
			continue
		}
		for _, k := range setRolloutFields {
			if v, ok := a[k]; ok {
				set[k] = v
				delete(a, k)
			}
		}
	}
	cfg["releaseSets"] = []map[string]any{set}
}

func (s *scenario) registerImageSetSteps(sc *godog.ScenarioContext) {
	sc.Step(`^the release set "([^"]*)" of "([^"]*)" then the image application "([^"]*)" that tracks "([^"]*)"$`, s.imageSetOf)
	sc.Step(`^the Canary "([^"]*)" in every cluster lists the canaries "([^"]*)"$`, s.canaryListsEverywhere)
	sc.Step(`^the primary and the workload of "([^"]*)" in every cluster run version "([^"]*)" by digest$`, s.memberRunsEverywhere)
	sc.Step(`^the primary of "([^"]*)" in cluster "([^"]*)" runs version "([^"]*)" by digest$`, s.memberPrimaryRuns)
	sc.Step(`^version "([^"]*)" of "([^"]*)" is pushed without its registry notification$`, s.pushOfWithoutNotification)
	sc.Step(`^flotilla journals the drift of the member "([^"]*)" in cluster "([^"]*)" to image "([^"]*)" from "([^"]*)" within (\d+) seconds$`, s.memberDriftJournaled)
	sc.Step(`^the API says the set's rollout of "([^"]*)" came from a "([^"]*)"$`, s.setRolloutSource)
	sc.Step("^`flotilla describe rollout` of \"([^\"]*)\" says the entry \"([^\"]*)\" is signed with the key \"([^\"]*)\"$", s.describeEntrySignedBy)
	sc.Step("^`flotilla describe rollout` of \"([^\"]*)\" says the entry \"([^\"]*)\" is unsigned, because \"([^\"]*)\"$", s.describeEntryUnsigned)
	sc.Step("^`flotilla describe rollout` of \"([^\"]*)\" says the entry \"([^\"]*)\" has no signer recorded$", s.describeEntryNoSigner)
	sc.Step("^`flotilla describe rollout` of \"([^\"]*)\" says it stops before \"([^\"]*)\"$", s.describeStopsBefore)
}

// describeRollout runs `flotilla describe rollout` of the rollout of
// version as a user would: its id and its output.
func (s *scenario) describeRollout(ctx context.Context, version string) (string, string, error) {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return "", "", err
	}
	out, err := s.flotillaCLI(ctx, "describe", "rollout", id)
	return id, out, err
}

// describedSignatures reads the Signatures block of `flotilla describe
// rollout` of the rollout of tuple: what it says of each entry ("web-api
// 1.1.0" -> "signed by key release").
func (s *scenario) describedSignatures(ctx context.Context, tuple string) (map[string]string, string, error) {
	id, out, err := s.describeRollout(ctx, tuple)
	if err != nil {
		return nil, "", err
	}
	const indent = "              " // describe's labels are 14 wide
	got, in := map[string]string{}, false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "Signatures:"):
			in, line = true, strings.TrimPrefix(line, "Signatures:")
		case in && strings.HasPrefix(line, indent):
		default:
			in = false
			continue
		}
		// "web-api 1.1.0: unsigned: ...": the entry is an application
		// and a tag, with no colon.
		parts := strings.SplitN(strings.TrimSpace(line), ": ", 2)
		if len(parts) == 2 {
			got[parts[0]] = parts[1]
		}
	}
	if len(got) == 0 {
		return nil, "", fmt.Errorf("flotilla describe rollout %s shows no signatures:\n%s", id, out)
	}
	return got, out, nil
}

func (s *scenario) describeEntrySays(ctx context.Context, tuple, entry string, ok func(string) bool, want string) error {
	got, out, err := s.describedSignatures(ctx, tuple)
	if err != nil {
		return err
	}
	if say, found := got[entry]; !found || !ok(say) {
		return fmt.Errorf("flotilla describe rollout of %s says of %s %q, want %s:\n%s", tuple, entry, say, want, out)
	}
	return nil
}

func (s *scenario) describeEntrySignedBy(ctx context.Context, tuple, entry, keyName string) error {
	want := "signed by key " + keyName
	return s.describeEntrySays(ctx, tuple, entry, func(say string) bool { return say == want }, strconv.Quote(want))
}

func (s *scenario) describeEntryUnsigned(ctx context.Context, tuple, entry, reason string) error {
	return s.describeEntrySays(ctx, tuple, entry, func(say string) bool {
		why, ok := strings.CutPrefix(say, "unsigned: ")
		return ok && strings.Contains(why, reason)
	}, fmt.Sprintf("unsigned, because ...%s...", reason))
}

func (s *scenario) describeEntryNoSigner(ctx context.Context, tuple, entry string) error {
	return s.describeEntrySays(ctx, tuple, entry, func(say string) bool { return say == "no signer recorded" }, `"no signer recorded"`)
}

// describeStopsBefore reads the Stops before line of `flotilla describe
// rollout` of the rollout of version.
func (s *scenario) describeStopsBefore(ctx context.Context, version, wave string) error {
	id, out, err := s.describeRollout(ctx, version)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "Stops before:"); ok {
			if got, _, _ := strings.Cut(strings.TrimSpace(v), " "); got != wave {
				return fmt.Errorf("flotilla describe rollout %s says it stops before %q, want %q", id, got, wave)
			}
			return nil
		}
	}
	return fmt.Errorf("flotilla describe rollout %s names no wave it stops before:\n%s", id, out)
}

func (s *scenario) imageSetOf(set, first, second, repo string) error {
	s.w.second = &secondApp{name: second, repo: repo} // its pushes and workload (steps_engine_test.go)
	s.w.imageSet = &imageSetSpec{name: set, first: first, second: second}
	return nil
}

// canaryListsEverywhere reads the Canary name in every cluster: the
// canaries it lists (canary.AnnotationWorkloads), by which the set is
// judged.
func (s *scenario) canaryListsEverywhere(ctx context.Context, name, want string) error {
	for _, c := range s.w.clusters {
		cn, err := c.Flagger.FlaggerV1beta1().Canaries(s.w.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading the Canary %s in %s: %w", name, c.Name, err)
		}
		if got := cn.Annotations[canary.AnnotationWorkloads]; got != want {
			return fmt.Errorf("the Canary %s in %s lists %q, want %q", name, c.Name, got, want)
		}
	}
	return nil
}

// memberRunsEverywhere reads the workload of application app and its
// primary in every cluster: both run version by digest.
func (s *scenario) memberRunsEverywhere(ctx context.Context, app, version string) error {
	return s.withRepo(app, func() error {
		want, err := s.ref(version)
		if err != nil {
			return err
		}
		for _, c := range s.w.clusters {
			for _, d := range []string{app, app + "-primary"} {
				got, err := s.imageOf(ctx, c, d)
				if err != nil {
					return err
				}
				if got != want {
					return fmt.Errorf("%s in %s runs %s, want %s (version %s)", d, c.Name, got, want, version)
				}
			}
		}
		return nil
	})
}

// memberPrimaryRuns waits up to 30 s for the primary of application app
// in a cluster to run version by digest.
func (s *scenario) memberPrimaryRuns(ctx context.Context, app, cluster, version string) error {
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	return s.withRepo(app, func() error {
		want, err := s.ref(version)
		if err != nil {
			return err
		}
		return s.waitImage(ctx, c, cluster, app+"-primary", want)
	})
}

// pushOfWithoutNotification pushes version of application app to the
// registry and drops its notification, as a lost webhook.
func (s *scenario) pushOfWithoutNotification(version, app string) error {
	return s.withRepo(app, func() error { return s.pushWithoutNotification(version) })
}

// setVersionDigest is the digest of the set's version tuple (its tag,
// "web-api:1.0.0,web-frontend:2.0.0"), as the first rollout of it other
// than except carried it: the tuple's hash, which no image has.
func (s *scenario) setVersionDigest(tuple, except string) (string, error) {
	for _, e := range s.w.sink.all() {
		if e.Type() != events.TypeRolloutStarted || events.RolloutID(e) == except {
			continue
		}
		if p, err := events.Decode[events.RolloutStarted](e); err == nil && p.Tag == tuple {
			return p.Digest, nil
		}
	}
	return "", fmt.Errorf("no rollout of the set's version %s started before", tuple)
}

// memberDriftJournaled waits, up to seconds after the primary was changed,
// for the drift.detected of the set naming member in cluster, its primary
// running image, held against the set's deployed tuple.
func (s *scenario) memberDriftJournaled(ctx context.Context, member, cluster, image, tuple string, seconds int) error {
	digest, err := s.setVersionDigest(tuple, "")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Until(s.w.reconcileState().changed.Add(time.Duration(seconds)*time.Second)))
	defer cancel()
	e, err := s.w.sink.waitFor(ctx, "the drift of "+member+" in "+cluster, func(e cloudevents.Event) bool {
		if e.Type() != events.TypeDriftDetected {
			return false
		}
		p, err := events.Decode[events.DriftDetected](e)
		return err == nil && p.Application == s.setName() && p.Member == member && p.Cluster == cluster &&
			p.Image == image && p.Digest == digest && p.Tag == tuple
	})
	if err != nil {
		return fmt.Errorf("no drift of the set %s's member %s in %s to %s from %s (%s) journaled within %d s of the change: %w",
			s.setName(), member, cluster, image, tuple, digest, seconds, err)
	}
	fmt.Printf("drift journaled %v after the primary was changed (interval %s)\n",
		e.Time().Sub(s.w.reconcileState().changed).Round(time.Millisecond), s.w.reconcile.interval)
	return nil
}

// setName is the scenario's release set's name: its set of image members',
// else its set of git (and image) members'.
func (s *scenario) setName() string {
	if s.w.imageSet != nil {
		return s.w.imageSet.name
	}
	if s.w.set != nil {
		return s.w.set.name
	}
	return ""
}

// setRolloutSource reads the set's rollout of tuple in the API: what
// brought it, and its version the tuple.
func (s *scenario) setRolloutSource(ctx context.Context, tuple, source string) error {
	id, err := s.rolloutID(ctx, tuple)
	if err != nil {
		return err
	}
	var ro struct{ Application, Tag, Source string }
	if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
		return err
	}
	if ro.Application != s.w.imageSet.name || ro.Tag != tuple || ro.Source != source {
		return fmt.Errorf("the API has rollout %s of %s %s from %q, want the set %s's of %s from %q", id, ro.Application, ro.Tag, ro.Source,
			s.w.imageSet.name, tuple, source)
	}
	return nil
}
