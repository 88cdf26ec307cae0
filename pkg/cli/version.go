package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/flotilla-cd/flotilla/pkg/version"
)

func newVersionCmd() *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print flotilla's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			return out.print(cmd.OutOrStdout(), info, func(w io.Writer, _ bool) {
				fmt.Fprintf(w, "flotilla %s (%s, %s)\n", info.Version, info.GoVersion, info.Platform)
			}, nil)
		},
	}
	out = addOutput(cmd, "text", formatJSON, formatYAML)
	return cmd
}
