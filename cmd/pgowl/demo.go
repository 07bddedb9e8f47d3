package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
)

func newDemoCommand() *cobra.Command {
	var (
		quiet    bool
		listen   string
		logLevel string
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Start a throw-away primary and standby with pgowl in front of them",
		Long: "demo starts a PostgreSQL primary and one streaming standby from the installed PostgreSQL\n" +
			"binaries in a temporary directory, starts pgowl in front of them, shows a short tour and\n" +
			"prints a psql command line. Ctrl-C stops everything and removes the directory.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), cmd.OutOrStdout(), demoOptions{quiet: quiet, listen: listen, logLevel: logLevel})
		},
	}
	cmd.Flags().BoolVar(&quiet, "quiet", false, "skip the scripted tour")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:6432", "address pgowl listens on")
	cmd.Flags().StringVar(&logLevel, "log-level", "warn", "routing log level on stderr (info shows one line per statement)")
	return cmd
}

type demoOptions struct {
	quiet    bool
	listen   string
	logLevel string
}

func runDemo(ctx context.Context, out io.Writer, opts demoOptions) error {
	ln, err := net.Listen("tcp", opts.listen)
	if err != nil {
		return fmt.Errorf("cannot listen on %s (is another pgowl or PgBouncer running? use --listen): %w", opts.listen, err)
	}
	defer ln.Close()

	password := randomPassword()
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	say("Starting a PostgreSQL 15 primary and one streaming standby (this takes a few seconds)...")
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	c, err := cluster.Start(startCtx, cluster.Options{
		Standbys: 1,
		Users:    []cluster.User{{Name: "app", Password: password}},
	})
	cancel()
	if err != nil {
		return err
	}
	defer func() {
		say("Stopping PostgreSQL and removing %s", c.Dir)
		c.Close()
	}()

	cfg := config.Default()
	cfg.Listen = ln.Addr().String()
	for _, n := range c.Nodes {
		cfg.Nodes = append(cfg.Nodes, config.Node{Name: n.Name, Host: n.Host, Port: n.Port})
	}
	cfg.Users = []config.User{{Name: "app", Password: password, Auth: "scram-sha-256"}}
	cfg.Monitor.User = cluster.Superuser
	cfg.Log.Format = "console"
	cfg.Log.Level = opts.logLevel
	cfg.Admin.Listen = "127.0.0.1:0" // a free port; the log names it
	if err := cfg.Validate(); err != nil {
		return err
	}
	logger, err := newLogger(cfg.Log, os.Stderr)
	if err != nil {
		return err
	}
	proxyCtx, stopProxy := context.WithCancel(ctx)
	defer stopProxy()
	served := make(chan error, 1)
	go func() { served <- runProxy(proxyCtx, cfg, logger, ln) }()

	dsn := fmt.Sprintf("postgres://app:%s@%s/postgres?sslmode=disable", password, cfg.Listen)
	if !opts.quiet {
		if err := demoTour(ctx, out, dsn, c); err != nil {
			say("The tour stopped early: %v", err)
		}
	}
	say("")
	say("pgowl is listening on %s in front of %s (primary, port %d) and %s (standby, port %d).", cfg.Listen, c.Nodes[0].Name, c.Nodes[0].Port, c.Nodes[1].Name, c.Nodes[1].Port)
	say("Paste this into another terminal:")
	say("")
	say("    psql %q", dsn)
	say("")
	say("Try SELECT now(); then INSERT into demo_birds, SELECT ... FOR UPDATE, BEGIN READ ONLY, SHOW pgowl.nodes.")
	say("Press Ctrl-C to stop and remove everything.")
	select {
	case <-ctx.Done():
	case err := <-served:
		if err != nil {
			return err
		}
	}
	stopProxy()
	<-served
	return nil
}

func randomPassword() string {
	b := make([]byte, 9)
	rand.Read(b)
	return "owl-" + hex.EncodeToString(b)
}

// demoTour runs a few statements through pgowl and shows the NOTICEs.
func demoTour(ctx context.Context, out io.Writer, dsn string, c *cluster.Cluster) error {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return err
	}
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.HasPrefix(n.Message, "pgowl:") {
			notices = append(notices, n.Message, "        "+n.Detail)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())

	fmt.Fprintln(out, "\nA short tour: each statement below went through pgowl, which chose the node.")
	step := func(sql string, show func(pgx.Rows) error) error {
		notices = notices[:0]
		fmt.Fprintf(out, "\n  => %s\n", sql)
		rows, err := conn.Query(ctx, sql, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			return err
		}
		if show != nil {
			if err := show(rows); err != nil {
				return err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			fmt.Fprintf(out, "     ERROR: %v\n", err)
		}
		for _, n := range notices {
			fmt.Fprintf(out, "     NOTICE: %s\n", n)
		}
		return nil
	}
	printFirst := func(rows pgx.Rows) error {
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "     %v\n", vals)
		}
		return nil
	}
	for _, s := range []struct {
		sql  string
		show func(pgx.Rows) error
	}{
		{"CREATE TABLE IF NOT EXISTS demo_birds (id serial PRIMARY KEY, name text NOT NULL)", nil},
		{"INSERT INTO demo_birds (name) VALUES ('barn owl'), ('snowy owl'), ('tawny owl')", nil},
	} {
		if err := step(s.sql, s.show); err != nil {
			return err
		}
	}
	// Let the standby replay the insert so the read below sees it.
	if err := c.Nodes[1].WaitCaughtUp(ctx, c.Nodes[0]); err != nil {
		return err
	}
	for _, s := range []struct {
		sql  string
		show func(pgx.Rows) error
	}{
		{"SELECT count(*) AS birds FROM demo_birds", printFirst},
		{"SELECT name FROM demo_birds WHERE id = 1 FOR UPDATE", printFirst},
		{"SELECT nextval('demo_birds_id_seq')", printFirst},
		{"SELECT now() > '2000-01-01' AS fresh", printFirst},
		{"SHOW pgowl.nodes", printFirst},
	} {
		if err := step(s.sql, s.show); err != nil {
			if errors.Is(err, context.Canceled) {
				return err
			}
			fmt.Fprintf(out, "     ERROR: %v\n", err)
		}
	}
	return nil
}
