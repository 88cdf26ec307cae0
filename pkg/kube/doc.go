// Package kube holds small helpers over client-go shared by flotilla's cluster
// adapters and its test fleet: building clients from kubeconfigs, applying YAML
// manifests with server-side apply, deleting an object, listing a kind in every
// namespace, and waiting for CRDs to be served.
package kube
