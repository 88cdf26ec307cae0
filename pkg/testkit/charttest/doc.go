// Package charttest installs flotilla's Helm chart (deploy/chart/flotilla)
// from its image onto a real node of a local fleet (localfleet.RealNode), as
// platform teams install it: the image built by deploy/tools/image and
// pushed by digest to the node's registry, the release's namespace, its
// kubeconfigs' Secret and a PersistentVolume on the node prepared first,
// the Helm SDK's install, and the pod waited for Ready. It also finds the
// pod's process on the host and reads its memory, for the features and
// the benchmarks that measure the pod.
package charttest
