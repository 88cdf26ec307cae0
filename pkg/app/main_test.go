package app

import (
	"os"
	"testing"

	"github.com/flotilla-cd/flotilla/pkg/testkit/natstest"
)

// natsCluster is the three-node JetStream cluster scale-out mode's tests
// share (each its own stream).
var natsCluster *natstest.Cluster

func TestMain(m *testing.M) { os.Exit(natstest.Main(m, 3, &natsCluster)) }
