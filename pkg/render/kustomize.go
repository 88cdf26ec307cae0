package render

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// kustomize builds each kustomization directory as `kustomize build` does,
// with kustomize's defaults: built-in generators and transformers only
// (helmCharts refused), files outside a kustomization's root refused.
func kustomize(dir string, paths []string) ([]*unstructured.Unstructured, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	var out []*unstructured.Unstructured
	for _, p := range paths {
		full, err := inside(dir, p)
		if err != nil {
			return nil, err
		}
		rm, err := k.Run(filesys.MakeFsOnDisk(), full)
		if err != nil {
			return nil, permanentf("%w: kustomize build %s: %w", ErrRender, p, err)
		}
		for _, r := range rm.Resources() {
			m, err := r.Map()
			if err != nil {
				return nil, permanentf("%w: kustomize build %s: %w", ErrRender, p, err)
			}
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out, nil
}
