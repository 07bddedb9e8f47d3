package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/internal/gomodule"
)

// benchUser and benchPassword are the login every target is reached with, and benchDatabase
// the database the pgbench tables live in. It is not "postgres": pgpool-II never caches server
// connections to the databases postgres, template0, template1 and regression.
const (
	benchUser     = "app"
	benchPassword = "bench-secret"
	benchDatabase = "bench"
)

// setupEstimate is roughly how long building pgowl, starting the cluster, pgbench -i and the
// proxies take on a 2-core machine with a warm Go build cache.
const setupEstimate = 70 * time.Second

// runOverhead is roughly what one run costs beyond its -T duration: resetting state, waiting
// for the standbys, connecting the clients and pgbench's report.
const runOverhead = 1300 * time.Millisecond

// clusterSettings are the postgresql.conf parameters of the benchmark cluster: room for 64
// direct clients plus every proxy's pool at once, the data set in shared buffers, no
// checkpoints during a run, and no per-statement statistics.
var clusterSettings = map[string]string{
	"max_connections":          "600",
	"shared_buffers":           "512MB",
	"max_wal_size":             "4GB",
	"checkpoint_timeout":       "30min",
	"pg_stat_statements.track": "none",
}

// options are the command-line settings.
type options struct {
	rounds   int
	duration time.Duration
	quick    bool
	out      string
	// fromHead builds pgowl from the committed HEAD rather than the working tree.
	fromHead bool
	// quietBudget bounds the total time runs wait for other processes to calm down.
	quietBudget time.Duration
	workloads   []workload
	targets     map[string]bool
	// command is the command line as a user would type it, for the report.
	command string
	// baseline is a git revision of pgowl to measure beside this build (see baseline.go);
	// baselineBuild describes it once resolved.
	baseline, baselineBuild string
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, o)
	interrupted := ctx.Err() != nil
	stop()
	if err != nil {
		if interrupted {
			fmt.Fprintln(os.Stderr, "bench: interrupted; everything was stopped and removed, no report written")
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// parseFlags reads the command line.
func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	rounds := fs.Int("rounds", 3, "rounds per workload (every target runs once per round)")
	duration := fs.Duration("duration", 5*time.Second, "pgbench -T of one run (whole seconds)")
	quick := fs.Bool("quick", false, "smoke run: 1 round of 2s over five workloads (overrides -rounds and -duration)")
	out := fs.String("out", "docs/benchmarks.md", "where to write the report (overwritten); empty: stdout only")
	only := fs.String("workloads", "", "comma-separated workload keys to run instead of the default set")
	targets := fs.String("targets", strings.Join(defaultTargets, ","), "comma-separated targets to run (known: "+strings.Join(targetOrder, ", ")+")")
	quietBudget := fs.Duration("quiet-budget", 90*time.Second, "at most this long in all, runs wait for processes outside the benchmark to use less than 0.3 cores (0: never wait)")
	baseline := fs.String("baseline", "", "a git revision of pgowl to build as well and run beside this build in every round (e.g. HEAD~1 or main)")
	source := fs.String("source", "head", "which pgowl to build: head (the committed HEAD, via git archive) or worktree (the checkout as it is)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	o := options{rounds: *rounds, duration: duration.Round(time.Second), quick: *quick, out: *out, targets: map[string]bool{}, quietBudget: *quietBudget, baseline: *baseline}
	if o.quick {
		o.quietBudget = min(o.quietBudget, 30*time.Second)
	}
	switch *source {
	case "head":
		o.fromHead = true
	case "worktree":
	default:
		return options{}, fmt.Errorf("-source %q: want head or worktree", *source)
	}
	if o.quick {
		o.rounds, o.duration = 1, 2*time.Second
	}
	if o.rounds < 1 || o.rounds > 20 {
		return options{}, fmt.Errorf("-rounds %d: want 1..20", o.rounds)
	}
	if o.duration < time.Second || o.duration > 10*time.Minute {
		return options{}, fmt.Errorf("-duration %s: want 1s..10m", o.duration)
	}
	var err error
	switch {
	case *only != "":
		o.workloads, err = selectWorkloads(strings.Split(*only, ","))
	case o.quick:
		o.workloads, err = selectWorkloads(quickKeys)
	default:
		o.workloads = allWorkloads()
	}
	if err != nil {
		return options{}, err
	}
	known := map[string]bool{}
	for _, name := range targetOrder {
		known[name] = true
	}
	for _, name := range strings.Split(*targets, ",") {
		name = strings.TrimSpace(name)
		if !known[name] {
			return options{}, fmt.Errorf("unknown target %q; known: %s", name, strings.Join(targetOrder, ", "))
		}
		o.targets[name] = true
	}
	o.command = strings.TrimSpace("go run ./integration/bench " + strings.Join(args, " "))
	return o, nil
}

// estimate is how long the whole benchmark should take.
func (o options) estimate() time.Duration {
	runs := len(o.workloads) * o.rounds * o.runTargets()
	return setupEstimate + o.baselineSetup() + time.Duration(runs)*(o.duration+runOverhead)
}

// maxDuration is the estimate plus the most the runs may wait for a quiet machine.
func (o options) maxDuration() time.Duration {
	return o.estimate() + o.quietBudget
}

// run sets everything up, runs every workload against every target, and writes the report.
// Every process it starts is stopped and every directory removed before it returns.
func run(ctx context.Context, o options) error {
	began := time.Now()
	logf := func(format string, args ...any) {
		elapsed := time.Since(began).Round(time.Second)
		fmt.Printf("[%02d:%02d] %s\n", int(elapsed.Minutes()), int(elapsed.Seconds())%60, fmt.Sprintf(format, args...))
	}
	runs := len(o.workloads) * o.rounds * o.runTargets()
	logf("plan: %d workload(s) × %d round(s) × %d target(s) = %d pgbench runs of %s; estimated total %s (setup about %s, "+
		"more if Go must first compile the cgo parser), at most %s if other processes keep the machine busy (-quiet-budget %s)",
		len(o.workloads), o.rounds, o.runTargets(), runs, o.duration, o.estimate().Round(10*time.Second), setupEstimate,
		o.maxDuration().Round(10*time.Second), o.quietBudget)

	moduleDir, err := gomodule.Root(ctx)
	if err != nil {
		return err
	}
	binDir := cluster.Options{}.ResolvedBinDir()
	pgbench := findBinary("pgbench")
	if candidate := filepath.Join(binDir, "pgbench"); fileExists(candidate) {
		pgbench = candidate
	}
	if pgbench == "" {
		return errors.New("pgbench not found in " + binDir + " or on PATH (apt-get install postgresql-15)")
	}
	var bins proxyBinaries
	if o.targets[targetPgBouncer] || o.targets[targetPgpool] {
		bins = ensureProxies(ctx, logf)
	}
	owner, err := postgresOwner()
	if err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "pgowl-bench-")
	if err != nil {
		return err
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			logf("cleanup: %v", err)
		}
	}()
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	scriptDir := filepath.Join(dir, "scripts")
	if err := os.MkdirAll(scriptDir, 0o755); err != nil {
		return err
	}
	if err := writeScripts(scriptDir); err != nil {
		return err
	}

	var pgowlBinary, build string
	if o.targets[targetPgowl] || o.targets[targetPgowlNotice] || o.targets[targetPgowlAdmin] || o.targets[targetPgowlGuard] || o.targets[targetPgowlGuardCache] || o.targets[targetPgowlRYWOff] {
		build = describeBuild(ctx, moduleDir, o.fromHead)
		logf("building pgowl from %s", build)
		if pgowlBinary, err = buildCommand(ctx, moduleDir, dir, "./cmd/pgowl", o.fromHead); err != nil {
			return err
		}
	}
	var baselineBinary string
	if o.baseline != "" {
		commit, describe, err := resolveBaseline(ctx, moduleDir, o.baseline)
		if err != nil {
			return err
		}
		o.baselineBuild = "commit `" + describe + "` (-baseline " + o.baseline + ", exported with git archive)"
		logf("building the baseline pgowl from %s", o.baselineBuild)
		if baselineBinary, err = buildBaseline(ctx, moduleDir, dir, commit); err != nil {
			return err
		}
	}
	var forwardBinary string
	if o.targets[targetForward] {
		if forwardBinary, err = buildCommand(ctx, moduleDir, dir, "./integration/bench/forward", o.fromHead); err != nil {
			return err
		}
	}

	logf("starting a primary and two standbys")
	c, err := cluster.StartWatched(ctx, cluster.Options{
		Standbys: 2,
		Users:    []cluster.User{{Name: benchUser, Password: benchPassword}},
		Settings: clusterSettings,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := c.Close(); err != nil {
			logf("cleanup: cluster: %v", err)
		}
	}()
	primary := c.Nodes[0]
	if err := primary.Exec(ctx, "CREATE DATABASE "+benchDatabase+" OWNER "+benchUser); err != nil {
		return err
	}

	runner := pgbenchRunner{path: pgbench, env: clientEnv(benchUser, benchPassword, benchDatabase), scriptDir: scriptDir}
	logf("pgbench -i -s %d on the primary", scale)
	if out, err := runner.run(ctx, primary.Host, primary.Port, 10*time.Minute, "-i", "-s", fmt.Sprint(scale), "-q"); err != nil {
		return fmt.Errorf("pgbench -i: %w\n%s%s", err, out.stdout, out.stderr)
	}
	if err := catchUp(ctx, c); err != nil {
		return err
	}

	l := &lab{dir: dir, owner: owner, cluster: c, user: benchUser, password: benchPassword}
	var targets []*target
	defer func() {
		for _, t := range targets {
			t.stop()
		}
	}()
	for _, name := range targetOrder {
		if !o.targets[name] {
			continue
		}
		var t *target
		switch name {
		case targetDirect:
			t = &target{name: name, host: primary.Host, port: primary.Port, setup: "pgbench connects to the primary itself"}
		case targetPgBouncer:
			if bins.pgbouncer == "" {
				t = &target{name: name, skipped: bins.pgbouncerNote}
			} else {
				t = l.startPgBouncer(ctx, bins.pgbouncer)
			}
		case targetPgpool:
			if bins.pgpool == "" {
				t = &target{name: name, skipped: bins.pgpoolNote}
			} else {
				t = l.startPgpool(ctx, bins.pgpool)
			}
		case targetPgowl, targetPgowlNotice, targetPgowlAdmin, targetPgowlRYWOff, targetPgowlGuard, targetPgowlGuardCache:
			t = l.startPgowl(ctx, pgowlBinary, name)
		case targetForward:
			t = l.startForward(ctx, forwardBinary)
		}
		if ctx.Err() != nil {
			t.stop()
			return ctx.Err()
		}
		targets = append(targets, t)
		if t.skipped != "" {
			logf("%s: SKIPPED: %s", t.label(), t.skipped)
		} else {
			logf("%s: ready on %s:%d", t.label(), t.host, t.port)
		}
		if twin := l.startBaselineTwin(ctx, name, baselineBinary, o.baselineBuild); twin != nil {
			targets = append(targets, twin)
			if twin.skipped != "" {
				logf("%s: SKIPPED: %s", twin.label(), twin.skipped)
			} else {
				logf("%s: ready on %s:%d", twin.label(), twin.host, twin.port)
			}
		}
	}
	l.describeNodes(ctx, targets, logf)
	if err := warmUp(ctx, c, runner, targets, logf); err != nil {
		return err
	}

	b := &bench{cluster: c, runner: runner, duration: o.duration, logf: logf, quietBudget: o.quietBudget, runsLeft: runs}
	res := newResults()
	for _, w := range o.workloads {
		logf("workload %s: %s", w.key, w.commandLine(o.duration))
		for round := 1; round <= o.rounds; round++ {
			for _, t := range roundOrder(targets, round) {
				if t.skipped != "" {
					continue
				}
				r, err := b.runOne(ctx, w, t)
				if err != nil {
					return err
				}
				res.add(w.key, t.name, r)
				logf("  %s round %d %-13s %s", w.key, round, t.name, r.summary())
			}
		}
	}

	var extra string
	if on, off := targetNamed(targets, targetPgowl), targetNamed(targets, targetPgowlRYWOff); on != nil && off != nil {
		if extra, err = readAfterWrite(ctx, on, off, benchUser, benchPassword, benchDatabase, logf); err != nil {
			return err
		}
	}
	versions := collectVersions(ctx, pgbench, pgowlBinary, bins)
	rep := &report{
		options:   o,
		date:      began.UTC(),
		elapsed:   time.Since(began),
		machine:   describeMachine(ctx),
		versions:  versions,
		workloads: o.workloads,
		targets:   targets,
		results:   res,
		build:     build,
		waited:    b.waited,
	}
	fmt.Println()
	fmt.Print(rep.tables())
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(keepSections(o.out, rep.markdown()+extra)), 0o644); err != nil {
			return err
		}
		logf("wrote %s", o.out)
	}
	logf("done in %s (estimate was %s)", time.Since(began).Round(time.Second), o.estimate().Round(10*time.Second))
	return nil
}

// Waiting for a quiet machine: before each run, other processes' CPU use is sampled for
// quietSample; while it is at least quietThreshold cores the run waits, for at most
// quietMaxPerRun per run and the -quiet-budget over the whole benchmark.
const (
	quietSample    = 300 * time.Millisecond
	quietThreshold = 0.3
	quietMaxPerRun = 30 * time.Second
)

// bench runs pgbench against targets of one cluster.
type bench struct {
	cluster  *cluster.Cluster
	runner   pgbenchRunner
	duration time.Duration
	logf     func(string, ...any)
	// quietBudget is what is left of the time runs may wait for other processes to calm down.
	quietBudget time.Duration
	// waited is the total time runs waited for a quiet machine.
	waited time.Duration
	// runsLeft is the number of measured runs still to come, to spread the budget over them.
	runsLeft int
}

// otherLoad samples, over d, the CPU cores used by processes outside the benchmark; NaN if unknown.
func (b *bench) otherLoad(ctx context.Context, d time.Duration) float64 {
	oursBefore, _ := b.ourTicks(nil)
	busyBefore := busyTicks()
	started := time.Now()
	select {
	case <-ctx.Done():
		return math.NaN()
	case <-time.After(d):
	}
	oursAfter, _ := b.ourTicks(nil)
	busyAfter := busyTicks()
	if busyBefore < 0 || busyAfter < 0 {
		return math.NaN()
	}
	other := (busyAfter - busyBefore) - (oursAfter - oursBefore)
	return max(0, ticksToDuration(other).Seconds()/time.Since(started).Seconds())
}

// waitQuiet waits, within the budget, until other processes use less than quietThreshold cores.
// One run may use up to three times its share of what is left of the budget, at most quietMaxPerRun.
func (b *bench) waitQuiet(ctx context.Context) {
	limit := quietMaxPerRun
	if b.runsLeft > 0 {
		limit = min(limit, 3*b.quietBudget/time.Duration(b.runsLeft))
	}
	b.runsLeft--
	started := time.Now()
	var load float64
	for {
		load = b.otherLoad(ctx, quietSample)
		if math.IsNaN(load) || load < quietThreshold {
			break
		}
		// The next sample must fit in what is left of this run's wait and of the budget.
		waited := time.Since(started)
		if waited+quietSample > limit || waited+quietSample > b.quietBudget {
			break
		}
	}
	// Only the time beyond the first sample counts as waiting.
	extra := time.Since(started) - quietSample
	if extra <= 0 {
		return
	}
	b.quietBudget = max(0, b.quietBudget-extra)
	b.waited += extra
	if extra >= time.Second {
		b.logf("  waited %s for other processes to calm down (now %.2f cores; %s of the budget left)",
			extra.Round(100*time.Millisecond), load, b.quietBudget.Round(time.Second))
	}
}

// ourTicks returns the CPU ticks used so far by this process and its descendants (pgbench, the
// proxies) and by the cluster's servers, plus those of t's proxy tree alone.
func (b *bench) ourTicks(t *target) (ours, proxy int64) {
	table := readProcTable()
	ours = table.treeTicks(os.Getpid())
	for _, node := range b.cluster.Nodes {
		if pid, err := node.PostmasterPID(); err == nil {
			ours += table.treeTicks(pid)
		}
	}
	if t != nil && t.proc != nil {
		proxy = table.treeTicks(t.proc.pid())
	}
	return ours, proxy
}

// runOne resets the cluster's state if the workload writes, waits for the standbys, restarts
// the proxy if it has exited, and runs pgbench once against t, measuring the proxy's CPU time
// and the CPU that processes outside the benchmark used meanwhile.
func (b *bench) runOne(ctx context.Context, w workload, t *target) (runResult, error) {
	if w.writes() {
		if err := resetState(ctx, b.cluster); err != nil {
			return runResult{}, err
		}
	}
	if err := catchUp(ctx, b.cluster); err != nil {
		return runResult{}, err
	}
	if note := t.noteExit(); note != "" {
		b.logf("  %s", note)
		if err := t.launch(ctx); err != nil {
			if ctx.Err() != nil {
				return runResult{}, ctx.Err()
			}
			return runResult{failed: true, errLine: t.label() + " could not be restarted: " + err.Error()}, nil
		}
		b.logf("  %s restarted as pid %d", t.label(), t.proc.pid())
	}
	b.waitQuiet(ctx)
	if ctx.Err() != nil {
		return runResult{}, ctx.Err()
	}
	oursBefore, proxyBefore := b.ourTicks(t)
	busyBefore := busyTicks()
	started := time.Now()
	out, err := b.runner.run(ctx, t.host, t.port, b.duration+pgbenchGrace, w.args(b.duration, b.runner.scriptDir)...)
	stdout, stderr := out.stdout, out.stderr
	if ctx.Err() != nil {
		return runResult{}, ctx.Err()
	}
	wall := time.Since(started)
	oursAfter, proxyAfter := b.ourTicks(t)
	busyAfter := busyTicks()

	r := parsePgbench(w, stdout, stderr, err)
	r.notices = out.notices
	if t.proc != nil {
		r.cpu, r.hasCPU = ticksToDuration(proxyAfter-proxyBefore), true
	}
	r.otherCores = math.NaN()
	if busyBefore >= 0 && busyAfter >= 0 && wall > 0 {
		other := (busyAfter - busyBefore) - (oursAfter - oursBefore)
		r.otherCores = max(0, ticksToDuration(other).Seconds()/wall.Seconds())
	}
	t.sampleRSS()
	if note := t.noteExit(); note != "" {
		r.failed = true
		r.errLine = note
	}
	if r.failed {
		r.detail = strings.TrimSpace(stderr)
		if r.detail == "" {
			r.detail = strings.TrimSpace(stdout)
		}
		if t.proc != nil {
			// The proxy's own account of the failure (pgowl logs at warn: node state changes and errors).
			if tail := t.proc.logTail(failedRunLogLines); tail != "" {
				r.detail = t.label() + "'s log, last lines:\n" + tail + "\n\n" + r.detail
			}
		}
	}
	return r, nil
}

// failedRunLogLines is how much of a proxy's log a failed run's details show.
const failedRunLogLines = 12

// warmUpDurations are the pgbench -T of a target's unmeasured warm-up attempts: a longer one
// follows when the clients needed the whole run to connect.
var warmUpDurations = []time.Duration{3 * time.Second, 8 * time.Second, 15 * time.Second}

// pgpoolWarmUpDurations are pgpool-II's: connecting 100 clients that each open three server
// connections takes several seconds.
var pgpoolWarmUpDurations = []time.Duration{10 * time.Second, 20 * time.Second}

// warmUp runs the mixed scripts through every target, unmeasured, with as many clients as the
// target's pool has room for, so that every proxy starts the measured runs with its server
// connections to every node it uses already open (pgpool-II opens them per child process, pgowl
// and PgBouncer per pool) and PostgreSQL's caches are warm.
func warmUp(ctx context.Context, c *cluster.Cluster, runner pgbenchRunner, targets []*target, logf func(string, ...any)) error {
	for _, t := range targets {
		if t.skipped != "" {
			continue
		}
		clients, durations := 64, warmUpDurations
		if t.name == targetPgpool {
			clients, durations = pgpoolChildren, pgpoolWarmUpDurations
		}
		for attempt, duration := range durations {
			args := []string{"-n", "-T", strconv.Itoa(int(duration / time.Second)), "-c", strconv.Itoa(clients), "-j", "2", "-M", "simple",
				"-f", filepath.Join(runner.scriptDir, readScript.name) + "@" + strconv.Itoa(readScript.weight),
				"-f", filepath.Join(runner.scriptDir, writeScript.name) + "@" + strconv.Itoa(writeScript.weight)}
			started := time.Now()
			out, err := runner.run(ctx, t.host, t.port, duration+pgbenchGrace, args...)
			stdout, stderr := out.stdout, out.stderr
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r := parsePgbench(workload{kind: mixed, scripts: []script{readScript, writeScript}}, stdout, stderr, err)
			if !r.failed {
				logf("warm-up %s with %d clients for %s: %.0f tps, initial connection %.0f ms, %s in all",
					t.label(), clients, duration, r.tps, r.connMS, time.Since(started).Round(100*time.Millisecond))
				break
			}
			logf("warm-up %s with %d clients for %s: %s; pgbench said: %s", t.label(), clients, duration, r.errLine,
				oneLine(lastLines(stderr+"\n"+stdout, 3)))
			if attempt == len(durations)-1 {
				logf("warm-up %s: giving up; the measured runs will show whether this persists", t.label())
			}
		}
	}
	if err := resetState(ctx, c); err != nil {
		return err
	}
	return catchUp(ctx, c)
}

// resetState gives every write run the same start: an empty pgbench_history and freshly
// vacuumed branches and tellers, as pgbench's own pre-run vacuum does, done on the primary.
func resetState(ctx context.Context, c *cluster.Cluster) error {
	primary := c.Nodes[0]
	conn, err := pgx.Connect(ctx, primary.DSN(cluster.Superuser, "", benchDatabase))
	if err != nil {
		return fmt.Errorf("reset before a write run: %w", err)
	}
	defer conn.Close(context.Background())
	for _, sql := range []string{
		"TRUNCATE pgbench_history",
		"VACUUM pgbench_branches",
		"VACUUM pgbench_tellers",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("reset before a write run: %s: %w", sql, err)
		}
	}
	return nil
}

// catchUp waits until every standby has replayed everything the primary has written.
func catchUp(ctx context.Context, c *cluster.Cluster) error {
	for _, standby := range c.Nodes[1:] {
		if err := standby.WaitCaughtUp(ctx, c.Nodes[0]); err != nil {
			return fmt.Errorf("waiting for %s to catch up: %w", standby.Name, err)
		}
	}
	return nil
}

// describeNodes logs what pgpool-II and pgowl think of the nodes before the runs.
func (l *lab) describeNodes(ctx context.Context, targets []*target, logf func(string, ...any)) {
	for _, t := range targets {
		if t.skipped != "" {
			continue
		}
		var sql string
		switch t.name {
		case targetPgpool:
			sql = "SHOW pool_nodes"
		case targetPgowl:
			sql = "SHOW pgowl.nodes"
		default:
			continue
		}
		askCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := l.query(askCtx, t, sql, func(row []string) {
			logf("  %s %s: %s", t.label(), sql, strings.Join(row, " | "))
		})
		cancel()
		if err != nil {
			logf("  %s %s: %v", t.label(), sql, err)
		}
	}
}

// fileExists reports whether path names an existing file.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// summary is one progress line for a run.
func (r runResult) summary() string {
	if r.failed {
		return "FAILED: " + r.errLine
	}
	s := fmt.Sprintf("tps %9.1f  latency %7.3f ms  conn %7.1f ms", r.tps, r.latencyMS, r.connMS)
	if r.hasCPU && r.statements > 0 {
		s += fmt.Sprintf("  proxy CPU %5.2fs = %.3fs/10k stmts", r.cpu.Seconds(), r.cpuPer10k())
	}
	if r.failedTx > 0 {
		s += fmt.Sprintf("  failed tx %d", r.failedTx)
	}
	if r.notices > 0 && r.statements > 0 {
		s += fmt.Sprintf("  notices/stmt %.2f", float64(r.notices)/float64(r.statements))
	}
	return s
}

// cpuPer10k is the proxy's CPU seconds per 10,000 statements of the run, or NaN.
func (r runResult) cpuPer10k() float64 {
	if !r.hasCPU || r.statements == 0 {
		return math.NaN()
	}
	return r.cpu.Seconds() / float64(r.statements) * 10000
}
