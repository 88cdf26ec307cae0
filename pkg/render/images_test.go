package render

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

func obj(kind, name string, spec map[string]any, path ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind, "metadata": map[string]any{"name": name}}}
	if spec != nil {
		_ = unstructured.SetNestedField(u.Object, spec, path...)
	}
	return u
}

func containers(field string, images ...string) map[string]any {
	var cs []any
	for i, img := range images {
		cs = append(cs, map[string]any{"name": string(rune('a' + i)), "image": img})
	}
	return map[string]any{field: cs}
}

func TestImages(t *testing.T) {
	objs := []*unstructured.Unstructured{
		obj("Deployment", "web", map[string]any{
			"initContainers": []any{map[string]any{"name": "init", "image": "busybox:1.36"}},
			"containers":     []any{map[string]any{"name": "web", "image": "registry.example.com/web@sha256:" + strings.Repeat("a", 64)}},
		}, "spec", "template", "spec"),
		obj("CronJob", "backup", containers("containers", "registry.example.com/tools/backup:2"), "spec", "jobTemplate", "spec", "template", "spec"),
		obj("Pod", "debug", containers("ephemeralContainers", "evil.example.com/miner:1"), "spec"),
		obj("ConfigMap", "config", nil),
	}
	want := []Image{
		{"Deployment web", "init", "busybox:1.36"},
		{"Deployment web", "web", "registry.example.com/web@sha256:" + strings.Repeat("a", 64)},
		{"CronJob backup", "a", "registry.example.com/tools/backup:2"},
		{"Pod debug", "a", "evil.example.com/miner:1"},
	}
	if diff := cmp.Diff(want, Images(objs)); diff != "" {
		t.Errorf("Images (-want +got):\n%s", diff)
	}
	tests := []struct {
		name    string
		allowed []string
		wantErr string
	}{
		{name: "no patterns: any image"},
		{name: "every repository allowed", allowed: []string{`registry\.example\.com/.*`, `index\.docker\.io/library/busybox`, `evil\.example\.com/miner`}},
		{name: "a pattern matches whole repositories only", allowed: []string{`registry\.example\.com/web`, `index\.docker\.io/library/busybox`, `evil\.example\.com/miner`},
			wantErr: "CronJob backup, container a: image registry.example.com/tools/backup:2 is not allowed (repository registry.example.com/tools/backup matches none of"},
		{name: "Docker Hub's short names are normalized", allowed: []string{`registry\.example\.com/.*`},
			wantErr: "Deployment web, container init: image busybox:1.36 is not allowed (repository index.docker.io/library/busybox"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckImages(objs, tt.allowed)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckImages() = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrRender) || !fault.IsPermanent(err) {
				t.Errorf("CheckImages() = %v, want a permanent ErrRender containing %q", err, tt.wantErr)
			}
		})
	}
}
