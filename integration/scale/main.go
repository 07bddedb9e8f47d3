package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/internal/gomodule"
)

// appUser and appPassword are the login every client uses, through pgowl and on the nodes.
const (
	appUser     = "app"
	appPassword = "scale-secret"
	appDatabase = "postgres"
)

// The pgowl settings the targets are stated for.
const (
	poolMaxPerNode       = 40
	maxClientConnections = 12000
	nodeMaxConnections   = 100
)

// runTimeout bounds the whole run, whatever the flags say.
const runTimeout = 20 * time.Minute

// options are the command-line settings.
type options struct {
	idle     int
	clients  int
	duration time.Duration
	parallel int
	rows     int
	settle   time.Duration
	out      string
	// pgowlSets are extra pgowl settings, key=value, passed as --key=value flags.
	pgowlSets []string
	// variants are further load tests, each with pgowl restarted with extra settings.
	variants [][]string
	// command is the command line as a user would type it, for the report.
	command string
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	err = run(ctx, o)
	interrupted := errors.Is(ctx.Err(), context.Canceled)
	cancel()
	stop()
	if err != nil {
		if interrupted {
			fmt.Fprintln(os.Stderr, "scale: interrupted; clients closed, pgowl and the cluster stopped, temporary files removed; no report written")
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

// parseFlags reads the command line.
func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	idle := fs.Int("idle", 10000, "idle clients to hold open (0 skips the idle test)")
	clients := fs.Int("clients", 2000, "concurrent clients of the load test (0 skips the load test)")
	duration := fs.Duration("duration", 20*time.Second, "how long the load test runs")
	parallel := fs.Int("parallel", 64, "connection attempts in flight at once")
	rows := fs.Int("rows", 10000, "rows in the accounts table")
	settle := fs.Duration("settle", 2*time.Second, "wait after the last idle client before reading pgowl's memory")
	out := fs.String("out", "docs/scale.md", "where to write the report (overwritten); empty: stdout only")
	var sets []string
	fs.Func("set", "extra pgowl setting key=value, passed as --key=value (repeatable)", func(v string) error {
		key, _, ok := strings.Cut(v, "=")
		if !ok || key == "" || strings.HasPrefix(key, "-") {
			return fmt.Errorf("want key=value, got %q", v)
		}
		sets = append(sets, v)
		return nil
	})
	var variants [][]string
	fs.Func("variant", "after the load test, run it again with pgowl restarted with these extra settings, key=value[,key=value] (repeatable)", func(v string) error {
		var sets []string
		for _, kv := range strings.Split(v, ",") {
			key, _, ok := strings.Cut(kv, "=")
			if !ok || key == "" || strings.HasPrefix(key, "-") {
				return fmt.Errorf("want key=value[,key=value], got %q", v)
			}
			sets = append(sets, kv)
		}
		variants = append(variants, sets)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	o := options{idle: *idle, clients: *clients, duration: *duration, parallel: *parallel, rows: *rows,
		settle: *settle, out: *out, pgowlSets: sets, variants: variants}
	switch {
	case o.idle < 0 || o.idle > 100000:
		return o, fmt.Errorf("-idle %d: want 0..100000", o.idle)
	case o.clients < 0 || o.clients > 20000:
		return o, fmt.Errorf("-clients %d: want 0..20000", o.clients)
	case o.idle == 0 && o.clients == 0:
		return o, errors.New("-idle 0 and -clients 0 leave nothing to measure")
	case len(o.variants) > 0 && o.clients == 0:
		return o, errors.New("-variant needs the load test (-clients > 0)")
	case len(o.variants) > 4:
		return o, fmt.Errorf("%d variants: at most 4", len(o.variants))
	case o.duration < time.Second || o.duration > 5*time.Minute:
		return o, fmt.Errorf("-duration %s: want 1s..5m", o.duration)
	case o.parallel < 1 || o.parallel > 1024:
		return o, fmt.Errorf("-parallel %d: want 1..1024", o.parallel)
	case o.rows < 1 || o.rows > 10_000_000:
		return o, fmt.Errorf("-rows %d: want 1..10000000", o.rows)
	case o.settle < 0 || o.settle > time.Minute:
		return o, fmt.Errorf("-settle %s: want 0..1m", o.settle)
	}
	o.command = strings.TrimSpace("go run ./integration/scale " + strings.Join(args, " "))
	return o, nil
}

// logf prints progress to stderr; the report goes to stdout.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s scale: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// run sets everything up, runs the tests, tears everything down and reports.
func run(ctx context.Context, o options) (err error) {
	began := time.Now()
	moduleDir, err := gomodule.Root(ctx)
	if err != nil {
		return err
	}
	limit, err := raiseFileLimit()
	if err != nil {
		return err
	}
	need := uint64(max(o.idle, o.clients) + 512)
	if limit < need {
		return fmt.Errorf("RLIMIT_NOFILE hard limit %d is below the %d descriptors %d clients need (raise it with ulimit -Hn or prlimit)",
			limit, need, max(o.idle, o.clients))
	}
	logf("RLIMIT_NOFILE raised to %d (the hard limit); children inherit it", limit)

	tmp, err := os.MkdirTemp("", "pgowl-scale-")
	if err != nil {
		return err
	}
	defer func() {
		if rmErr := os.RemoveAll(tmp); rmErr != nil {
			logf("could not remove %s: %v", tmp, rmErr)
		}
	}()

	logf("building pgowl from the working tree")
	binary, err := buildPgowl(ctx, moduleDir, tmp)
	if err != nil {
		return err
	}

	logf("starting a primary and 2 standbys (max_connections = %d)", nodeMaxConnections)
	cl, err := cluster.StartWatched(ctx, cluster.Options{
		Standbys: 2,
		Users:    []cluster.User{{Name: appUser, Password: appPassword}},
		Settings: map[string]string{"max_connections": fmt.Sprint(nodeMaxConnections)},
		Logf:     func(format string, args ...any) { logf(format, args...) },
	})
	if err != nil {
		return err
	}
	defer func() {
		if closeErr := cl.Close(); closeErr != nil {
			logf("cluster close: %v", closeErr)
		}
	}()

	if o.clients > 0 {
		if err := createAccounts(ctx, cl, o.rows); err != nil {
			return err
		}
	}

	cfg := pgowlConfig{maxClients: max(maxClientConnections, o.idle+100, o.clients+100), sets: o.pgowlSets}
	proxy, err := startPgowl(ctx, binary, tmp, cl, cfg)
	if err != nil {
		return err
	}
	defer func() { proxy.stop() }()

	counter, err := newNodeCounter(ctx, cl)
	if err != nil {
		return err
	}
	defer counter.close()

	probe, err := newCPUProbe(proxy, cl)
	if err != nil {
		return err
	}

	rep := &report{
		opts:    o,
		started: began,
		machine: describeMachine(ctx, cl),
		build:   describeBuild(ctx, moduleDir, binary),
		pgowl:   proxy.describe(),
		nodes:   nodeNames(cl),
	}

	if o.idle > 0 {
		res, err := runIdle(ctx, o, proxy, counter, probe)
		if err != nil {
			return err
		}
		rep.idle = res
	}
	if o.clients > 0 {
		res, err := runLoad(ctx, o, proxy, counter, cl, probe)
		if err != nil {
			return err
		}
		rep.load = res
	}
	if err := proxy.checkAlive(); err != nil {
		return err
	}
	rep.pgowlLog = summarizePgowlLog(proxy.logPath)
	for i, sets := range o.variants {
		proxy.stop()
		logf("variant %d: restarting pgowl with %s", i+1, strings.Join(sets, " "))
		vcfg := cfg
		vcfg.sets = append(append([]string(nil), cfg.sets...), sets...)
		dir := filepath.Join(tmp, fmt.Sprintf("variant%d", i+1))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if proxy, err = startPgowl(ctx, binary, dir, cl, vcfg); err != nil {
			return err
		}
		vprobe, err := newCPUProbe(proxy, cl)
		if err != nil {
			return err
		}
		res, err := runLoad(ctx, o, proxy, counter, cl, vprobe)
		if err != nil {
			return err
		}
		if err := proxy.checkAlive(); err != nil {
			return err
		}
		rep.variants = append(rep.variants, variantResult{sets: sets, load: res, log: summarizePgowlLog(proxy.logPath)})
	}
	rep.nodeLogs = summarizeNodeLogs(cl)
	rep.elapsed = time.Since(began)

	text := rep.markdown()
	fmt.Print(text)
	if o.out != "" {
		path := o.out
		if !filepath.IsAbs(path) {
			path = filepath.Join(moduleDir, path)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return err
		}
		logf("report written to %s", path)
	}
	return nil
}

// nodeNames lists the cluster's nodes, primary first.
func nodeNames(cl *cluster.Cluster) []string {
	names := make([]string, len(cl.Nodes))
	for i, n := range cl.Nodes {
		names[i] = n.Name
	}
	return names
}
