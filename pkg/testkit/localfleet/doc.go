// Package localfleet starts and stops a fleet of real Kubernetes clusters on one
// machine, without Docker or internet: one etcd shared by every cluster (each
// cluster has its own --etcd-prefix), and per cluster a kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok with one Ready fake node, a real
// Flagger controller with its CRD and, optionally, a real Tekton Pipelines
// controller with its CRDs and configuration.
//
// On demand, Fleet.StartRealNode adds to a cluster a node that runs pods for
// real: a kubelet (built from the API servers' Kubernetes version) on
// Debian's containerd and runc, pulling from a registry on loopback, with a
// bridge network whose pod IPs the host reaches. It is tainted and labelled
// (RealNodeTaint, RealNodeLabel) so only pods meant for it land there, and
// kwok manages only its fake node. realnode.go, containerd.go and kubelet.go
// say which settings this sandbox forces and why they are safe.
//
// Everything binds to 127.0.0.1 on ports picked free at start. A fleet lives in a
// directory that holds its state file (fleet.json), kubeconfigs, logs and data;
// Load reads it back so another process can use or stop the fleet. Stop kills
// exactly the processes the fleet started, checking each PID's command line first.
//
// The binaries come from deploy/tools/local/build.sh, which builds them from the Go
// module proxy into a versioned cache (see BinDir).
package localfleet
