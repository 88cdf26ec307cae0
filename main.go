// Command flotilla is an event-driven pipeline runner for progressive delivery
// across fleets of Kubernetes clusters. See README.md.
package main

import (
	"os"

	"github.com/flotilla-cd/flotilla/pkg/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
