package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"syscall"
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
				return &exitCode{code: exitConfig, err: err}
			}
			logOut := newBatchedLog(os.Stderr)
			defer logOut.Close()
			logger, gate, err := newReloadableLogger(cfg.Log, logOut)
			if err != nil {
				return &exitCode{code: exitConfig, err: err}
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
			instance, err := proxy.Build(cfg, logger)
			if err != nil {
				return err
			}
			if instance.Admin != nil {
				instance.Admin.SetVersion(versionString())
			}
			flags := cmd.Flags()
			instance.SetConfigSource(
				func() (config.Config, error) { return loadConfig(file, flags, os.Environ()) },
				func(next config.Config) {
					if level, err := zerolog.ParseLevel(next.Log.Level); err == nil {
						gate.SetLevel(level)
					}
				})
			stopSignals := handleSignals(cmd.Context(), instance, logger, logOut)
			defer stopSignals()
			logger.Info().Str("listen", ln.Addr().String()).Str("version", versionString()).Int("nodes", len(cfg.Nodes)).Msg("pgowl serving")
			if err := instance.Run(cmd.Context(), ln); err != nil {
				return err
			}
			report := instance.Server.Shutdown()
			if !report.Clean() {
				return &exitCode{code: exitTransactionsRolledBack, err: fmt.Errorf(
					"shut down after shutdown_timeout: %d running statements cancelled, %d transactions rolled back, %d connections closed", report.Cancelled, report.RolledBack, report.Closed)}
			}
			return nil
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

// Exit codes of pgowl serve (the README lists them).
const (
	// exitConfig: the configuration was invalid at start.
	exitConfig = 2
	// exitTransactionsRolledBack: SIGTERM's shutdown_timeout passed with
	// statements running or transactions open; the statements were cancelled,
	// the transactions rolled back and their clients told so.
	exitTransactionsRolledBack = 3
	// exitSecondSignal: a second SIGTERM or SIGINT ended pgowl at once.
	exitSecondSignal = 4
)

// newReloadableLogger builds the process logger behind a levelGate, so that
// a reload can change log.level. Events are built down to debug (or trace
// when asked for) and the gate drops those below the configured level.
func newReloadableLogger(cfg config.Log, out io.Writer) (zerolog.Logger, *levelGate, error) {
	level, err := zerolog.ParseLevel(cfg.Level)
	if err != nil {
		return zerolog.Nop(), nil, fmt.Errorf("log.level: %w", err)
	}
	if cfg.Format == "console" {
		out = zerolog.ConsoleWriter{Out: out, TimeFormat: time.TimeOnly}
	}
	gate := newLevelGate(out, level)
	return zerolog.New(gate).Level(min(level, zerolog.DebugLevel)).With().Timestamp().Logger(), gate, nil
}

// handleSignals reloads the configuration on SIGHUP, and after the first
// SIGTERM or SIGINT (which ends ctx and starts the drain) ends the process
// at once on a second one, after writing the batched log.
func handleSignals(ctx context.Context, instance *proxy.Instance, logger zerolog.Logger, logOut *batchedLog) (stop func()) {
	hangups := make(chan os.Signal, 1)
	signal.Notify(hangups, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-hangups:
				logger.Info().Msg("SIGHUP: reloading the configuration")
				instance.Reload() // logs the outcome
			}
		}
	}()
	go func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		again := make(chan os.Signal, 1)
		signal.Notify(again, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(again)
		select {
		case <-done:
		case sig := <-again:
			logger.Warn().Str("signal", sig.String()).Msg("second signal: pgowl ends now, without waiting for sessions")
			logOut.Close()
			os.Exit(exitSecondSignal)
		}
	}()
	return func() {
		close(done)
		signal.Stop(hangups)
	}
}
