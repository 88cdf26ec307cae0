// Package fleettest gives a test package a running local fleet of real
// Kubernetes clusters (see pkg/testkit/localfleet) from its TestMain, and per-cluster
// clients for Kubernetes, Flagger and Tekton.
//
//	var fleet *localfleet.Fleet
//
//	func TestMain(m *testing.M) {
//		os.Exit(fleettest.Main(m, fleettest.Options{Clusters: 2, Tekton: true}, &fleet))
//	}
//
// When FLOTILLA_FLEET_DIR names a directory where a fleet already runs (make
// fleet-up), that fleet is reused and left running; otherwise a new fleet is
// started in a temporary directory and stopped when the tests end. Its logs are
// kept when the tests fail and the path is printed.
//
// [StartHostSteps] plays a kubelet for Tekton's TaskRun pods labelled
// simfail=on-host (kwok leaves those alone): it runs each step's command on
// the host with the flotilla binary and writes the pod's terminated status
// and results the way Tekton's entrypoint does, so pipelines really run.
package fleettest
