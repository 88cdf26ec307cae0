package gitops

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// seedReleases is KubeCD's release file as its design document writes it
// (config/examples/kubecd/analytics/releases.yaml).
const seedReleases = `# KubeCD's release file example.
resourceFiles:
  - storage-fast.yaml

releases:

  - name: clickhouse
    chart:
      dir: ./charts/clickhouse
    values:
      - key: image.tag
        value: "1.1"

  - name: kafkaesque
    chart:
      dir: ./charts/kafkaesque
    triggers:
      - image:
          track: Newest
    
  - name: kafka
    chart:
      dir: ../charts/kafka
    valuesFile: ./kafka/values-prod.yaml
    values:
      - key: image.tag
        value: "4.0"
    triggers:
      - image:
          tagValue: "image.tag"
          repoValue: "image.repository"
          track: PatchLevel
      - image:
          tagValue: "zookeeper.image.tag"
          repoValue: "zookeeper.image.repository"
          track: PatchLevel
`

// TestKubeCDValue writes a pushed tag into a release's values in a KubeCD
// release file: the entry of its key replaced in place, else one
// appended, else a values list added; everything else stays byte for
// byte (comments, blank lines, the trailing blanks of the seed's file).
func TestKubeCDValue(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit KubeCDValue
		tag  string
		src  string
		want string
	}{{
		name: "the entry's value replaced",
		edit: KubeCDValue{Release: "kafka", Key: "image.tag"}, tag: "4.0.1", src: seedReleases,
		want: replace(seedReleases, `        value: "4.0"`, `        value: "4.0.1"`),
	}, {
		name: "an entry appended",
		edit: KubeCDValue{Release: "kafka", Key: "zookeeper.image.tag"}, tag: "4.0.2", src: seedReleases,
		want: replace(seedReleases, "        value: \"4.0\"\n", "        value: \"4.0\"\n      - key: zookeeper.image.tag\n        value: \"4.0.2\"\n"),
	}, {
		name: "a values list added",
		edit: KubeCDValue{Release: "kafkaesque", Key: "image.tag"}, tag: "v20170912-1000", src: seedReleases,
		want: replace(seedReleases, "          track: Newest\n", "          track: Newest\n    values:\n      - key: image.tag\n        value: v20170912-1000\n"),
	}, {
		name: "a tag that reads as a number is quoted",
		edit: KubeCDValue{Release: "kafkaesque", Key: "image.tag"}, tag: "1.10", src: seedReleases,
		want: replace(seedReleases, "          track: Newest\n", "          track: Newest\n    values:\n      - key: image.tag\n        value: \"1.10\"\n"),
	}, {
		name: "flow style",
		edit: KubeCDValue{Release: "web", Key: "image.tag"}, tag: "1.2.0",
		src:  "releases:\n  - name: web\n    chart: {dir: web}\n    values:\n      - {key: image.repository, value: nginx}\n      - {key: image.tag, value: '1.1'}\n",
		want: "releases:\n  - name: web\n    chart: {dir: web}\n    values:\n      - {key: image.repository, value: nginx}\n      - {key: image.tag, value: '1.2.0'}\n",
	}, {
		name: "a flow list gets a flow entry",
		edit: KubeCDValue{Release: "web", Key: "image.tag"}, tag: "1.2.0",
		src:  "releases:\n  - {name: web, chart: {dir: web}, values: [{key: image.repository, value: nginx}]}\n",
		want: "releases:\n  - {name: web, chart: {dir: web}, values: [{key: image.repository, value: nginx}, {key: image.tag, value: 1.2.0}]}\n",
	}, {
		name: "refused by Accept: unchanged",
		edit: KubeCDValue{Release: "kafka", Key: "image.tag", Accept: func(current string) bool { return current != "4.0" }}, tag: "4.0.1", src: seedReleases,
		want: seedReleases,
	}, {
		name: "the same tag: unchanged",
		edit: KubeCDValue{Release: "clickhouse", Key: "image.tag"}, tag: "1.1", src: seedReleases,
		want: seedReleases,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			out, changed, err := tc.edit.Apply([]byte(tc.src), Image{Repository: "registry.example.com/x", Tag: tc.tag, Digest: newDigest})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, string(out)); d != "" {
				t.Errorf("Apply (-want +got):\n%s", d)
			}
			if changed != (tc.want != tc.src) {
				t.Errorf("changed = %v", changed)
			}
		})
	}
}

func TestKubeCDValueErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit KubeCDValue
		src  string
		want error
	}{
		{"no such release", KubeCDValue{Release: "nope", Key: "image.tag"}, seedReleases, ErrPathNotFound},
		{"no releases", KubeCDValue{Release: "kafka", Key: "image.tag"}, "resourceFiles: [a.yaml]\n", ErrPathNotFound},
		{"values not a list", KubeCDValue{Release: "r", Key: "image.tag"}, "releases:\n  - name: r\n    values: {image: x}\n", ErrInvalidYAML},
		{"no key", KubeCDValue{Release: "r"}, "releases: []\n", ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := tc.edit.Apply([]byte(tc.src), Image{Repository: "registry.example.com/x", Tag: "1.0"})
			if !errors.Is(err, tc.want) || !IsPermanent(err) {
				t.Errorf("got %v, want a permanent %v", err, tc.want)
			}
		})
	}
}

// replace is s with its one occurrence of from replaced by to.
func replace(s, from, to string) string {
	if strings.Count(s, from) != 1 {
		panic("want one " + from)
	}
	return strings.Replace(s, from, to, 1)
}
