package cli

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

// The README's table of the command line lists exactly the commands
// flotilla registers: each that does something (not a group such as get),
// the subcommands of task and completion as one row.
func TestREADMEListsEveryCommand(t *testing.T) {
	var registered []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		if c.HasParent() && (c.Parent().Name() == "task" || c.Parent().Name() == "completion") {
			return
		}
		if c.HasParent() && c.Annotations[annotationGroup] == "" {
			registered = append(registered, c.CommandPath())
		}
		if c.Name() == "task" || c.Name() == "completion" {
			return
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
	registered = append(registered, "flotilla task", "flotilla completion")
	slices.Sort(registered)

	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n### The command line\n")
	if !ok {
		t.Fatal("README has no ### The command line section")
	}
	section, _, _ = strings.Cut(section, "\n#")
	row := regexp.MustCompile("(?m)^\\| `(flotilla[^`]*)`")
	var listed []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		var words []string
		for _, w := range strings.Fields(m[1]) {
			if strings.ToLower(w) != w || strings.HasPrefix(w, "-") || strings.HasPrefix(w, "[") {
				break
			}
			words = append(words, w)
		}
		listed = append(listed, strings.Join(words, " "))
	}
	slices.Sort(listed)
	if diff := cmp.Diff(registered, listed); diff != "" {
		t.Errorf("README's command table (-registered +listed):\n%s", diff)
	}
}
