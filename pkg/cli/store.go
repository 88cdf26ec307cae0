package cli

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// storeFile is the state file of the embedded store in the data directory,
// as pkg/app opens it; its journal is the directory next to it.
const storeFile = "flotilla.db"

func newStoreCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Maintain the embedded store (stop flotilla first)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newStoreRepairCmd())
	return cmd
}

func newStoreRepairCmd() *cobra.Command {
	var configPath, dataDir string
	cmd := &cobra.Command{
		Use:   "repair",
		Short: "Rewrite a damaged journal, keeping every intact event",
		Long: `repair rewrites the event journal of the store in --data-dir when flotilla refuses
to start because it is damaged. Every intact event is kept under its sequence
number. Each damaged or missing one (up to the highest consumer cursor) becomes a
tombstone event of type ` + store.TypeJournalDamaged + ` with id damaged-<seq>, so that
sequence numbers stay gapless and consumers' cursors stay valid. A write torn by
a crash at the tail is dropped, as flotilla does at start. The damaged journal is
kept next to the new one as flotilla.db.journal.damaged-<UTC time>.

flotilla must not be running: repair takes the store's lock.`,
		Example: `  flotilla store repair --data-dir /var/lib/flotilla`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" {
				dataDir = config.DefaultDataDir
				if configPath != "" {
					cfg, err := config.Load(configPath)
					if err != nil {
						return err
					}
					dataDir = cfg.Server.DataDir
				}
			}
			// The report below says what the warnings would.
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelError}))
			path := filepath.Join(dataDir, storeFile)
			report, err := store.Repair(cmd.Context(), path, store.WithLogger(log))
			if err != nil {
				return err
			}
			printRepair(cmd.OutOrStdout(), store.JournalDir(path), report)
			return nil
		},
	}
	cmd.Flags().StringVarP(&configPath, "config", "c", "", "configuration file, for server.dataDir when --data-dir is not given")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "directory of the embedded store (default: server.dataDir of --config, else ./flotilla-data)")
	return cmd
}

func printRepair(w io.Writer, dir string, r store.RepairReport) {
	if r.Backup == "" {
		fmt.Fprintf(w, "journal %s is intact: %d records, nothing to repair\n", dir, r.Kept)
		return
	}
	fmt.Fprintf(w, "repaired journal %s\n", dir)
	fmt.Fprintf(w, "  kept:     %d intact records, with their sequence numbers\n", r.Kept)
	fmt.Fprintf(w, "  replaced: %d damaged or missing records, by tombstones (%s)\n", r.Tombstones(), store.TypeJournalDamaged)
	for _, d := range r.Replaced {
		seqs := fmt.Sprintf("record %d", d.First)
		if d.Last != d.First {
			seqs = fmt.Sprintf("records %d-%d", d.First, d.Last)
		}
		fmt.Fprintf(w, "    %s: segment %s, offset %d: %s\n", seqs, d.Segment, d.Offset, d.Reason)
	}
	fmt.Fprintf(w, "  zeroed:   %d bytes of a write torn at the tail\n", r.Zeroed)
	fmt.Fprintf(w, "  last record: %d; appends continue at %d\n", r.LastSeq, r.LastSeq+1)
	fmt.Fprintf(w, "  the damaged journal is kept in %s\n", r.Backup)
}
