package features

import (
	"context"
	"fmt"

	"github.com/cucumber/godog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
// depending on the first.
func (is *imageSetSpec) configure(cfg map[string]any) {
	cfg["releaseSets"] = []map[string]any{{"name": is.name, "applications": []string{is.first, is.second}}}
	for _, a := range cfg["applications"].([]map[string]any) {
		if a["name"] == is.second {
			a["dependsOn"] = []map[string]any{{"name": is.first}}
		}
	}
}

func (s *scenario) registerImageSetSteps(sc *godog.ScenarioContext) {
	sc.Step(`^the release set "([^"]*)" of "([^"]*)" then the image application "([^"]*)" that tracks "([^"]*)"$`, s.imageSetOf)
	sc.Step(`^the Canary "([^"]*)" in every cluster lists the canaries "([^"]*)"$`, s.canaryListsEverywhere)
	sc.Step(`^the primary and the workload of "([^"]*)" in every cluster run version "([^"]*)" by digest$`, s.memberRunsEverywhere)
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
