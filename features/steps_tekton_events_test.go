package features

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/events"
)

func (s *scenario) registerTektonEventSteps(sc *godog.ScenarioContext) {
	sc.Step(`^flotilla receives the CloudEvents of Tekton in cluster "([^"]*)"$`, s.flotillaReceivesTekton)
	sc.Step(`^flotilla journaled the PipelineRun "([^"]*)" of cluster "([^"]*)" as "([^"]*)"$`, s.pipelineRunJournaled)
}

// flotillaReceivesTekton starts `flotilla serve` with a tekton receiver and
// points the Tekton controller of cluster at it through its config-events
// ConfigMap, as a user would. flotilla mirrors what it journals to the
// scenario's sink.
func (s *scenario) flotillaReceivesTekton(ctx context.Context, cluster string) error {
	dir, err := os.MkdirTemp("", "flotilla-scenario-*")
	if err != nil {
		return err
	}
	s.w = &world{dir: dir}
	w := s.w
	if w.sink, err = newSink(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	s.onCleanup(w.sink.close)
	listen, err := freePort(ctx)
	if err != nil {
		return err
	}
	cl, ok := fleet.Cluster(cluster)
	if !ok {
		return fmt.Errorf("the fleet has no cluster %s", cluster)
	}
	token := randomHex(16)
	tokenFile := filepath.Join(dir, "tekton.token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		return err
	}
	cfg := map[string]any{
		"server": map[string]any{"listen": listen, "dataDir": filepath.Join(dir, "data"), "instance": "tekton-" + randomHex(4)},
		"events": map[string]any{"sink": w.sink.srv.URL},
		"receivers": []map[string]any{
			{"name": "tekton", "type": "tekton", "secret": map[string]string{"file": tokenFile}},
			{"name": "flagger", "type": "flagger", "secret": map[string]string{"file": tokenFile}},
		},
		"fleet": map[string]any{"clusters": []map[string]any{{"name": cluster, "kubeconfig": cl.Kubeconfig}},
			"waves": []map[string]any{{"clusters": []string{cluster}}}},
		"applications": []map[string]any{{
			"name": "idle", "image": "registry.example.com/shop/idle", "namespace": s.ns,
			"workload": map[string]any{"name": "idle"}, "service": map[string]any{"port": 8080},
		}},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(dir, "flotilla.yaml")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		return err
	}
	w.flotilla = &flotillaProcess{config: cfgPath, listen: listen, logPath: filepath.Join(dir, "flotilla.log")}
	s.onCleanup(func() {
		w.flotilla.stop()
		if s.failed {
			fmt.Fprintf(os.Stderr, "scenario files kept in %s\n--- flotilla log tail:\n%s\n", dir, tail(w.flotilla.logPath, 40))
			return
		}
		_ = os.RemoveAll(dir)
	})
	if err := w.flotilla.start(ctx); err != nil {
		return err
	}
	sink := w.flotilla.url() + "/hooks/tekton/" + token + "?" + url.Values{"cluster": {cluster}}.Encode()
	if err := s.setTektonSink(ctx, sink); err != nil {
		return err
	}
	// The cleanup outlives the step's context.
	cleanupCtx := context.WithoutCancel(ctx)
	s.onCleanup(func() { _ = s.setTektonSink(cleanupCtx, "") })
	return nil
}

// setTektonSink sets (or, with "", removes) the sink of Tekton's CloudEvents
// in the scenario's cluster.
func (s *scenario) setTektonSink(ctx context.Context, sink string) error {
	data := map[string]any{"formats": "tektonv1", "sink": sink}
	if sink == "" {
		data["sink"] = nil
	}
	patch, err := yaml.YAMLToJSON(must(yaml.Marshal(map[string]any{"data": data})))
	if err != nil {
		return err
	}
	_, err = s.cluster.Kube.CoreV1().ConfigMaps("tekton-pipelines").Patch(ctx, "config-events", types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("setting Tekton's event sink: %w", err)
	}
	return nil
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// pipelineRunJournaled waits until flotilla journaled (and so mirrored) a
// pipelinerun event of each listed phase for the run.
func (s *scenario) pipelineRunJournaled(ctx context.Context, name, cluster, phases string) error {
	for _, phase := range strings.Split(phases, ",") {
		phase = strings.TrimSpace(phase)
		e, err := s.w.sink.waitFor(ctx, fmt.Sprintf("PipelineRun %s %s", name, phase), func(e cloudevents.Event) bool {
			if e.Type() != events.TypePipelineRun {
				return false
			}
			p, err := events.Decode[events.PipelineRun](e)
			return err == nil && p.Name == name && p.Namespace == s.ns && string(p.Phase) == phase
		})
		if err != nil {
			return err
		}
		p, _ := events.Decode[events.PipelineRun](e)
		if p.Cluster != cluster || p.Receiver != "tekton" {
			return fmt.Errorf("PipelineRun event %s: cluster %q receiver %q, want %q and tekton", e.ID(), p.Cluster, p.Receiver, cluster)
		}
		if phase == string(events.PipelineRunSucceeded) && !slices.Contains([]string{"Succeeded", "Completed"}, p.Reason) {
			return fmt.Errorf("PipelineRun event %s: reason %q, want Succeeded", e.ID(), p.Reason)
		}
	}
	return nil
}
