package gitops

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/*.after.yaml from what the edits produce")

const (
	oldDigest = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
	newDigest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
)

var api = Image{Repository: "registry.example.com/team/api", Tag: "1.4.2", Digest: newDigest}

// TestEdits applies each edit to testdata/<name>.before.yaml and compares
// the result with <name>.after.yaml, byte for byte. The after files differ
// from the before files only in the changed scalars (diff them to see).
func TestEdits(t *testing.T) {
	tests := []struct {
		name string
		edit Edit
		img  Image
	}{
		{"kustomize-update", Kustomize{}, api},
		{"kustomize-append", Kustomize{}, api},
		{"kustomize-add-keys", Kustomize{}, api},
		{"kustomize-no-images", Kustomize{}, api},
		{"kustomize-flow", Kustomize{}, api},
		{"kustomize-flow-entry", Kustomize{}, api},
		{"kustomize-newname", Kustomize{Name: "api", NewName: "registry.example.com/team/api", TagOnly: true}, api},
		{"kustomize-tagonly", Kustomize{TagOnly: true}, api},
		{"kustomize-null", Kustomize{}, api},
		{"kustomize-by-newname", Kustomize{}, Image{Repository: "mirror.example.com/team/worker", Tag: "1.0.0"}},
		{"helm-default", HelmValues{}, api},
		{"helm-trigger", HelmValues{RepoValue: "zookeeper.image.repository", TagValue: "zookeeper.image.tag"},
			Image{Repository: "registry.example.com/zookeeper", Tag: "3.4.11"}},
		{"helm-mysql", HelmValues{RepoValue: "image", TagValue: "imageTag"}, Image{Repository: "docker.io/library/mysql", Tag: "5.7.15"}},
		{"helm-subchart", HelmValues{Prefix: "api."}, api},
		{"helm-subchart-tagonly", HelmValues{Prefix: "worker.", TagOnly: true},
			Image{Repository: "registry.example.com/team/worker", Tag: "0.9.2", Digest: newDigest}},
		{"helm-prefix", HelmValues{}, Image{Repository: "registry.example.com/team/api", Tag: "v1.4.2"}},
		{"helm-prefix-moved", HelmValues{}, Image{Repository: "registry.example.com/team/api-v2", Tag: "v2.0.0"}},
		{"helm-digest-value", HelmValues{DigestValue: "image.digest"}, api},
		{"helm-quirks", HelmValues{}, Image{Repository: "registry.example.com/team/api", Tag: "1.11"}},
		{"helm-quirks-anchor", HelmValues{TagValue: "defaults.tag"}, Image{Repository: "registry.example.com/team/api", Tag: "1.4.2"}},
		{"helm-quirks-unicode", HelmValues{TagValue: "über.tag", RepoValue: "über.repository"}, api},
		{"helm-empty-tag", HelmValues{}, api},
		{"helm-empty-tag-flow", HelmValues{Prefix: "worker.", TagValue: "tag", TagOnly: true}, api},
		{"kustomize-empty-values", Kustomize{TagOnly: true}, api},
		{"helm-int-tag", HelmValues{TagOnly: true}, Image{Repository: "registry.example.com/team/api", Tag: "1.10", Digest: newDigest}},
		{"helm-new-repository", HelmValues{}, Image{Repository: "registry.example.com/team/api-next", Tag: "2.0.0"}},
		{"manifest-multidoc", Manifest{}, api},
		{"manifest-dockerhub", Manifest{}, Image{Repository: "docker.io/library/nginx", Tag: "1.27"}},
		{"manifest-container", Manifest{Container: "api", TagOnly: true}, Image{Repository: "localhost:5000/team/api", Tag: "1.4.2", Digest: newDigest}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := readTestdata(t, tt.name, "before")
			got, changed, err := tt.edit.Apply(before, tt.img)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if !changed {
				t.Fatal("Apply reported no change")
			}
			afterPath := testdataPath(tt.name, "after")
			if *update {
				if err := os.WriteFile(afterPath, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want := readTestdata(t, tt.name, "after")
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("Apply: (-want +got)\n%s", diff)
			}

			again, changed, err := tt.edit.Apply(got, tt.img)
			if err != nil || changed || !bytes.Equal(again, got) {
				t.Errorf("second Apply = changed %v, err %v, same bytes %v; want an idempotent no-op",
					changed, err, bytes.Equal(again, got))
			}
		})
	}
}

// TestEditsCRLF checks that a file with Windows line endings keeps them.
func TestEditsCRLF(t *testing.T) {
	for _, name := range []string{"kustomize-update", "kustomize-append", "kustomize-no-images", "helm-default", "manifest-multidoc"} {
		t.Run(name, func(t *testing.T) {
			crlf := func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")) }
			edit := map[bool]Edit{true: Manifest{}, false: Kustomize{}}[strings.HasPrefix(name, "manifest")]
			if strings.HasPrefix(name, "helm") {
				edit = HelmValues{}
			}
			got, changed, err := edit.Apply(crlf(readTestdata(t, name, "before")), api)
			if err != nil || !changed {
				t.Fatalf("Apply = changed %v, err %v", changed, err)
			}
			want := crlf(readTestdata(t, name, "after"))
			if name == "kustomize-no-images" { // its before file has no final newline
				want = bytes.Replace(want, []byte("comment\nimages:"), []byte("comment\r\nimages:"), 1)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("Apply: (-want +got)\n%s", diff)
			}
		})
	}
}

func TestEditsUnchanged(t *testing.T) {
	tests := []struct {
		name string
		edit Edit
		src  string
		img  Image
	}{
		{"kustomize current", Kustomize{}, "images:\n- name: registry.example.com/team/api\n  newTag: \"1.4.2\"\n  digest: " + newDigest + "\n", api},
		{"kustomize tag only", Kustomize{TagOnly: true}, "images:\n- name: registry.example.com/team/api\n  newTag: 1.4.2\n", api},
		{"helm number tag", HelmValues{}, "image:\n  tag: 5\n", Image{Repository: "r/a", Tag: "5"}},
		{"helm same repository spelled differently", HelmValues{TagOnly: true},
			"image:\n  repository: mysql\n  tag: \"5.7\"\n", Image{Repository: "index.docker.io/library/mysql", Tag: "5.7", Digest: newDigest}},
		{"manifest current", Manifest{}, "kind: Pod\nspec:\n  containers:\n  - image: registry.example.com/team/api:1.4.2@" + newDigest + "\n", api},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed, err := tt.edit.Apply([]byte(tt.src), tt.img)
			if err != nil || changed || string(got) != tt.src {
				t.Errorf("Apply = %q, changed %v, err %v; want the input unchanged", got, changed, err)
			}
		})
	}
}

func TestEditErrors(t *testing.T) {
	tests := []struct {
		name    string
		edit    Edit
		src     string
		img     Image
		wantErr error
		wantMsg string // a substring the message must have, naming the path
	}{
		{"helm missing tag", HelmValues{}, "image:\n  repository: x\n", api, ErrPathNotFound, `yaml path "image.tag"`},
		{"helm missing sub-chart", HelmValues{Prefix: "api."}, "image:\n  tag: x\n", api, ErrPathNotFound, `yaml path "api.image.tag": path not found (no "api"`},
		{"helm empty file", HelmValues{}, "", api, ErrPathNotFound, `yaml path "image.tag": path not found (empty file)`},
		{"helm tag is a mapping", HelmValues{}, "image:\n  tag:\n    name: x\n", api, ErrNotScalar, `yaml path "image.tag": not a scalar (a mapping)`},
		{"helm tag is an alias", HelmValues{}, "d: &d x\nimage:\n  tag: *d\n", api, ErrNotScalar, `(an alias)`},
		{"helm tag is a block scalar", HelmValues{}, "image:\n  tag: |\n    1.0\n", api, ErrNotScalar, `"image.tag"`},
		{"helm repository is a sequence", HelmValues{}, "image:\n  repository: [a]\n  tag: x\n", api, ErrNotScalar, `"image.repository"`},
		{"helm prefix mismatch", HelmValues{}, "image:\n  prefix: gcr.io/prod/\n  repository: api\n  tag: x\n", api, ErrNoMatch, `not under image.prefix "gcr.io/prod/"`},
		{"helm digest path missing", HelmValues{DigestValue: "image.digest"}, "image:\n  tag: x\n", api, ErrPathNotFound, `"image.digest"`},
		{"helm digest only image", HelmValues{}, "image:\n  tag: x\n", Image{Repository: "r/a", Digest: newDigest}, ErrInvalid, "no tag"},
		{"kustomize not a mapping", Kustomize{}, "- a\n", api, ErrInvalidYAML, "mapping"},
		{"kustomize images not a list", Kustomize{}, "images: {}\n", api, ErrInvalidYAML, `yaml path "images": invalid yaml: want a sequence, not a mapping`},
		{"kustomize newTag is a list", Kustomize{}, "images:\n- name: registry.example.com/team/api\n  newTag: [1]\n", api, ErrNotScalar, `yaml path "images.0.newTag": not a scalar (a sequence)`},
		{"manifest no match", Manifest{}, "kind: Pod\nspec:\n  containers:\n  - image: other/app:1\n", api, ErrNoMatch, "no container runs registry.example.com/team/api"},
		{"manifest no container of that name", Manifest{Container: "web"}, "kind: Pod\nspec:\n  containers:\n  - name: api\n    image: registry.example.com/team/api:1\n", api, ErrNoMatch, `no container named "web"`},
		{"invalid yaml", Manifest{}, "kind: Pod\nspec: [\n", api, ErrInvalidYAML, "line"},
		{"invalid image", Manifest{}, "kind: Pod\n", Image{Repository: "r/a:1", Tag: "2"}, ErrInvalid, "must not carry a tag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := tt.edit.Apply([]byte(tt.src), tt.img)
			t.Log(err)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Apply error = %v, want %v", err, tt.wantErr)
			}
			if !IsPermanent(err) {
				t.Errorf("IsPermanent(%v) = false, want true", err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Apply error = %q, want it to contain %q", err, tt.wantMsg)
			}
		})
	}
}

func testdataPath(name, which string) string {
	return filepath.Join("testdata", name+"."+which+".yaml")
}

func readTestdata(t *testing.T, name, which string) []byte {
	t.Helper()
	b, err := os.ReadFile(testdataPath(name, which))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
