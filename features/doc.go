// Package features holds flotilla's behaviour, written in Gherkin (*.feature)
// and run by godog from `go test` against a real local fleet: real Kubernetes
// API servers, real Flagger and real Tekton (see pkg/testkit/fleettest).
//
//	go test ./features/                       # every feature
//	go test ./features/ -run 'TestFeatures/Two_clusters'
package features
