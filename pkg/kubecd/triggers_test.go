package kubecd

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/versionpolicy"
)

// TestPolicy: KubeCD's tracks are flotilla's tracks of the same names;
// anything else is refused.
func TestPolicy(t *testing.T) {
	for _, tc := range []struct {
		track string
		want  versionpolicy.Track
		err   bool
	}{
		{track: "PatchLevel", want: versionpolicy.PatchLevel},
		{track: "MinorVersion", want: versionpolicy.MinorVersion},
		{track: "MajorVersion", want: versionpolicy.MajorVersion},
		{track: "Newest", want: versionpolicy.Newest},
		{track: "Latest", err: true},
		{track: "", err: true},
	} {
		t.Run(tc.track, func(t *testing.T) {
			got, err := Policy(tc.track)
			if tc.err != (err != nil) || tc.err && !errors.Is(err, ErrInvalid) {
				t.Fatalf("Policy(%q) = %v, want an error: %v", tc.track, err, tc.err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Policy(%q) (-want +got):\n%s", tc.track, d)
			}
		})
	}
}

// TestImageDecide: a pushed tag replaces the release's tag as the
// trigger's track (flotilla's of that name) says, the design document's
// examples included; a current tag that is no version yields to any
// version, as KubeCD has it.
func TestImageDecide(t *testing.T) {
	type decision struct {
		Accept bool
		Reason string
	}
	for _, tc := range []struct {
		name, track, current, candidate string
		want                            decision
	}{
		{"patch level: the design's 5.7.15 over 5.7.14", "PatchLevel", "5.7.14", "5.7.15", decision{true, "5.7.15 is a patch upgrade of 5.7.14; track PatchLevel allows it"}},
		{"patch level: not 5.8.0", "PatchLevel", "5.7.14", "5.8.0", decision{false, "5.8.0 is a minor upgrade of 5.7.14; track PatchLevel allows patch upgrades only"}},
		{"patch level: 4.0.1 over kafka's 4.0", "PatchLevel", "4.0", "4.0.1", decision{true, "4.0.1 is a patch upgrade of 4.0; track PatchLevel allows it"}},
		{"minor version: v prefix", "MinorVersion", "v1.2.3", "v1.3.0", decision{true, "v1.3.0 is a minor upgrade of v1.2.3; track MinorVersion allows it"}},
		{"minor version: not a major", "MinorVersion", "1.2.3", "2.0.0", decision{false, "2.0.0 is a major upgrade of 1.2.3; track MinorVersion allows minor and patch upgrades only"}},
		{"major version: older", "MajorVersion", "2.0.0", "1.9.9", decision{false, "1.9.9 is older than the current 2.0.0"}},
		{"newest: a build id", "Newest", "v20170911-0926", "v20170912-1000", decision{true, "v20170912-1000 is newer than the current v20170911-0926; track Newest follows the most recently pushed tag"}},
		{"newest: the same tag", "Newest", "latest", "latest", decision{false, "latest is the current tag"}},
		{"patch level over latest, as KubeCD", "PatchLevel", "latest", "4.0.1", decision{true, `4.0.1 is a version and the current tag "latest" is not; KubeCD takes any version as newer than it (track PatchLevel)`}},
		{"patch level: a build id over latest is no version", "PatchLevel", "latest", "nightly", decision{false, `"nightly" is not a semantic version (X, X.Y or X.Y.Z, optionally prefixed with v)`}},
		{"no tag in the values", "PatchLevel", "", "1.0.0", decision{true, "1.0.0 is a version and nothing is deployed yet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Image{Track: tc.track, Tag: tc.current}.Decide(tc.candidate)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, decision{d.Accept, d.Reason}); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

// TestImages resolves each trigger's repository and tag from the values
// a cluster renders with (the chart's, the environment's, the release's
// values file and values, later ones winning; the registry prefix before
// the repository), and refuses a trigger whose repository they do not
// give.
func TestImages(t *testing.T) {
	files := map[string]string{
		"environments.yaml": `environments:
  - name: staging
    provider: {minikube: {}}
    releases: [releases.yaml]
    defaultValues:
      - {key: image.prefix, value: "registry.example.com/"}
  - name: prod
    provider: {minikube: {}}
    kubeNamespace: prod
    releases: [releases.yaml]
`,
		"releases.yaml": `releases:
  - name: kafka
    chart: {dir: charts/kafka}
    valuesFile: kafka-values.yaml
    values:
      - key: image.tag
        value: "4.0"
    triggers:
      - image: {track: PatchLevel}
      - image:
          track: PatchLevel
          repoValue: zookeeper.image.repository
          tagValue: zookeeper.image.tag
  - name: web
    chart: {dir: charts/web}
    values:
      - {key: image, value: nginx}
      - {key: imageTag, value: 1.25}
    triggers:
      - image: {track: MinorVersion, repoValue: image, tagValue: imageTag, repoPrefixValue: registry}
`,
		"kafka-values.yaml":             "image: {repository: confluentinc/cp-kafka}\nzookeeper: {image: {repository: confluentinc/cp-zookeeper, tag: 4.0.1}}\n",
		"charts/kafka/values.yaml":      "image: {repository: default/kafka, tag: latest}\n",
		"charts/web/values.yaml":        "registry: mirror.example.com/\n",
		"charts/kafka/Chart.yaml":       "apiVersion: v2\nname: kafka\nversion: 1.0.0\n",
		"charts/web/templates/cm.yaml":  "",
		"charts/kafka/templates/d.yaml": "",
	}
	dir := writeFiles(t, files)
	f, err := Load(dir, DefaultEnvironmentsFile)
	if err != nil {
		t.Fatal(err)
	}
	var got []Image
	for i := range f.Environments {
		e := &f.Environments[i]
		for _, r := range e.Releases {
			imgs, err := f.Images(dir, e, r)
			if err != nil {
				t.Fatalf("%s/%s: %v", e.Name, r.Name, err)
			}
			got = append(got, imgs...)
		}
	}
	want := []Image{
		{Environment: "staging", Release: "kafka", File: "releases.yaml", Trigger: 0, Track: "PatchLevel", Repository: "registry.example.com/confluentinc/cp-kafka", Tag: "4.0", TagValue: "image.tag"},
		{Environment: "staging", Release: "kafka", File: "releases.yaml", Trigger: 1, Track: "PatchLevel", Repository: "confluentinc/cp-zookeeper", Tag: "4.0.1", TagValue: "zookeeper.image.tag"},
		{Environment: "staging", Release: "web", File: "releases.yaml", Trigger: 0, Track: "MinorVersion", Repository: "mirror.example.com/nginx", Tag: "1.25", TagValue: "imageTag"},
		{Environment: "prod", Release: "kafka", File: "releases.yaml", Trigger: 0, Track: "PatchLevel", Repository: "confluentinc/cp-kafka", Tag: "4.0", TagValue: "image.tag"},
		{Environment: "prod", Release: "kafka", File: "releases.yaml", Trigger: 1, Track: "PatchLevel", Repository: "confluentinc/cp-zookeeper", Tag: "4.0.1", TagValue: "zookeeper.image.tag"},
		{Environment: "prod", Release: "web", File: "releases.yaml", Trigger: 0, Track: "MinorVersion", Repository: "mirror.example.com/nginx", Tag: "1.25", TagValue: "imageTag"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Images (-want +got):\n%s", d)
	}

	for _, tc := range []struct {
		name, releases string
		want           []string
	}{{
		name:     "no repository in the values",
		releases: "releases:\n  - name: r\n    chart: {dir: charts/web}\n    triggers:\n      - image: {track: Newest}\n",
		want:     []string{`releases.yaml: release r of environment staging: triggers[0].image.repoValue: "image.repository" has no value in the release's values (the chart's values.yaml, the environment's defaults, valuesFile and values): set it, flotilla must know which image the trigger tracks`},
	}, {
		name:     "a chart reference's values are not read",
		releases: "releases:\n  - name: r\n    chart: {reference: \"oci://r.example.com/c/x\", version: 1.0.0}\n    triggers:\n      - image: {track: Newest}\n",
		want:     []string{`releases.yaml: release r of environment staging: triggers[0].image.repoValue: "image.repository" has no value in the release's values (the environment's defaults, valuesFile and values; a chart reference's own values are not read): set it, flotilla must know which image the trigger tracks`},
	}, {
		name:     "a repository that is a map",
		releases: "releases:\n  - name: r\n    chart: {dir: charts/web}\n    values:\n      - {key: image.repository.name, value: x}\n    triggers:\n      - image: {track: Newest}\n",
		want:     []string{`releases.yaml: release r of environment staging: triggers[0].image.repoValue: "image.repository" is map[name:x], not an image repository`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"environments.yaml": "environments:\n  - name: staging\n    provider: {minikube: {}}\n    releases: [releases.yaml]\n", "releases.yaml": tc.releases, "charts/web/values.yaml": "x: 1\n"}
			dir := writeFiles(t, files)
			f, err := Load(dir, DefaultEnvironmentsFile)
			if err != nil {
				t.Fatal(err)
			}
			e := &f.Environments[0]
			_, err = f.Images(dir, e, e.Releases[0])
			var kerr *Error
			if !errors.As(err, &kerr) {
				t.Fatalf("got %v, want an *Error", err)
			}
			if d := cmp.Diff(tc.want, kerr.Problems); d != "" {
				t.Errorf("problems (-want +got):\n%s", d)
			}
		})
	}
}
