package features

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cucumber/godog"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-cd/flotilla/pkg/testkit/otlptest"
	"github.com/flotilla-cd/flotilla/pkg/tracing"
)

func (s *scenario) registerTracingSteps(sc *godog.ScenarioContext) {
	sc.Step(`^an OTLP receiver$`, s.otlpReceiver)
	sc.Step(`^the OTLP receiver holds the trace of the rollout of "([^"]*)": its push, then wave "([^"]*)", then wave "([^"]*)", each cluster's apply under its wave$`, s.rolloutTrace)
}

// otlpReceiver starts an OTLP/HTTP receiver on loopback; flotilla's config
// points telemetry.tracing at it.
func (s *scenario) otlpReceiver() error {
	s.w.otlp = otlptest.NewReceiver()
	s.onCleanup(s.w.otlp.Close)
	return nil
}

// tracingConfig is the telemetry section for the scenario's OTLP receiver.
func tracingConfig(w *world) map[string]any {
	return map[string]any{"tracing": map[string]any{"endpoint": w.otlp.URL() + "/v1/traces"}}
}

// rolloutTrace checks the trace of a rollout: one root, the push and each
// wave under it, in order, each cluster of a wave under the wave and its
// apply run under the cluster, all within the root's time.
func (s *scenario) rolloutTrace(ctx context.Context, version, wave1, wave2 string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	traceID := tracing.TraceID(id).String()
	var spans []otlptest.Span
	root := func() *otlptest.Span {
		for i, sp := range spans {
			if sp.ParentID == "" {
				return &spans[i]
			}
		}
		return nil
	}
	// The exporter sends in batches, within 5 s of the rollout's end.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		spans = spans[:0]
		for _, sp := range s.w.otlp.Spans() {
			if sp.TraceID == traceID {
				spans = append(spans, sp)
			}
		}
		return root() != nil, nil
	})
	if err != nil {
		return fmt.Errorf("no root span of rollout %s (trace %s) received: %w; spans of it: %s", id, traceID, err, describeSpans(spans))
	}
	r := root()
	byID := map[string]otlptest.Span{}
	roots := 0
	for _, sp := range spans {
		byID[sp.SpanID] = sp
		if sp.ParentID == "" {
			roots++
		}
	}
	if want := "rollout " + s.w.app + " " + version; r.Name != want || roots != 1 {
		return fmt.Errorf("root %q (%d roots), want one named %q: %s", r.Name, roots, want, describeSpans(spans))
	}
	if r.Attrs["flotilla.rollout.id"] != id || r.Attrs["flotilla.rollout.outcome"] != "succeeded" || r.IsError {
		return fmt.Errorf("root span attributes %v, error %q: want rollout %s succeeded", r.Attrs, r.Error, id)
	}
	// child returns the one span whose parent is parent and whose name is
	// name (ending with "*": starts with the rest).
	child := func(parent otlptest.Span, name string) (otlptest.Span, error) {
		var found []otlptest.Span
		for _, sp := range spans {
			named := sp.Name == name || (strings.HasSuffix(name, "*") && strings.HasPrefix(sp.Name, strings.TrimSuffix(name, "*")))
			if named && sp.ParentID == parent.SpanID {
				found = append(found, sp)
			}
		}
		if len(found) != 1 {
			return otlptest.Span{}, fmt.Errorf("%d spans %q under %q, want 1: %s", len(found), name, parent.Name, describeSpans(spans))
		}
		sp := found[0]
		if sp.Start.Before(parent.Start) || sp.End.After(parent.End) {
			return sp, fmt.Errorf("span %q (%s to %s) is not within its parent %q (%s to %s)", sp.Name, sp.Start, sp.End, parent.Name, parent.Start, parent.End)
		}
		return sp, nil
	}
	push, err := child(*r, "push *")
	if err != nil {
		return err
	}
	if !strings.HasSuffix(push.Name, "/"+s.w.repo+":"+version) {
		return fmt.Errorf("the push span is %q, want the push of %s:%s", push.Name, s.w.repo, version)
	}
	prev := push
	for i, names := range [][]string{strings.Split(wave1, ","), strings.Split(wave2, ",")} {
		w, err := child(*r, fmt.Sprintf("wave %d", i+1))
		if err != nil {
			return err
		}
		if w.Start.Before(prev.End) {
			return fmt.Errorf("%q started at %s, before %q ended at %s", w.Name, w.Start, prev.Name, prev.End)
		}
		for _, c := range names {
			cs, err := child(w, "cluster "+c)
			if err != nil {
				return err
			}
			if cs.IsError {
				return fmt.Errorf("span %q has status error: %s", cs.Name, cs.Error)
			}
			if _, err := child(cs, "pipeline apply "+c); err != nil {
				return err
			}
		}
		prev = w
	}
	for _, sp := range spans {
		if sp.ParentID != "" {
			if _, ok := byID[sp.ParentID]; !ok {
				return fmt.Errorf("span %q: its parent %s was never received", sp.Name, sp.ParentID)
			}
		}
	}
	return nil
}

func describeSpans(spans []otlptest.Span) string {
	byID := map[string]string{}
	for _, sp := range spans {
		byID[sp.SpanID] = sp.Name
	}
	var lines []string
	for _, sp := range spans {
		lines = append(lines, fmt.Sprintf("%q < %q", sp.Name, byID[sp.ParentID]))
	}
	slices.Sort(lines)
	return "[" + strings.Join(lines, "; ") + "]"
}
