package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/proxy"
)

func newServeCommand() *cobra.Command {
	var file, pprofAddr string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the proxy",
		Long: "Run the proxy with the configuration from --config, PGOWL_* environment variables and flags\n" +
			"(flags override the environment, which overrides the file, which overrides the defaults).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				file = os.Getenv(configFileVariable)
			}
			cfg, err := loadConfig(file, cmd.Flags(), os.Environ())
			if err != nil {
				return &exitCode{code: 2, err: err}
			}
			logOut := newBatchedLog(os.Stderr)
			defer logOut.Close()
			logger, err := newLogger(cfg.Log, logOut)
			if err != nil {
				return &exitCode{code: 2, err: err}
			}
			if pprofAddr != "" {
				go func() {
					logger.Info().Str("addr", pprofAddr).Msg("serving pprof")
					logger.Warn().Err(http.ListenAndServe(pprofAddr, nil)).Msg("pprof listener stopped")
				}()
			}
			ln, err := proxy.Listen(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			logger.Info().Str("listen", ln.Addr().String()).Str("version", versionString()).Int("nodes", len(cfg.Nodes)).Msg("pgowl serving")
			return runProxy(cmd.Context(), cfg, logger, ln)
		},
	}
	cmd.Flags().StringVar(&file, "config", "", "YAML configuration file (or PGOWL_CONFIG)")
	cmd.Flags().StringVar(&pprofAddr, "pprof-addr", "", "serve Go's pprof handlers on this address (profiling only)")
	cmd.Flags().MarkHidden("pprof-addr")
	addConfigFlags(cmd.Flags())
	return cmd
}

// newLogger builds the process logger from the log section.
func newLogger(cfg config.Log, out io.Writer) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(cfg.Level)
	if err != nil {
		return zerolog.Nop(), fmt.Errorf("log.level: %w", err)
	}
	if cfg.Format == "console" {
		out = zerolog.ConsoleWriter{Out: out, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(out).Level(level).With().Timestamp().Logger(), nil
}

// runProxy starts the node monitor and serves clients on ln until ctx ends.
func runProxy(ctx context.Context, cfg config.Config, logger zerolog.Logger, ln net.Listener) error {
	instance, err := proxy.Build(cfg, logger)
	if err != nil {
		return err
	}
	if instance.Admin != nil {
		instance.Admin.SetVersion(versionString())
	}
	return instance.Run(ctx, ln)
}
