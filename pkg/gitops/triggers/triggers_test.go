package triggers

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/testkit/gittest"
)

const registry = "registry.example.com"

// deployments is a KubeCD repository: kafka tracks patch levels of its
// image (its repository in the values file), kafkaesque the newest tag of
// the image its chart names.
var deployments = map[string]string{
	"environments.yaml": `environments:
  - {name: staging, clusterName: c1, releases: [releases.yaml]}
  - {name: prod, clusterName: c2, releases: [releases.yaml]}
clusters:
  - {name: c1, provider: {existingContext: {contextName: c1}}}
  - {name: c2, provider: {existingContext: {contextName: c2}}}
`,
	"releases.yaml": `# Releases of both environments.
releases:
  - name: kafka
    chart:
      dir: ./charts/kafka
    valuesFile: ./kafka-values.yaml
    values:
      - key: image.tag
        value: "4.0"   # pinned by hand
    triggers:
      - image:
          track: PatchLevel

  - name: kafkaesque
    chart:
      dir: ./charts/kafkaesque
    triggers:
      - image:
          track: Newest
`,
	"kafka-values.yaml":                  "image: {repository: " + registry + "/kafka}\n",
	"charts/kafka/Chart.yaml":            "apiVersion: v2\nname: kafka\nversion: 1.0.0\n",
	"charts/kafka/values.yaml":           "image: {repository: default/kafka, tag: latest}\n",
	"charts/kafkaesque/Chart.yaml":       "apiVersion: v2\nname: kafkaesque\nversion: 1.0.0\n",
	"charts/kafkaesque/values.yaml":      "image: {repository: " + registry + "/kafkaesque, tag: latest}\n",
	"charts/kafka/templates/x.yaml":      "",
	"charts/kafkaesque/templates/x.yaml": "",
}

// setup makes the repository (bare, as a git host has it), a checkout of
// it for kubecd.dir, and the config serving it.
func setup(t *testing.T) (*config.Config, string) {
	t.Helper()
	url := gittest.NewRepo(t, deployments)
	dir := t.TempDir()
	for p, c := range deployments {
		full := filepath.Join(dir, "checkout", filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), []byte("apiVersion: v1\nkind: Config\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TRIGGERS_TEST_SECRET", "s")
	cfg, err := config.Parse([]byte(`receivers:
  - {name: registry, type: distribution, secret: {env: TRIGGERS_TEST_SECRET}}
  - {name: flagger, type: flagger, secret: {env: TRIGGERS_TEST_SECRET}}
kubecd:
  dir: checkout
  kubeconfig: kubeconfig
  application:
    source: {git: {url: "`+url+`", branch: main}}
`), dir)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, url
}

func verified(t *testing.T, image, tag string) cloudevents.Event {
	t.Helper()
	e, err := events.New("push-"+tag, "/test", events.TypeImageVerified, events.ImageVerified{Image: image, Tag: tag, Digest: "sha256:" + tag})
	if err != nil {
		t.Fatal(err)
	}
	e.SetSubject(image + ":" + tag)
	return e
}

// got is what Handle answered, as "type application-or-commit: reason".
func summary(t *testing.T, out []cloudevents.Event) []string {
	t.Helper()
	var s []string
	for _, e := range out {
		switch e.Type() {
		case events.TypeRolloutSkipped:
			p, err := events.Decode[events.RolloutSkipped](e)
			if err != nil {
				t.Fatal(err)
			}
			s = append(s, "skipped "+p.Application+": "+p.Reason)
		case events.TypeGitPushed:
			p, err := events.Decode[events.GitPushed](e)
			if err != nil {
				t.Fatal(err)
			}
			s = append(s, "pushed "+p.Branch+" "+p.After+" by "+p.Pusher+" subject "+e.Subject())
		default:
			s = append(s, e.Type())
		}
	}
	return s
}

// TestUpgrader pushes tags of the tracked images in turn: a tag the track
// refuses is skipped, saying why, and the branch stays; a tag it accepts
// is committed to the release's values in releases.yaml (comments kept,
// an entry appended where there was none) and answered with the commit's
// push; the same tag again is the current one.
func TestUpgrader(t *testing.T) {
	cfg, url := setup(t)
	u := New(cfg, Git{Mirror: gitops.NewMirror(t.TempDir())}, nil)
	ctx := context.Background()
	seed := gittest.Head(t, url).Hash.String()
	for _, step := range []struct {
		name, image, tag string
		want             []string // "{head}" is the branch's head after the step
		file             string   // releases.yaml at the head after the step; "" unchanged
	}{{
		name: "a minor upgrade PatchLevel refuses", image: registry + "/kafka", tag: "4.1.0",
		want: []string{"skipped kafka: KubeCD trigger: environment prod: 4.1.0 is a minor upgrade of 4.0; track PatchLevel allows patch upgrades only; environment staging: 4.1.0 is a minor upgrade of 4.0; track PatchLevel allows patch upgrades only"},
	}, {
		name: "a patch PatchLevel takes", image: registry + "/kafka", tag: "4.0.1",
		want: []string{"pushed main {head} by " + Pusher + " subject " + config.DisplayURL(url) + "#refs/heads/main"},
		file: replace(deployments["releases.yaml"], `value: "4.0"   # pinned by hand`, `value: "4.0.1"   # pinned by hand`),
	}, {
		name: "the same tag again", image: registry + "/kafka", tag: "4.0.1",
		want: []string{"skipped kafka: KubeCD trigger: environment prod: 4.0.1 is the current version; environment staging: 4.0.1 is the current version"},
	}, {
		name: "the newest tag of the chart's image", image: registry + "/kafkaesque", tag: "build-7",
		want: []string{"pushed main {head} by " + Pusher + " subject " + config.DisplayURL(url) + "#refs/heads/main"},
		file: replace(replace(deployments["releases.yaml"], `value: "4.0"   # pinned by hand`, `value: "4.0.1"   # pinned by hand`),
			"          track: Newest\n", "          track: Newest\n    values:\n      - key: image.tag\n        value: build-7\n"),
	}, {
		name: "an image no trigger tracks", image: registry + "/other", tag: "1.0.0",
	}} {
		t.Run(step.name, func(t *testing.T) {
			before := gittest.Head(t, url)
			out, err := u.Handle(ctx, verified(t, step.image, step.tag))
			if err != nil {
				t.Fatal(err)
			}
			head := gittest.Head(t, url)
			var want []string
			for _, w := range step.want {
				want = append(want, strings.ReplaceAll(w, "{head}", head.Hash.String()))
			}
			if d := cmp.Diff(want, summary(t, out)); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
			if step.file == "" {
				if head.Hash != before.Hash {
					t.Errorf("the branch moved to %s", head.Hash)
				}
				return
			}
			if d := cmp.Diff(step.file, gittest.File(t, head, "releases.yaml")); d != "" {
				t.Errorf("releases.yaml (-want +got):\n%s", d)
			}
			if head.NumParents() != 1 || head.ParentHashes[0] != before.Hash {
				t.Errorf("commit %s: want one commit on %s", head.Hash, before.Hash)
			}
		})
	}
	if seed == gittest.Head(t, url).Hash.String() {
		t.Error("nothing was committed")
	}
}

// replace is s with its one occurrence of from replaced by to.
func replace(s, from, to string) string {
	if strings.Count(s, from) != 1 {
		panic("want one " + from)
	}
	return strings.Replace(s, from, to, 1)
}
