package features

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

// manifestsPath is the kustomize base, generated from the chart.
const manifestsPath = "../deploy/manifests"

// installKustomize installs flotilla as `kubectl apply -k` of an overlay of
// the kustomize base does it for a user: the overlay supplies what the
// base's kustomization.yaml asks for (the ConfigMap flotilla-config
// replaced by the scenario's config, the Secret flotilla-secrets from the
// config's secret files; the kubeconfigs' Secret prepareInstall made), the
// image by digest, and patches for this fleet (the real node, the
// Service's fixed address and port, a small claim).
func (s *scenario) installKustomize(ctx context.Context) error {
	in, err := s.prepareInstall(ctx)
	if err != nil {
		return err
	}
	dir := filepath.Join(s.w.dir, "kustomize")
	if err := writeOverlay(dir, in); err != nil {
		return err
	}
	kubectl := filepath.Join(localfleet.BinDir(), "kubectl-"+localfleet.KubeVersion)
	start := time.Now()
	cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", in.d.Kubeconfig, "apply", "-k", filepath.Join(dir, "overlay"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl apply -k: %w\n%s", err, out)
	}
	return s.installed(ctx, in, "kubectl apply -k", start)
}

// writeOverlay writes dir/base (a copy of deploy/manifests, as a user's
// repository vendors or references it) and dir/overlay.
func writeOverlay(dir string, in *install) error {
	base := filepath.Join(dir, "base")
	overlay := filepath.Join(dir, "overlay")
	for _, d := range []string{base, filepath.Join(overlay, "secrets")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(manifestsPath)
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(manifestsPath, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(base, e.Name()), b, 0o600); err != nil {
			return err
		}
	}
	cfg, err := yaml.Marshal(in.cfg)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(overlay, "config.yaml"), cfg, 0o600); err != nil {
		return err
	}
	// The base's API token (apiToken.existingSecret: flotilla-api-token),
	// as its kustomization.yaml says to supply it.
	if err := os.WriteFile(filepath.Join(overlay, "token"), []byte(randomHex(20)), 0o600); err != nil {
		return err
	}
	var secretFiles []string
	for name, content := range in.secrets {
		if err := os.WriteFile(filepath.Join(overlay, "secrets", name), []byte(content), 0o600); err != nil {
			return err
		}
		secretFiles = append(secretFiles, "secrets/"+name)
	}
	d := in.d
	repo, digest, _ := strings.Cut(d.image, "@")
	deployment := []map[string]any{
		{"op": "add", "path": "/spec/template/spec/nodeSelector", "value": map[string]string{localfleet.RealNodeLabel: "true"}},
		{"op": "add", "path": "/spec/template/spec/tolerations", "value": []map[string]string{{
			"key": localfleet.RealNodeTaint, "operator": "Exists", "effect": "NoSchedule",
		}}},
		{"op": "test", "path": "/spec/template/spec/containers/0/args/2", "value": "--listen=0.0.0.0:8080"},
		{"op": "replace", "path": "/spec/template/spec/containers/0/args/2", "value": fmt.Sprintf("--listen=0.0.0.0:%d", d.port)},
		{"op": "replace", "path": "/spec/template/spec/containers/0/ports/0/containerPort", "value": d.port},
	}
	service := []map[string]any{
		{"op": "add", "path": "/spec/clusterIP", "value": in.serviceIP},
		{"op": "replace", "path": "/spec/ports/0/port", "value": d.port},
	}
	claim := []map[string]any{{"op": "replace", "path": "/spec/resources/requests/storage", "value": "64Mi"}}
	patch := func(kind, name string, ops []map[string]any) (map[string]any, error) {
		b, err := yaml.Marshal(ops)
		return map[string]any{"target": map[string]string{"kind": kind, "name": name}, "patch": string(b)}, err
	}
	var patches []any
	for _, p := range []struct {
		kind, name string
		ops        []map[string]any
	}{{"Deployment", "flotilla", deployment}, {"Service", "flotilla", service}, {"PersistentVolumeClaim", "flotilla-data", claim}} {
		pt, err := patch(p.kind, p.name, p.ops)
		if err != nil {
			return err
		}
		patches = append(patches, pt)
	}
	k, err := yaml.Marshal(map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"namespace":  d.Namespace,
		"resources":  []string{"../base"},
		"configMapGenerator": []map[string]any{{
			// The base's namespace: a generator's object replaces the
			// base's only when their namespaces match, before the
			// overlay's namespace applies to both.
			"name": "flotilla-config", "namespace": "flotilla", "behavior": "replace", "files": []string{"config.yaml"},
		}},
		"secretGenerator": []map[string]any{{"name": "flotilla-secrets", "files": secretFiles}, {"name": "flotilla-api-token", "files": []string{"token"}}},
		"images":          []map[string]string{{"name": "ghcr.io/flotilla-cd/flotilla", "newName": repo, "digest": digest}},
		"patches":         patches,
	})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), k, 0o600)
}
