package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// The -o formats, as kubectl names them. The default ("") is the
// command's form for people: a table, or a description.
const (
	formatJSON = "json"
	formatYAML = "yaml"
	formatWide = "wide" // the table with more columns
	formatName = "name" // KIND/NAME, one per line
)

// output is a command's -o/--output flag: the formats the command
// accepts and the one asked for. It is a pflag.Value whose Set refuses a
// format the command does not accept, so an unknown format is a usage
// error (exit 2) before the command reads anything, never its default form.
type output struct {
	format string
	// human names the default form ("table" or "text"), accepted as -o
	// too; formats are the others the command accepts.
	human   string
	formats []string
}

// addOutput adds -o/--output to cmd, accepting human (the default form)
// and formats, with their completion.
func addOutput(cmd *cobra.Command, human string, formats ...string) *output {
	o := &output{human: human, formats: formats}
	cmd.Flags().VarP(o, "output", "o", "output format: "+o.accepted()+" (default "+human+")")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(append([]string{human}, formats...), cobra.ShellCompDirectiveNoFileComp))
	return o
}

func (o *output) String() string { return o.format }
func (o *output) Type() string   { return "format" }

// Set accepts the formats of the command, or its default form by name.
func (o *output) Set(v string) error {
	switch {
	case v == "" || v == o.human:
		o.format = ""
	case slices.Contains(o.formats, v):
		o.format = v
	default:
		return fmt.Errorf("unknown output format %q: want %s", v, o.accepted())
	}
	return nil
}

// accepted names the formats, as "json, yaml or table".
func (o *output) accepted() string {
	all := append(slices.Clone(o.formats), o.human)
	return strings.Join(all[:len(all)-1], ", ") + " or " + all[len(all)-1]
}

// data tells whether the format prints the data itself (json or yaml),
// which a --watch's redrawn tables cannot.
func (o *output) data() bool { return o.format == formatJSON || o.format == formatYAML }

// print writes v in the format asked for: as JSON or YAML (the API's
// field names), its names (KIND/NAME, one per line), or human's form
// (wide tells -o wide).
func (o *output) print(w io.Writer, v any, human func(w io.Writer, wide bool), names func() []string) error {
	switch o.format {
	case formatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case formatYAML:
		out, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encoding YAML: %w", err)
		}
		_, err = w.Write(out)
		return err
	case formatName:
		var b strings.Builder
		for _, n := range names() {
			b.WriteString(n + "\n")
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	human(w, o.format == formatWide)
	return nil
}
