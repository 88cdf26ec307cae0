package bootstrap

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/flotilla-cd/flotilla/pkg/kube"
)

// FlaggerVersion is the Flagger release flotilla is tested with; bootstrap
// installs its manifests (manifests/flagger) and image.
const FlaggerVersion = "1.41.0"

// LoadTesterVersion is the image tag of Flagger's load tester in
// manifests/loadtester (Flagger v1.41.0's).
const LoadTesterVersion = "0.35.0"

// FlaggerImage and LoadTesterImage are the images bootstrap runs.
const (
	FlaggerImage    = "ghcr.io/fluxcd/flagger"
	LoadTesterImage = "ghcr.io/fluxcd/flagger-loadtester"
)

//go:embed manifests/flagger/*.yaml manifests/loadtester/*.yaml
var manifests embed.FS

// flaggerArgs are the controller's arguments: those of Flagger's own
// kustomize/kubernetes overlay, with the mesh provider, the metrics server
// and the cluster's name filled in.
func flaggerArgs(provider, metricsServer, cluster string) []string {
	return []string{
		"-log-level=info",
		"-include-label-prefix=app.kubernetes.io",
		"-mesh-provider=" + provider,
		"-metrics-server=" + metricsServer,
		"-cluster-name=" + cluster,
	}
}

// flaggerObjects builds Flagger's base with kustomize, as its
// kustomize/kubernetes overlay does: into namespace (which the overlay
// creates, labelled as Flagger's), at FlaggerVersion, with args.
func flaggerObjects(namespace string, args []string) ([]*unstructured.Unstructured, error) {
	patch := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: flagger\nspec:\n  template:\n    spec:\n      containers:\n        - name: flagger\n          args:\n"
	for _, a := range args {
		patch += fmt.Sprintf("            - %q\n", a)
	}
	k := fmt.Sprintf(`namespace: %s
labels:
  - pairs:
      app: flagger
    includeSelectors: true
resources:
  - namespace.yaml
  - account.yaml
  - rbac.yaml
  - crd.yaml
  - deployment.yaml
images:
  - name: %s
    newTag: %s
patches:
  - path: patch.yaml
`, namespace, FlaggerImage, FlaggerVersion)
	files := map[string]string{
		"kustomization.yaml": k,
		"patch.yaml":         patch,
		"namespace.yaml":     namespaceYAML(namespace, true),
	}
	return build("manifests/flagger", files)
}

// loadTesterObjects builds Flagger's load tester (kustomize/tester) into
// namespace, which it creates.
func loadTesterObjects(namespace string) ([]*unstructured.Unstructured, error) {
	k := fmt.Sprintf(`namespace: %s
resources:
  - namespace.yaml
  - service.yaml
  - deployment.yaml
images:
  - name: %s
    newTag: %s
`, namespace, LoadTesterImage, LoadTesterVersion)
	return build("manifests/loadtester", map[string]string{
		"kustomization.yaml": k,
		"namespace.yaml":     namespaceYAML(namespace, false),
	})
}

// namespaceYAML is a Namespace; Flagger's carries the labels and annotation
// Flagger's overlay gives it, which keep meshes from injecting sidecars
// into Flagger.
func namespaceYAML(name string, flagger bool) string {
	s := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + name + "\n"
	if flagger {
		s += "  annotations:\n    linkerd.io/inject: disabled\n  labels:\n    istio-injection: disabled\n    appmesh.k8s.aws/sidecarInjectorWebhook: disabled\n"
	}
	return s
}

// build runs kustomize over the embedded directory dir plus extra files, in
// memory, and decodes the result.
func build(dir string, extra map[string]string) ([]*unstructured.Unstructured, error) {
	mem := filesys.MakeFsInMemory()
	entries, err := fs.ReadDir(manifests, dir)
	if err != nil {
		return nil, fmt.Errorf("reading embedded %s: %w", dir, err)
	}
	for _, e := range entries {
		b, err := fs.ReadFile(manifests, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading embedded %s: %w", e.Name(), err)
		}
		if err := mem.WriteFile(path.Join("/k", e.Name()), b); err != nil {
			return nil, err
		}
	}
	for name, content := range extra {
		if err := mem.WriteFile(path.Join("/k", name), []byte(content)); err != nil {
			return nil, err
		}
	}
	// kustomize build's order: Namespaces, CRDs, ... Deployments.
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy
	rm, err := krusty.MakeKustomizer(opts).Run(mem, "/k")
	if err != nil {
		return nil, fmt.Errorf("building %s: %w", strings.TrimPrefix(dir, "manifests/"), err)
	}
	y, err := rm.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", dir, err)
	}
	return kube.Decode(y)
}
