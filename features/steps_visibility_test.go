package features

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	cdapi "github.com/cdevents/sdk-go/pkg/api"
	cdv05 "github.com/cdevents/sdk-go/pkg/api/v05"
	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-cd/flotilla/pkg/cdevents"
)

func (s *scenario) registerVisibilitySteps(sc *godog.ScenarioContext) {
	sc.Step(`^a CDEvents sink$`, s.cdeventsSink)
	sc.Step(`^the CDEvents sink received the artifact\.published of "([^"]*)" before any other CDEvent of its rollout$`, s.artifactPublishedFirst)
	sc.Step(`^for each cluster the CDEvents sink received pipelinerun\.queued, pipelinerun\.started, pipelinerun\.finished and service\.upgraded of "([^"]*)", in that order$`, s.clusterCDEventsInOrder)
	sc.Step(`^the CDEvents sink received the service\.upgraded of "([^"]*)" for "([^"]*)" before those for "([^"]*)"$`, s.upgradedBefore)
	sc.Step(`^every CDEvent the sink received validates against the CDEvents spec$`, s.cdeventsValid)
	sc.Step(`^the CDEvents sink received a service\.rolledback of "([^"]*)" for "([^"]*)", back to version "([^"]*)"$`, s.rolledBackTo)
}

func (s *scenario) cdeventsSink(ctx context.Context) error {
	k, err := newSink(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	s.onCleanup(k.close)
	s.w.cdSink = k
	return nil
}

// cdevent is a received CDEvent, read back with the SDK.
type cdevent struct {
	typ, subject, chain, env, artifact string
	ev                                 cdapi.CDEventV04
}

// cdeventsOf reads every CDEvent the sink received, in order, each once:
// the mirror delivers at least once, and the same change comes with the
// same id (a resend; a cluster's outcome Flagger reported twice), so a
// consumer drops what it has seen by id.
func (s *scenario) cdeventsOf() ([]cdevent, error) {
	var out []cdevent
	seen := map[string]bool{}
	for _, e := range s.w.cdSink.all() {
		if seen[e.ID()] {
			continue
		}
		seen[e.ID()] = true
		ev, err := cdv05.NewFromJsonBytes(e.Data())
		if err != nil {
			return nil, fmt.Errorf("event %s (%s) is not a CDEvent: %w", e.ID(), e.Type(), err)
		}
		c := cdevent{typ: shortType(e), subject: ev.GetSubjectId(), chain: ev.GetChainId(), ev: ev}
		var content struct {
			Environment struct {
				ID string `json:"id"`
			} `json:"environment"`
			ArtifactID string `json:"artifactId"`
		}
		b, err := json.Marshal(ev.GetSubjectContent())
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &content); err != nil {
			return nil, err
		}
		c.env, c.artifact = content.Environment.ID, content.ArtifactID
		out = append(out, c)
	}
	return out, nil
}

// shortType is "service.upgraded" of "dev.cdevents.service.upgraded.0.3.0".
func shortType(e cloudevents.Event) string {
	t := strings.TrimPrefix(e.Type(), "dev.cdevents.")
	parts := strings.Split(t, ".")
	if len(parts) < 2 {
		return t
	}
	return parts[0] + "." + parts[1]
}

// waitCDEvents waits until the sink holds what pred looks for.
func (s *scenario) waitCDEvents(ctx context.Context, what string, pred func([]cdevent) bool) ([]cdevent, error) {
	var evs []cdevent
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		var err error
		if evs, err = s.cdeventsOf(); err != nil {
			return false, err
		}
		return pred(evs), nil
	})
	if err != nil {
		var got []string
		for _, e := range evs {
			got = append(got, e.typ+"("+e.env+")")
		}
		return nil, fmt.Errorf("%s: %w (received %v)", what, err, got)
	}
	return evs, nil
}

func (s *scenario) purlOf(version string) (string, error) {
	d, ok := s.w.digests[version]
	if !ok {
		return "", fmt.Errorf("version %s was never pushed", version)
	}
	return cdevents.PURL(s.w.regHost+"/"+s.w.repo, d)
}

func (s *scenario) artifactPublishedFirst(ctx context.Context, version string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	purl, err := s.purlOf(version)
	if err != nil {
		return err
	}
	evs, err := s.waitCDEvents(ctx, "artifact.published of "+version, func(evs []cdevent) bool {
		return slices.ContainsFunc(evs, func(e cdevent) bool { return e.typ == "artifact.published" && e.subject == purl })
	})
	if err != nil {
		return err
	}
	for _, e := range evs {
		if e.typ == "artifact.published" && e.subject == purl {
			return nil
		}
		if e.chain == id {
			return fmt.Errorf("%s of rollout %s came before the artifact.published of %s", e.typ, id, version)
		}
	}
	return nil
}

func (s *scenario) clusterCDEventsInOrder(ctx context.Context, version string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	purl, err := s.purlOf(version)
	if err != nil {
		return err
	}
	var clusters []string
	for _, w := range s.w.waves {
		clusters = append(clusters, w...)
	}
	evs, err := s.waitCDEvents(ctx, "every cluster's service.upgraded of "+version, func(evs []cdevent) bool {
		for _, c := range clusters {
			if !slices.ContainsFunc(evs, func(e cdevent) bool { return e.typ == "service.upgraded" && e.env == c && e.chain == id }) {
				return false
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	for _, c := range clusters {
		var seq []string
		for _, e := range evs {
			if e.chain != id {
				continue
			}
			switch {
			case strings.HasPrefix(e.typ, "pipelinerun.") && strings.Contains(e.subject, "/"+c+"/"):
				seq = append(seq, e.typ)
			case e.typ == "service.upgraded" && e.env == c:
				if e.artifact != purl {
					return fmt.Errorf("service.upgraded in %s names artifact %s, want %s", c, e.artifact, purl)
				}
				if e.subject != s.w.app {
					return fmt.Errorf("service.upgraded in %s is of service %q, want %q", c, e.subject, s.w.app)
				}
				seq = append(seq, e.typ)
			}
		}
		want := []string{"pipelinerun.queued", "pipelinerun.started", "pipelinerun.finished", "service.upgraded"}
		if !slices.Equal(seq, want) {
			var all []string
			for _, e := range evs {
				all = append(all, e.typ+"@"+e.env+" "+e.ev.GetId())
			}
			return fmt.Errorf("the CDEvents of %s in %s were %v, want %v; all: %s", version, c, seq, want, strings.Join(all, "\n"))
		}
	}
	return nil
}

func (s *scenario) upgradedBefore(ctx context.Context, version, first, later string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	evs, err := s.cdeventsOf()
	if err != nil {
		return err
	}
	index := func(c string) int {
		return slices.IndexFunc(evs, func(e cdevent) bool { return e.typ == "service.upgraded" && e.env == c && e.chain == id })
	}
	f := index(first)
	for _, c := range strings.Split(later, ",") {
		if i := index(c); f < 0 || i < f {
			return fmt.Errorf("service.upgraded of %s: %s at %d, %s at %d", version, first, f, c, i)
		}
	}
	return nil
}

func (s *scenario) cdeventsValid() error {
	evs, err := s.cdeventsOf()
	if err != nil {
		return err
	}
	if len(evs) == 0 {
		return fmt.Errorf("the CDEvents sink received nothing")
	}
	for _, e := range evs {
		if err := cdapi.Validate(e.ev); err != nil {
			return fmt.Errorf("%s %s does not validate: %w", e.typ, e.ev.GetId(), err)
		}
	}
	return nil
}

func (s *scenario) rolledBackTo(ctx context.Context, version, cluster, back string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	purl, err := s.purlOf(back)
	if err != nil {
		return err
	}
	_, err = s.waitCDEvents(ctx, "service.rolledback in "+cluster, func(evs []cdevent) bool {
		return slices.ContainsFunc(evs, func(e cdevent) bool {
			return e.typ == "service.rolledback" && e.env == cluster && e.chain == id && e.artifact == purl
		})
	})
	return err
}
