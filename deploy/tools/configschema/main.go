// Command configschema writes the JSON Schema of flotilla's configuration
// file (pkg/config/configschema) with the fields' doc comments read from
// pkg/config's sources. config/schema.go runs it through go generate.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/flotilla-cd/flotilla/pkg/config/configschema"
)

func main() {
	out := flag.String("out", "config/flotilla.schema.json", "file to write")
	root := flag.String("root", ".", "the module's root directory, for pkg/config's doc comments")
	flag.Parse()
	b, err := configschema.Generate(*root)
	if err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "configschema:", err)
		os.Exit(1)
	}
}
