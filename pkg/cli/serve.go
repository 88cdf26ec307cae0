package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/flotilla-cd/flotilla/pkg/app"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/reload"
)

func newServeCmd() *cobra.Command {
	var (
		configPath, listen, dataDir, logLevel, logFormat string
		reloadEvery                                      time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run flotilla's main job: webhook intake, functions and API, with an embedded store",
		Long: `serve runs flotilla in one process: it receives webhooks on POST /hooks/<receiver>,
journals them in an embedded store (one file under --data-dir), runs the functions
that carry each verified image through the fleet's waves, and serves the API that
'flotilla get' and 'flotilla describe' read. No external server is needed.

The configuration file reloads live when its content changes (read every
--config-reload-interval) and on SIGHUP: validated first, as 'flotilla config
check' does; an invalid file, or one that changes a field only a restart can
(server, receivers, ...), is refused whole and the running configuration stays
(docs/configuration.md#live-reload).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if configPath == "" {
				return usageError{fmt.Errorf("--config is required")}
			}
			if reloadEvery < 0 {
				return usageError{fmt.Errorf("--config-reload-interval must not be negative")}
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return usageError{fmt.Errorf("--log-level: %w", err)}
			}
			handler, err := logHandler(cmd.ErrOrStderr(), logFormat, level)
			if err != nil {
				return err
			}
			cfg, err := config.Load(configPath)
			if err != nil {
				return err
			}
			log := slog.New(handler)
			// client-go (the clusters' watch caches) logs through klog:
			// into the same log, in its format, tagged.
			klog.SetSlogLogger(log.With("component", "client-go"))
			// SIGHUP reloads the config (pkg/reload), from before New: a
			// hang-up meanwhile must not end the process.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			srv, err := app.New(cmd.Context(), cfg, app.Options{Listen: listen, DataDir: dataDir, Logger: log,
				ConfigFile: configPath, ConfigReloadInterval: reloadEvery, Hangup: hup})
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, srv.Close()) }()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(cmd.OutOrStdout(), "flotilla listening on http://%s\n", srv.Addr())
			return srv.Run(ctx)
		},
	}
	cmd.Flags().StringVarP(&configPath, "config", "c", "", "configuration file (see config/example.yaml)")
	cmd.Flags().StringVar(&listen, "listen", "", "address to listen on (default: server.listen of the config, else 127.0.0.1:8080)")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "directory of the embedded store (default: server.dataDir of the config, else ./flotilla-data)")
	cmd.Flags().DurationVar(&reloadEvery, "config-reload-interval", reload.DefaultInterval, "how often the config file is read to reload it when it changed; 0: only on SIGHUP")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	cmd.Flags().StringVar(&logFormat, "log-format", "", "log format: text (key=value lines, to read) or json (one object a line, for a log pipeline); default text when stderr is a terminal, else json")
	_ = cmd.RegisterFlagCompletionFunc("log-format", cobra.FixedCompletions([]string{logText, logJSON}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// --log-format's formats.
const (
	logText = "text"
	logJSON = "json"
)

// logHandler is the handler of --log-format (format "": text when w is a
// terminal, else JSON) writing to w from level up.
func logHandler(w io.Writer, format string, level slog.Level) (slog.Handler, error) {
	if format == "" {
		format = logJSON
		if isTerminal(w) {
			format = logText
		}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case logText:
		return slog.NewTextHandler(w, opts), nil
	case logJSON:
		return slog.NewJSONHandler(w, opts), nil
	}
	return nil, usageError{fmt.Errorf("--log-format %q: want text or json", format)}
}
