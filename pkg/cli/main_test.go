package cli

import (
	"os"
	"testing"

	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

// fleet is the package's one cluster, for the tests of what fleet bootstrap
// and fleet check do to a cluster. It runs Flagger (as a process, not a
// Deployment) and serves Flagger's CRDs.
var fleet *localfleet.Fleet

func TestMain(m *testing.M) {
	os.Exit(fleettest.Main(m, fleettest.Options{Clusters: 1}, &fleet))
}
