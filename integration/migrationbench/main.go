package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
	"github.com/pgowl/pgowl/proxy"
)

// The login the script runs as, through pgowl and directly.
const (
	benchUser     = "migrator"
	benchPassword = "migration-secret"
)

// Script size: what the issue that asked for this benchmark names.
const (
	defaultFunctions = 200
	// every typeEvery-th function is followed by a type and a view.
	typeEvery = 4
)

// runTimeout bounds one run of the script; startTimeout bounds starting the cluster and pgowl.
const (
	runTimeout   = 2 * time.Minute
	startTimeout = 2 * time.Minute
)

// Target and protocol names, in report order.
const (
	targetDirect    = "direct"
	targetPgowl     = "pgowl"
	targetPgBouncer = "pgbouncer"
	targetByteRelay = "relay"
	// targetRelayProcess is the byte relay run as a process of its own (-relay-process).
	targetRelayProcess = "relay_process"
	targetBaseline     = "baseline"
)

// targetDatabase is the database a target's runs make their objects in: each target its own.
// pgowl's change polls then find in the databases it serves only what its own runs made (told by
// their sessions) and the harness's schemas; a direct run's objects, or a relay's, made in a
// database pgowl shared with them, were found by its polls as made past it and read by name in
// the middle of those runs, on the node's CPU (15-18 ms in one run in four, by the node's
// statement log, 2026-12-07): a cost of pgowl's put on the others.
func targetDatabase(target string) string { return "mig_" + target }

// execIn runs sql as the superuser in database on node, over a connection of its own.
func execIn(ctx context.Context, node *cluster.Node, database, sql string) error {
	conn, err := pgx.Connect(ctx, node.DatabaseDSN(database))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

var protocols = []protocol{{name: "simple"}, {name: "extended", extended: true}}

// protocol is how the client sends each statement: a Query message, or (extended) the unnamed
// statement's Parse, Bind, Describe, Execute and Sync in one write, as PgJDBC sends a statement it
// has not prepared. pgx's Exec is not used for the extended one: without arguments it sends a
// Query whatever its QueryExecMode.
type protocol struct {
	name     string
	extended bool
}

// step is one statement of the script; change says it changes the catalogue (else it uses a change).
type step struct {
	sql    string
	change bool
	// kind names the statement's shape in the report's breakdown (stepKinds).
	kind string
}

// The statement shapes of the script, in the report's order.
const (
	kindPLpgSQLFunction = "CREATE FUNCTION (PL/pgSQL)"
	kindSQLFunction     = "CREATE FUNCTION (SQL, calls the previous)"
	kindFunctionCall    = "SELECT f_n(n)"
	kindType            = "CREATE TYPE"
	kindTypeCast        = "a cast to the type"
	kindView            = "CREATE VIEW"
	kindViewRead        = "a read of the view"
	kindFloor           = "SELECT n"
)

var stepKinds = []string{kindPLpgSQLFunction, kindSQLFunction, kindFunctionCall, kindType, kindTypeCast, kindView, kindViewRead}

// options are the command-line settings.
type options struct {
	rounds, functions int
	maxRatio          float64
	logPath, out      string
	// routingLogPath receives pgowl's log at its default level, info: the routing log's line per
	// statement, written as deployed (the cost of writing it is in the measurement).
	routingLogPath string
	// changesOnly leaves out the statements that use the changes: what pgowl costs a script of DDL alone.
	changesOnly bool
	// process runs pgowl as a process of its own (cmd/pgowl built from this module), not in the
	// benchmark's process.
	process bool
	// repeatTexts sends every run the same statement texts: pgowl's caches by text (verdicts,
	// bodies parsed) then serve every run after the first, as for a migration applied to many
	// databases alike. Without it each run's names carry its number, as a migration runs once.
	repeatTexts bool
	// pgbouncer adds PgBouncer as a third target: what a relay that does nothing else costs.
	pgbouncer bool
	// byteRelay adds a relay in this process that copies bytes and does nothing else.
	byteRelay bool
	// relayProcess adds the same relay run as a process of its own, as a proxy is deployed.
	relayProcess bool
	// standby puts a streaming standby behind pgowl beside the primary, as deployed: the uses,
	// reads, may then go to it, and a statement whose verdict picks the node is not sent ahead
	// of its session's change being taken in.
	standby bool
	// baselineBinary is a pgowl binary built at another commit, run as a process of its own as
	// a further target ("" for none).
	baselineBinary string
	// settle waits before each run until pgowl has taken in what the benchmark changed past it
	// between runs (settle.go).
	settle bool
	// nodeCPUs is -node-cpus: the CPUs the node's processes are pinned to, this process and
	// the proxies it starts to the rest ("" leaves every process where the kernel puts it).
	nodeCPUs string
	// nodeSocket has the proxies reach the node through its Unix socket, as a proxy beside its
	// database can, where the clients, direct or not, connect over TCP.
	nodeSocket bool
	command    string
}

// pgowlInstance is the pgowl the benchmark runs against: its address, the warning lines it logged
// so far, how to stop it, and its process when it runs as one of its own (0 in this process).
type pgowlInstance struct {
	addr     string
	warnings func() []string
	stop     func()
	pid      int
}

// timing is one run's result.
type timing struct {
	total, change, use time.Duration
	// byKind is the time of the run's statements of each kind (step.kind), and counts how many.
	byKind map[string]time.Duration
	counts map[string]int
	// cpu is the CPU time used while the run's statements ran (not while it connected): this
	// process's (the client's, and pgowl's when it runs here) and the proxy's process's; and the
	// bytes this process allocated meanwhile.
	cpu cpuReading
}

func main() {
	var o options
	flag.IntVar(&o.rounds, "rounds", 5, "runs per target and protocol")
	flag.IntVar(&o.functions, "functions", defaultFunctions, "functions the script creates (a type and a view per 4)")
	flag.Float64Var(&o.maxRatio, "max-ratio", targetRatio, "exit 1 when pgowl/direct exceeds this in either protocol")
	flag.StringVar(&o.logPath, "log", "", "write pgowl's debug log to this file")
	flag.StringVar(&o.routingLogPath, "routing-log", "", "write pgowl's log at its default level (info: a routing-log line per statement) to this file, as deployed; by default pgowl logs warnings only, so the statements' lines are neither formatted nor written")
	flag.StringVar(&o.out, "out", "", "write the report into this file's migrationbench section (docs/benchmarks.md)")
	flag.BoolVar(&o.changesOnly, "changes-only", false, "leave out the statements that use each change")
	flag.BoolVar(&o.repeatTexts, "repeat-texts", false, "send every run the same texts, so that pgowl's caches by text serve the runs after the first (by default each run's names are its own, as a migration runs once)")
	flag.BoolVar(&o.pgbouncer, "pgbouncer", false, "add PgBouncer (session pooling, from PATH or /usr/sbin) as a third target: what a relay that does nothing else costs on this machine")
	flag.BoolVar(&o.process, "process", false, "run pgowl as a process of its own (built from this module), as it is deployed, not in the benchmark's process")
	flag.BoolVar(&o.byteRelay, "byte-relay", false, "add a relay in this process that copies bytes between the client and the primary and does nothing else: what the extra hop of any proxy in Go, run where pgowl runs, costs on this machine")
	flag.BoolVar(&o.relayProcess, "relay-process", false, "add the byte relay (-byte-relay) run as a process of its own (this binary again), placed as -process places pgowl: what the extra hop of any proxy in Go, deployed as pgowl is, costs on this machine")
	relayUpstream := flag.String("serve-byte-relay", "", "serve the byte relay to this upstream address and print the address it listens on (how -relay-process starts its relay)")
	flag.StringVar(&o.baselineBinary, "baseline-binary", "", "add a pgowl binary built elsewhere (go build -o /tmp/pgowl-old ./cmd/pgowl in a worktree at another commit) as a target, run as a process of its own and interleaved with the others: with -process, two builds compared in one sitting")
	flag.BoolVar(&o.standby, "standby", false, "put a streaming standby behind pgowl beside the primary, as deployed (direct still runs on the primary): a use's verdict then picks its node, so it waits for its session's change to be taken in before it is routed")
	flag.BoolVar(&o.nodeSocket, "node-socket", false, "have pgowl, the baseline binary and PgBouncer reach the node through its Unix socket (node host: the socket's directory), as a proxy beside its database can; the clients, direct ones included, and -byte-relay stay on TCP")
	flag.StringVar(&o.nodeCPUs, "node-cpus", "", "pin the node's processes to these CPUs (a list as taskset -c takes: 1, 2-3) and this process, the clients and pgowl in it, and the proxies it starts to the others, as a database server has CPUs of its own; by default the kernel places every process, and on a machine of few CPUs it often packs the proxy's work beside the node's backend")
	flag.BoolVar(&o.settle, "settle", true, "before each run, wait a change-poll interval and then until no other session is at work on the node, so that pgowl's background reads of what the benchmark changed past it between runs (schemas dropped and made) do not fall into the next run")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process (pgowl and the clients) to this file")
	memProfile := flag.String("memprofile", "", "write a profile of what this process (pgowl and the clients) allocated, at the end, to this file (go tool pprof -sample_index=alloc_space)")
	blockProfile := flag.String("blockprofile", "", "write a profile of where goroutines blocked (channels, locks, select) to this file")
	mutexProfile := flag.String("mutexprofile", "", "write a profile of contended mutexes to this file")
	tracePath := flag.String("trace", "", "write an execution trace (go tool trace: goroutine handoffs, scheduling, network waits) to this file")
	flag.Parse()
	if *relayUpstream != "" {
		if err := serveByteRelay(*relayUpstream); err != nil {
			fmt.Fprintln(os.Stderr, "migrationbench:", err)
			os.Exit(1)
		}
		return
	}
	o.command = strings.Join(append([]string{"go run ./integration/migrationbench"}, os.Args[1:]...), " ")
	if o.rounds < 1 || o.rounds > 50 || o.functions < 4 || o.functions > 2000 {
		fmt.Fprintln(os.Stderr, "migrationbench: -rounds must be between 1 and 50, -functions between 4 and 2000")
		os.Exit(2)
	}
	if o.logPath != "" && o.routingLogPath != "" {
		fmt.Fprintln(os.Stderr, "migrationbench: -log and -routing-log are two levels of the same log: give one")
		os.Exit(2)
	}
	if *cpuProfile != "" {
		file, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(file)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "migrationbench:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	stopProfiles, err := startProfiles(*blockProfile, *mutexProfile, *tracePath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "migrationbench:", err)
		os.Exit(2)
	}
	defer stopProfiles()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ratios, err := run(ctx, o)
	if *memProfile != "" {
		if werr := writeAllocations(*memProfile); werr != nil {
			fmt.Fprintln(os.Stderr, "migrationbench:", werr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "migrationbench:", err)
		pprof.StopCPUProfile()
		stopProfiles()
		os.Exit(1)
	}
	failed := false
	for _, proto := range protocols {
		if ratio := ratios[proto.name]; ratio > o.maxRatio {
			fmt.Fprintf(os.Stderr, "migrationbench: %s protocol: pgowl took %.2fx direct, more than %.2fx\n", proto.name, ratio, o.maxRatio)
			failed = true
		}
	}
	if failed {
		pprof.StopCPUProfile()
		stopProfiles()
		os.Exit(1)
	}
}

// writeAllocations writes the allocation profile (every allocation since the start, sampled) to
// path.
func writeAllocations(path string) error {
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	defer file.Close()
	return pprof.Lookup("allocs").WriteTo(file, 0)
}

// startProfiles starts the block and mutex profiles and the execution trace that have a path;
// stop writes them (once).
func startProfiles(blockPath, mutexPath, tracePath string) (stop func(), err error) {
	var traceFile *os.File
	if tracePath != "" {
		if traceFile, err = os.Create(tracePath); err != nil {
			return nil, err
		}
		if err = trace.Start(traceFile); err != nil {
			traceFile.Close()
			return nil, err
		}
	}
	if blockPath != "" {
		runtime.SetBlockProfileRate(int(10 * time.Microsecond)) // a sample per 10 µs blocked
	}
	if mutexPath != "" {
		runtime.SetMutexProfileFraction(10)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if traceFile != nil {
				trace.Stop()
				traceFile.Close()
			}
			for _, p := range []struct{ name, path string }{{"block", blockPath}, {"mutex", mutexPath}} {
				if p.path == "" {
					continue
				}
				file, err := os.Create(p.path)
				if err == nil {
					err = pprof.Lookup(p.name).WriteTo(file, 0)
					file.Close()
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "migrationbench:", err)
				}
			}
		})
	}, nil
}

// run starts the cluster and pgowl, runs every round and prints the report; it returns the ratio
// of the medians per protocol.
func run(ctx context.Context, o options) (map[string]float64, error) {
	startCtx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var split *cpuSplit
	if o.nodeCPUs != "" {
		allowed, err := allowedCPUs()
		if err == nil {
			split, err = newCPUSplit(o.nodeCPUs, allowed)
		}
		if err == nil {
			// Before the cluster starts: the processes started from here on (the cluster's,
			// until they are moved to the node's CPUs, pgowl's, PgBouncer's) take these CPUs.
			err = pinProcess(os.Getpid(), split.rest)
		}
		if err != nil {
			return nil, err
		}
	}
	clusterOptions := cluster.Options{Users: []cluster.User{{Name: benchUser, Password: benchPassword}}}
	if o.standby {
		clusterOptions.Standbys = 1
	}
	c, err := cluster.StartWatched(startCtx, clusterOptions)
	if err != nil {
		return nil, fmt.Errorf("start PostgreSQL: %w", err)
	}
	defer c.Close()
	if split != nil {
		for _, node := range c.Nodes {
			if err := pinNode(node, split.node); err != nil {
				return nil, err
			}
		}
	}
	primary := c.Nodes[0]
	start := startPgowl
	if o.process {
		start = startPgowlProcess
	}
	nodes := proxyNodes(c.Nodes, o.nodeSocket)
	owl, err := start(startCtx, nodes, o.pgowlLog())
	if err != nil {
		return nil, err
	}
	defer owl.stop()
	addr, warnings := owl.addr, owl.warnings
	meters := map[string]cpuMeter{}
	dsn := map[string]string{targetDirect: primary.DSN(benchUser, benchPassword, targetDatabase(targetDirect))}
	targets := []string{targetDirect}
	// addProxy adds a proxy listening on addr as a target; pid is its process (0: this one).
	addProxy := func(target, addr string, pid int) {
		dsn[target] = "postgres://" + benchUser + ":" + benchPassword + "@" + addr + "/" + targetDatabase(target) + "?sslmode=disable"
		targets = append(targets, target)
		meters[target] = cpuMeter{proxyPID: pid}
	}
	addProxy(targetPgowl, addr, owl.pid)
	if o.pgbouncer {
		bouncerAddr, bouncerPID, stopBouncer, err := startPgBouncer(startCtx, nodes[0])
		if err != nil {
			return nil, err
		}
		defer stopBouncer()
		addProxy(targetPgBouncer, bouncerAddr, bouncerPID)
	}
	upstream := net.JoinHostPort(primary.Host, fmt.Sprint(primary.Port))
	if o.byteRelay {
		relayAddr, stopRelay, err := startByteRelay(upstream)
		if err != nil {
			return nil, err
		}
		defer stopRelay()
		addProxy(targetByteRelay, relayAddr, 0)
	}
	if o.relayProcess {
		relay, err := startByteRelayProcess(startCtx, upstream)
		if err != nil {
			return nil, fmt.Errorf("-relay-process: %w", err)
		}
		defer relay.stop()
		addProxy(targetRelayProcess, relay.addr, relay.pid)
	}
	if o.baselineBinary != "" {
		base, err := startPgowlBinary(startCtx, nodes, pgowlLog{}, o.baselineBinary)
		if err != nil {
			return nil, fmt.Errorf("-baseline-binary: %w", err)
		}
		defer base.stop()
		addProxy(targetBaseline, base.addr, base.pid)
	}
	for _, target := range targets {
		if err := primary.Exec(startCtx, fmt.Sprintf("CREATE DATABASE %s OWNER %s", targetDatabase(target), benchUser)); err != nil {
			return nil, err
		}
	}
	steps := script(o.functions, "")
	floor := floorScript(floorRepeat * statementsRun(steps, o.changesOnly))
	results := map[string][]timing{} // protocol/target -> runs
	var settling *settler
	if o.settle {
		if settling, err = newSettler(startCtx, primary); err != nil {
			return nil, err
		}
		defer settling.close()
	}
	began, loadBefore := time.Now(), loadAverage()
	run := 0
	for round := 1; round <= o.rounds; round++ {
		for _, proto := range protocols {
			for _, target := range targets {
				run++
				if !o.repeatTexts {
					steps = script(o.functions, fmt.Sprintf("%03d", run))
				}
				schema := fmt.Sprintf("mig_%s_%s_%d", proto.name, target, round)
				if err := execIn(ctx, primary, targetDatabase(target), fmt.Sprintf("CREATE SCHEMA %s AUTHORIZATION %s", schema, benchUser)); err != nil {
					return nil, err
				}
				if settling != nil {
					if err := settling.settle(ctx); err != nil {
						return nil, err
					}
				}
				// PgBouncer does not pass search_path on from the startup packet: it is SET.
				setPath := target == targetPgBouncer
				t, err := runScript(ctx, dsn[target], proto, steps, schema, o.changesOnly, setPath, meters[target])
				if err != nil {
					return nil, fmt.Errorf("round %d, %s protocol, %s: %w", round, proto.name, target, err)
				}
				key := proto.name + "/" + target
				results[key] = append(results[key], t)
				fmt.Fprintf(os.Stderr, "round %d %-8s %-6s %8.1f ms\n", round, proto.name, target, ms(t.total))
				floorRun, err := runScript(ctx, dsn[target], proto, floor, schema, false, setPath, meters[target])
				if err != nil {
					return nil, fmt.Errorf("round %d, %s protocol, %s, floor: %w", round, proto.name, target, err)
				}
				results[key+"/floor"] = append(results[key+"/floor"], floorRun)
				if err := execIn(ctx, primary, targetDatabase(target), fmt.Sprintf("DROP SCHEMA %s CASCADE", schema)); err != nil {
					return nil, err
				}
			}
		}
	}
	ratios := map[string]float64{}
	var report strings.Builder
	fmt.Fprintf(&report, "## Migration script\n\nGenerated by `%s` on %s (%s of wall time; load average before and after: %s, %s).\n\n",
		o.command, began.UTC().Format("2006-01-02 15:04 UTC"), time.Since(began).Round(time.Second), loadBefore, loadAverage())
	fmt.Fprintf(&report, "A migration-shaped script, %d statements in autocommit: %d functions (PL/pgSQL and SQL, each calling the previous), %d composite types and %d views, each used by the next statement (`SELECT f_n(n)`, a cast to the type, a read of the view).",
		len(steps), o.functions, o.functions/typeEvery, o.functions/typeEvery)
	if o.changesOnly {
		report.WriteString(" With -changes-only: the uses are left out.")
	}
	where := "in the benchmark's process"
	if o.process {
		where = "as a process of its own (`-process`: cmd/pgowl built from this checkout)"
	}
	report.WriteString(reachesNode(o.nodeSocket))
	report.WriteString(" The simple protocol sends each statement as a Query; the extended one as the unnamed statement's Parse, Bind, Describe, Execute and Sync in one write, as PgJDBC sends a statement it has not prepared.")
	texts := "each run's names carry its number, so that no statement text repeats across runs, as a migration runs once: pgowl's caches by text serve no run"
	if o.repeatTexts {
		texts = "with `-repeat-texts`: every run sends the same texts, so pgowl's caches by text (verdicts, bodies parsed) serve every run after the first, as for a migration applied to many databases alike"
	}
	fmt.Fprintf(&report, " Every target runs it %d time(s) per protocol, interleaved, each time in a new schema of a database of the target's own (so that pgowl's change polls find no other target's objects to read), over one connection; %s. The table gives the medians. pgowl runs %s, %s, with its default configuration %s. %s \"changes + uses\" splits the time between the statements that change the catalogue and those that use a change.\n\n", o.rounds, texts, behind(o.standby), where, o.pgowlLog().describe(), split.describe())
	report.WriteString(settling.describe() + "\n\n")
	fmt.Fprintf(&report, "\"Each round\" divides each round's pgowl run by the same round's direct run: the spread of those ratios is what one run's ratio can be on this machine, and the last column counts the rounds within %.2f×, the bound pgowl is held to (issue 17; `-max-ratio`'s default).\n\n", targetRatio)
	report.WriteString("| protocol | direct | pgowl | pgowl / direct | direct: changes + uses | pgowl: changes + uses | each round: lowest, median, highest | rounds within the bound |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, proto := range protocols {
		directRuns, owlRuns := results[proto.name+"/"+targetDirect], results[proto.name+"/"+targetPgowl]
		direct, owl := median(directRuns), median(owlRuns)
		ratio := float64(owl.total) / float64(direct.total)
		ratios[proto.name] = ratio
		spread := roundRatios(directRuns, owlRuns)
		within := 0
		for _, r := range spread {
			if r <= targetRatio {
				within++
			}
		}
		fmt.Fprintf(&report, "| %s | %.0f ms | %.0f ms | %.2f× | %.0f + %.0f ms | %.0f + %.0f ms | %.2f×, %.2f×, %.2f× | %d of %d |\n", proto.name, ms(direct.total), ms(owl.total), ratio,
			ms(direct.change), ms(direct.use), ms(owl.change), ms(owl.use),
			spread[0], spread[len(spread)/2], spread[len(spread)-1], within, len(spread))
	}
	report.WriteString(kindBreakdown(results, targets))
	fmt.Fprintf(&report, "\nThe relay's floor: %d times as many statements that change nothing and cost the node almost nothing (`SELECT n`), over one connection, right after each run of the script. What pgowl adds per statement there is what any statement costs it; the script's own ratio is that floor plus what its catalogue changes cost. The floor's statements are so short that a run's scheduling delays move it by tens of µs per statement (even below zero): compare it over several runs.\n\n", floorRepeat)
	report.WriteString("| protocol | floor: direct | floor: pgowl | added per statement | script: added per statement | script's ratio if it added only the floor |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, proto := range protocols {
		direct, owl := median(results[proto.name+"/"+targetDirect+"/floor"]), median(results[proto.name+"/"+targetPgowl+"/floor"])
		scriptDirect, scriptOwl := median(results[proto.name+"/"+targetDirect]), median(results[proto.name+"/"+targetPgowl])
		statements := float64(statementsRun(steps, o.changesOnly))
		floorAdded := float64(owl.total-direct.total) / (floorRepeat * statements)
		scriptAdded := float64(scriptOwl.total-scriptDirect.total) / statements
		fmt.Fprintf(&report, "| %s | %.0f ms | %.0f ms | %.0f µs | %.0f µs | %.2f× |\n", proto.name, ms(direct.total), ms(owl.total),
			floorAdded/1e3, scriptAdded/1e3, (float64(scriptDirect.total)+floorAdded*statements)/float64(scriptDirect.total))
	}
	fmt.Fprintf(&report, "\nCPU per statement, the medians of the runs: what this process used while a run's statements ran (the client alone in a direct run; the client and pgowl in a pgowl run when pgowl runs in this process), and the proxy's process (pgowl with `-process`, PgBouncer). \"added\" is the difference between a proxy's runs and the direct ones plus the proxy's process: what the proxy costs in CPU per statement, which on this machine adds to the wall time nearly in full. It moves far less between runs than the wall time does: compare two builds by it. The last column is what this process allocates per statement more than in a direct run: what pgowl allocates when it runs here (the garbage collector's work grows with it), only the client's difference for a proxy of its own process. The last two columns are the time the threads of this process, and of the proxy's process, spent per statement runnable but waiting for a CPU (schedstat's run-queue time): on a machine with fewer CPUs than the client, the proxy and the node's backend keep busy, the work a proxy does while the node runs a statement waits there instead of running beside it.\n\n")
	cpuTargets := []string{targetPgowl}
	if o.pgbouncer {
		cpuTargets = append(cpuTargets, targetPgBouncer)
	}
	if o.byteRelay {
		cpuTargets = append(cpuTargets, targetByteRelay)
	}
	if o.relayProcess {
		cpuTargets = append(cpuTargets, targetRelayProcess)
	}
	if o.baselineBinary != "" {
		cpuTargets = append(cpuTargets, targetBaseline)
	}
	report.WriteString("| protocol | proxy | direct: this process | through the proxy: this process | the proxy's process | script: added | floor: added | script: bytes allocated here, added | script: waited for a CPU, direct / through the proxy: this process | the proxy's process |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	self := func(r cpuReading) float64 { return float64(r.self) }
	ofProxy := func(r cpuReading) float64 { return float64(r.proxy) }
	allocated := func(r cpuReading) float64 { return float64(r.allocated) }
	selfWaited := func(r cpuReading) float64 { return float64(r.selfWait) }
	proxyWaited := func(r cpuReading) float64 { return float64(r.proxyWait) }
	for _, proto := range protocols {
		statements := float64(statementsRun(steps, o.changesOnly))
		// perStatement is the median of part over the runs of key, per statement (µs for times).
		perStatement := func(key string, part func(cpuReading) float64, count float64) float64 {
			return medianCPU(results[key], part) / count
		}
		direct := proto.name + "/" + targetDirect
		for _, target := range cpuTargets {
			through := proto.name + "/" + target
			added := func(suffix string, count float64) float64 {
				return (perStatement(through+suffix, self, count) - perStatement(direct+suffix, self, count) + perStatement(through+suffix, ofProxy, count)) / 1e3
			}
			fmt.Fprintf(&report, "| %s | %s | %.0f µs | %.0f µs | %.0f µs | %.0f µs | %.0f µs | %.0f B | %.0f / %.0f µs | %.0f µs |\n", proto.name, target,
				perStatement(direct, self, statements)/1e3, perStatement(through, self, statements)/1e3, perStatement(through, ofProxy, statements)/1e3,
				added("", statements), added("/floor", floorRepeat*statements),
				perStatement(through, allocated, statements)-perStatement(direct, allocated, statements),
				perStatement(direct, selfWaited, statements)/1e3, perStatement(through, selfWaited, statements)/1e3, perStatement(through, proxyWaited, statements)/1e3)
		}
	}
	report.WriteString("\nThe node's processes (every process named postgres) while the script ran, per statement, the medians of the runs: the time they ran, and the time they were runnable but waited for a CPU. What a target adds to the node's wait is the node's statements waiting behind the proxy's work (or the client's) for a CPU.\n\n| protocol | target | node ran | node waited for a CPU |\n| --- | --- | ---: | ---: |\n")
	nodeRan := func(r cpuReading) float64 { return float64(r.node) }
	nodeWaited := func(r cpuReading) float64 { return float64(r.nodeWait) }
	for _, proto := range protocols {
		statements := float64(statementsRun(steps, o.changesOnly))
		for _, target := range targets {
			key := proto.name + "/" + target
			fmt.Fprintf(&report, "| %s | %s | %.0f µs | %.0f µs |\n", proto.name, target,
				medianCPU(results[key], nodeRan)/statements/1e3, medianCPU(results[key], nodeWaited)/statements/1e3)
		}
	}
	if o.pgbouncer {
		fmt.Fprintf(&report, "\nThe anchor (`-pgbouncer`): PgBouncer in session pooling in front of the same primary, as a process of its own, run as often and interleaved with the other targets. It relays and does nothing else: what any proxy's extra hop costs on this machine.")
		if !o.process {
			report.WriteString(" pgowl runs in the benchmark's process here, so the client's hop to it wakes no other process, as the hop to PgBouncer does: run with `-process` to compare the two as deployed.")
		}
		report.WriteString("\n\n")
		report.WriteString("| protocol | direct | PgBouncer | PgBouncer / direct | pgowl / PgBouncer | floor: added per statement by PgBouncer | by pgowl |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, proto := range protocols {
			direct, bouncer, owl := median(results[proto.name+"/"+targetDirect]), median(results[proto.name+"/"+targetPgBouncer]), median(results[proto.name+"/"+targetPgowl])
			floorDirect, floorBouncer, floorOwl := median(results[proto.name+"/"+targetDirect+"/floor"]), median(results[proto.name+"/"+targetPgBouncer+"/floor"]), median(results[proto.name+"/"+targetPgowl+"/floor"])
			floorStatements := floorRepeat * float64(statementsRun(steps, o.changesOnly))
			fmt.Fprintf(&report, "| %s | %.0f ms | %.0f ms | %.2f× | %.2f× | %.0f µs | %.0f µs |\n", proto.name, ms(direct.total), ms(bouncer.total),
				float64(bouncer.total)/float64(direct.total), float64(owl.total)/float64(bouncer.total),
				float64(floorBouncer.total-floorDirect.total)/floorStatements/1e3, float64(floorOwl.total-floorDirect.total)/floorStatements/1e3)
		}
	}
	if o.byteRelay {
		report.WriteString("\nThe byte relay (`-byte-relay`): a relay in this process, where pgowl runs, that copies bytes between the client and the primary and does nothing else (two goroutines and io.Copy per connection): what the extra hop of any proxy written in Go costs here, before it parses, routes or logs anything. pgowl's ratio less the relay's is what pgowl's own work costs the script.\n\n")
		report.WriteString("| protocol | direct | byte relay | relay / direct | pgowl / relay |\n| --- | ---: | ---: | ---: | ---: |\n")
		for _, proto := range protocols {
			direct, relay, owl := median(results[proto.name+"/"+targetDirect]), median(results[proto.name+"/"+targetByteRelay]), median(results[proto.name+"/"+targetPgowl])
			fmt.Fprintf(&report, "| %s | %.0f ms | %.0f ms | %.2f× | %.2f× |\n", proto.name, ms(direct.total), ms(relay.total),
				float64(relay.total)/float64(direct.total), float64(owl.total)/float64(relay.total))
		}
	}
	if o.relayProcess {
		report.WriteString("\nThe relay process (`-relay-process`): the byte relay of `-byte-relay` (io.Copy each way, nothing else) run as a process of its own, started and placed as `-process` places pgowl: what the extra hop of any proxy written in Go and deployed as pgowl is costs here. pgowl's ratio over it is what pgowl's own work costs the script.")
		if !o.process {
			report.WriteString(" pgowl runs in the benchmark's process here: run with `-process` to compare the two as deployed.")
		}
		report.WriteString("\n\n| protocol | direct | relay process | relay process / direct | pgowl / relay process |\n| --- | ---: | ---: | ---: | ---: |\n")
		for _, proto := range protocols {
			direct, relay, owl := median(results[proto.name+"/"+targetDirect]), median(results[proto.name+"/"+targetRelayProcess]), median(results[proto.name+"/"+targetPgowl])
			fmt.Fprintf(&report, "| %s | %.0f ms | %.0f ms | %.2f× | %.2f× |\n", proto.name, ms(direct.total), ms(relay.total),
				float64(relay.total)/float64(direct.total), float64(owl.total)/float64(relay.total))
		}
	}
	if o.baselineBinary != "" {
		fmt.Fprintf(&report, "\nThe baseline (`-baseline-binary`): `%s`, another build of pgowl, as a process of its own with the same configuration, run as often and interleaved with the other targets.", o.baselineBinary)
		if !o.process {
			report.WriteString(" pgowl runs in the benchmark's process here: run with `-process` to compare the two builds alike.")
		}
		report.WriteString("\n\n| protocol | direct | baseline | baseline / direct | pgowl / direct | pgowl / baseline |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
		for _, proto := range protocols {
			direct, base, owl := median(results[proto.name+"/"+targetDirect]), median(results[proto.name+"/"+targetBaseline]), median(results[proto.name+"/"+targetPgowl])
			fmt.Fprintf(&report, "| %s | %.0f ms | %.0f ms | %.2f× | %.2f× | %.2f× |\n", proto.name, ms(direct.total), ms(base.total),
				float64(base.total)/float64(direct.total), float64(owl.total)/float64(direct.total), float64(owl.total)/float64(base.total))
		}
	}
	if o.logPath != "" {
		log, err := os.Open(o.logPath)
		if err != nil {
			return nil, err
		}
		phases, err := aheadPhases(log)
		log.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", o.logPath, err)
		}
		if phases != "" {
			report.WriteString("\n" + phases)
		}
	}
	if w := warnings(); len(w) > 0 {
		fmt.Fprintf(&report, "\npgowl logged %d warnings, the first: `%s`\n", len(w), w[0])
	}
	fmt.Print("\n" + report.String())
	if o.out != "" {
		if err := writeSection(o.out, report.String()); err != nil {
			return nil, err
		}
	}
	return ratios, nil
}

// proxyNodes gives the proxies' node list for the cluster's nodes (the primary first): each node
// at its TCP address, or at its Unix socket's directory with socket (-node-socket).
func proxyNodes(nodes []*cluster.Node, socket bool) []config.Node {
	list := make([]config.Node, 0, len(nodes))
	for _, n := range nodes {
		host := n.Host
		if socket {
			host = n.SocketDir()
		}
		list = append(list, config.Node{Name: n.Name, Host: host, Port: n.Port})
	}
	return list
}

// reachesNode says, for the report, how the proxies reach the node.
func reachesNode(socket bool) string {
	if socket {
		return " pgowl and PgBouncer reach the node through its Unix socket (`-node-socket`), as a proxy beside its database can; the clients, direct ones included, connect over TCP."
	}
	return " Every connection, the proxies' to the node included, is TCP over loopback."
}

// behind says what pgowl runs in front of, for the report.
func behind(standby bool) string {
	if standby {
		return "in front of the primary and a streaming standby (`-standby`, as deployed: the uses, reads, may go to the standby, and read_your_writes, on by default, sends one right after its session's change to the primary until the standby has replayed it; direct runs on the primary)"
	}
	return "in front of the primary alone (no standby: routing plays no part)"
}

// startPgowl runs pgowl in this process in front of nodes (the primary first) with benchUser as
// its login, and waits until a statement passes through it. warnings returns the warning lines
// logged so far.
func startPgowl(ctx context.Context, nodes []config.Node, log pgowlLog) (started pgowlInstance, err error) {
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.Nodes = nodes
	cfg.Users = []config.User{{Name: benchUser, Password: benchPassword, Auth: config.AuthSCRAM}}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return pgowlInstance{}, err
	}
	cfg.Listen = ln.Addr().String()
	if err := cfg.Validate(); err != nil {
		ln.Close()
		return pgowlInstance{}, err
	}
	logs := &warningLog{}
	logger := zerolog.New(logs).Level(zerolog.WarnLevel)
	if log.path != "" {
		file, err := os.Create(log.path)
		if err != nil {
			ln.Close()
			return pgowlInstance{}, err
		}
		defer func() {
			if err != nil {
				file.Close()
			}
		}()
		level := zerolog.InfoLevel
		if log.debug {
			level = zerolog.DebugLevel
		}
		logger = zerolog.New(zerolog.MultiLevelWriter(file, &levelFilter{logs, zerolog.WarnLevel})).
			Level(level).With().Timestamp().Logger()
	}
	inst, err := proxy.Build(cfg, logger)
	if err != nil {
		ln.Close()
		return pgowlInstance{}, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inst.Run(runCtx, ln) }()
	stop := func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
	}
	if err := waitForPgowl(ctx, cfg.Listen); err != nil {
		stop()
		return pgowlInstance{}, err
	}
	return pgowlInstance{addr: cfg.Listen, warnings: logs.lines, stop: stop}, nil
}

// waitForPgowl returns once pgowl at addr answers a statement as benchUser (at most 10 s).
func waitForPgowl(ctx context.Context, addr string) error {
	dsn := "postgres://" + benchUser + ":" + benchPassword + "@" + addr + "/postgres?sslmode=disable"
	for attempt := 0; ; attempt++ {
		conn, err := pgconn.Connect(ctx, dsn)
		if err == nil {
			err = conn.Exec(ctx, "SELECT 1").Close()
			conn.Close(context.Background())
			if err == nil {
				return nil
			}
		}
		if attempt == 100 || ctx.Err() != nil {
			return fmt.Errorf("pgowl did not answer: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pgowlLog is where pgowl's log goes: nowhere but the report's warnings when path is "", else
// to the file at path, at debug level when debug is set (-log), else at pgowl's default level,
// info (-routing-log).
type pgowlLog struct {
	path  string
	debug bool
}

// describe says, for the report, what pgowl logged.
func (l pgowlLog) describe() string {
	switch {
	case l.debug:
		return "but for its log: at debug level, to a file (`-log`)"
	case l.path != "":
		return "and log level (info: a routing-log line per statement), its log written to a file (`-routing-log`)"
	}
	return "but for its log level: warn, so that the routing log's line per statement is neither formatted nor written (`-routing-log` writes it)"
}

// pgowlLog is the log the options ask for.
func (o options) pgowlLog() pgowlLog {
	if o.logPath != "" {
		return pgowlLog{path: o.logPath, debug: true}
	}
	return pgowlLog{path: o.routingLogPath}
}

// levelFilter passes on only lines of at least level.
type levelFilter struct {
	next  *warningLog
	level zerolog.Level
}

func (f *levelFilter) Write(p []byte) (int, error) { return len(p), nil }

func (f *levelFilter) WriteLevel(level zerolog.Level, p []byte) (int, error) {
	if level >= f.level {
		return f.next.Write(p)
	}
	return len(p), nil
}

// warningLog keeps pgowl's warning lines.
type warningLog struct {
	mu    sync.Mutex
	kept  []string
	total int
}

func (w *warningLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.total++
	if len(w.kept) < 20 {
		w.kept = append(w.kept, strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

func (w *warningLog) lines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.kept)
}

// script is the migration.
// script returns the statements of one run; tag, when not empty, goes into every name it creates,
// so that no two runs send the same text.
func script(functionCount int, tag string) []step {
	if tag != "" {
		tag += "_"
	}
	var steps []step
	for i := 0; i < functionCount; i++ {
		switch {
		case i%2 == 0:
			steps = append(steps, step{sql: fmt.Sprintf(`CREATE FUNCTION f_%s%d(x integer) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  result integer;
BEGIN
  SELECT x + %d INTO result;
  RETURN result;
END
$$`, tag, i, i), change: true, kind: kindPLpgSQLFunction})
		default:
			steps = append(steps, step{sql: fmt.Sprintf(`CREATE FUNCTION f_%s%d(x integer) RETURNS integer LANGUAGE sql STABLE AS $$ SELECT f_%s%d(x) + 1 $$`, tag, i, tag, i-1), change: true, kind: kindSQLFunction})
		}
		steps = append(steps, step{sql: fmt.Sprintf("SELECT f_%s%d(%d)", tag, i, i), kind: kindFunctionCall})
		if i%typeEvery == typeEvery-1 {
			n := i / typeEvery
			steps = append(steps,
				step{sql: fmt.Sprintf("CREATE TYPE t_%s%d AS (a integer, b text)", tag, n), change: true, kind: kindType},
				step{sql: fmt.Sprintf("SELECT (ROW(%d, 'x')::t_%s%d).a", n, tag, n), kind: kindTypeCast},
				step{sql: fmt.Sprintf("CREATE VIEW v_%s%d AS SELECT g, f_%s%d(g) AS y FROM generate_series(1, 3) AS g", tag, n, tag, i), change: true, kind: kindView},
				step{sql: fmt.Sprintf("SELECT sum(y) FROM v_%s%d", tag, n), kind: kindViewRead},
			)
		}
	}
	return steps
}

// statementsRun is how many statements of steps a run sends.
func statementsRun(steps []step, changesOnly bool) int {
	if !changesOnly {
		return len(steps)
	}
	count := 0
	for _, s := range steps {
		if s.change {
			count++
		}
	}
	return count
}

// floorRepeat is how many times the floor runs as many statements as the script: its statements
// are so short that a run of the script's length is at the mercy of a few scheduling delays.
const floorRepeat = 4

// floorScript is count statements that change nothing and cost the node almost nothing: what
// pgowl adds to them is what relaying, classifying and logging any statement costs.
func floorScript(count int) []step {
	steps := make([]step, count)
	for i := range steps {
		steps[i] = step{sql: fmt.Sprintf("SELECT %d", i), kind: kindFloor}
	}
	return steps
}

// runScript runs the script over one new connection whose search_path is schema, timing each statement.
// With setPath it is SET after connecting (not timed), for a target that does not pass it on.
func runScript(ctx context.Context, dsn string, proto protocol, steps []step, schema string, changesOnly, setPath bool, meter cpuMeter) (timing, error) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	config, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return timing{}, err
	}
	config.RuntimeParams["search_path"] = schema
	conn, err := pgconn.ConnectConfig(ctx, config)
	if err != nil {
		return timing{}, err
	}
	defer conn.Close(context.Background())
	if setPath {
		if err := conn.Exec(ctx, "SET search_path = "+schema).Close(); err != nil {
			return timing{}, err
		}
	}
	exec := func(sql string) error { return conn.Exec(ctx, sql).Close() }
	if proto.extended {
		exec = func(sql string) error { return conn.ExecParams(ctx, sql, nil, nil, nil, nil).Read().Err }
	}
	t := timing{byKind: map[string]time.Duration{}, counts: map[string]int{}}
	cpuBefore := meter.read()
	began := time.Now()
	for _, s := range steps {
		if !s.change && changesOnly {
			continue
		}
		start := time.Now()
		if err := exec(s.sql); err != nil {
			return timing{}, fmt.Errorf("%.60s: %w", s.sql, err)
		}
		took := time.Since(start)
		t.byKind[s.kind] += took
		t.counts[s.kind]++
		if s.change {
			t.change += took
		} else {
			t.use += took
		}
	}
	t.total = time.Since(began)
	t.cpu = meter.read().since(cpuBefore)
	return t, nil
}

// median returns the run with the median total time.
func median(runs []timing) timing {
	if len(runs) == 0 {
		return timing{}
	}
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b timing) int { return int(a.total - b.total) })
	return sorted[len(sorted)/2]
}

// targetRatio is the bound on pgowl/direct that pgowl is held to (issue 17): the default of
// -max-ratio, and what the report counts each round's ratio against.
const targetRatio = 1.5

// roundRatios returns, sorted, each round's ratio of owl's run to direct's run of the same round
// (the runs are in round order). A round's two runs follow each other, so a slow spell of the
// machine tends to touch both: the spread of these ratios is that of one run's ratio.
func roundRatios(direct, owl []timing) []float64 {
	n := min(len(direct), len(owl))
	ratios := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		if direct[i].total > 0 {
			ratios = append(ratios, float64(owl[i].total)/float64(direct[i].total))
		}
	}
	if len(ratios) == 0 {
		return []float64{0}
	}
	slices.Sort(ratios)
	return ratios
}

// medianCPU returns the median of one part of the runs' CPU readings.
func medianCPU(runs []timing, part func(cpuReading) float64) float64 {
	if len(runs) == 0 {
		return 0
	}
	values := make([]float64, len(runs))
	for i, r := range runs {
		values[i] = part(r.cpu)
	}
	slices.Sort(values)
	return values[len(values)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// loadAverage is the machine's 1-minute load average as /proc/loadavg gives it, or "unknown".
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return "unknown"
	}
	return fields[0]
}

// The markers around this benchmark's section of the report file; integration/bench keeps the
// section when it writes the rest of the file.
const (
	sectionStart = "<!-- migrationbench -->"
	sectionEnd   = "<!-- /migrationbench -->"
)

// writeSection replaces the section between the markers in the file at path with text, or appends
// it when there is none.
func writeSection(path, text string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	section := sectionStart + "\n" + text + sectionEnd
	content := string(old)
	start, end := strings.Index(content, sectionStart), strings.Index(content, sectionEnd)
	if start >= 0 && end > start {
		content = content[:start] + section + content[end+len(sectionEnd):]
	} else {
		content = strings.TrimRight(content, "\n") + "\n\n" + section + "\n"
	}
	return os.WriteFile(path, []byte(content), 0o644)
}

// kindBreakdown is the report's table of where the time goes by statement kind: per protocol and
// kind, the median over the runs of the time per statement directly, and what each proxy added
// to it.
func kindBreakdown(results map[string][]timing, targets []string) string {
	var b strings.Builder
	b.WriteString("\nBy statement kind: the median over the runs of the time per statement directly, and what each target added to it (its median less the direct one). What a relay adds to every statement alike is in each row; the rest is what pgowl's catalogue work leaves on the statement's path.\n\n")
	b.WriteString("| protocol | kind | per run | direct |")
	for _, target := range targets[1:] {
		fmt.Fprintf(&b, " %s: added |", target)
	}
	b.WriteString("\n| --- | --- | ---: | ---: |")
	for range targets[1:] {
		b.WriteString(" ---: |")
	}
	b.WriteString("\n")
	for _, proto := range protocols {
		for _, kind := range stepKinds {
			direct := results[proto.name+"/"+targetDirect]
			if len(direct) == 0 || direct[0].counts[kind] == 0 {
				continue
			}
			directPer := medianPerStatement(direct, kind)
			fmt.Fprintf(&b, "| %s | %s | %d | %.0f µs |", proto.name, kind, direct[0].counts[kind], directPer/1e3)
			for _, target := range targets[1:] {
				fmt.Fprintf(&b, " %+.0f µs |", (medianPerStatement(results[proto.name+"/"+target], kind)-directPer)/1e3)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// medianPerStatement is the median over runs of the time per statement of kind, in ns.
func medianPerStatement(runs []timing, kind string) float64 {
	var values []float64
	for _, r := range runs {
		if n := r.counts[kind]; n > 0 {
			values = append(values, float64(r.byKind[kind])/float64(n))
		}
	}
	if len(values) == 0 {
		return 0
	}
	slices.Sort(values)
	return values[len(values)/2]
}
