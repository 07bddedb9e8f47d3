// Command migrationbench measures what pgowl adds to a schema migration: a script that creates
// functions, types and views and uses each one right after creating it, the way migration tools
// (Flyway, Liquibase, Alembic, Rails, golang-migrate) run through a connection string.
//
// # What it runs
//
// One throw-away PostgreSQL 15 primary from internal/cluster, and pgowl in this process in
// front of it (the slowdown it measures does not depend on standbys: routing plays no part), or,
// with -process, cmd/pgowl built from this module and run as a process of its own, as users
// deploy it (the client then no longer shares pgowl's Go runtime, scheduler and collector).
// The script, per run, in a fresh schema:
//
//   - 200 PL/pgSQL and SQL functions, each called at once (SELECT f_n(n));
//   - 50 composite types, each used at once in a cast (SELECT ROW(...)::t_n) and by a function
//     that takes it;
//   - 50 views over the functions, each read at once (SELECT * FROM v_n).
//
// Every statement is sent on its own, in autocommit, once with the simple query protocol and once
// with the extended protocol: the unnamed statement's Parse, Bind, Describe, Execute and Sync in
// one write, as PgJDBC (Flyway, Liquibase) sends a statement it has not prepared. (pgx's Exec
// cannot be used for it: without arguments it sends a Query whatever its QueryExecMode, so until
// 2026-12-03 the "extended" runs of this benchmark were simple-protocol runs.)
// Each run's names carry the run's number (f_007_12), so that no statement text repeats across
// runs: a migration runs once, and pgowl's caches by text (verdicts, function bodies parsed) must
// not serve it what an earlier run left there. With -repeat-texts every run sends the same texts,
// as for a migration applied to many databases alike; the runs after the first then find their
// CREATE statements' verdicts and bodies cached. (Until 2026-12-04 that was the only mode, and
// its ratios were 0.1-0.2x below those of texts never seen.)
// Runs alternate between the targets ("direct" to the primary, "pgowl" through the proxy), for
// -rounds rounds; the report gives each target's median time, the ratio pgowl/direct, and the
// time spent in the statements that change the catalogue and in those that use the change. It
// also gives the spread of the rounds' own ratios (each round's pgowl run over the same round's
// direct run) and how many of them are within 1.5x, the bound pgowl is held to: on a small
// shared machine one run's ratio moves by several tenths, and the median of a few rounds by a
// tenth or two between sittings.
//
// After each run, the same connection settings run the relay's floor: as many statements that
// change nothing and cost the node almost nothing (SELECT n). What pgowl adds to each of those is
// what relaying, classifying and logging any statement costs it; a second table sets it beside
// what pgowl adds to each statement of the script, and gives the ratio the script would have if
// pgowl added only the floor. The -max-ratio target can be met only where that ratio is below it.
//
// With -pgbouncer, PgBouncer (session pooling, a process of its own, from PATH or /usr/sbin) is
// a third target, run as often and interleaved with the others: a relay that does nothing else.
// What it adds is what any proxy's extra hop costs on the machine, the part of pgowl's ratio that
// is not pgowl's work; a third table sets the two side by side.
//
// With -byte-relay, a relay in this process that copies bytes and does nothing else (io.Copy each
// way) is a target too: the extra hop of any proxy written in Go and run where pgowl runs, so
// that pgowl's ratio can be split into the hop's part and its own work's.
//
// With -relay-process, the same relay runs as a process of its own (this binary again, with
// -serve-byte-relay), started and placed as -process places pgowl: the extra hop of any proxy
// written in Go and deployed as pgowl is. With -process, pgowl's ratio over it is what pgowl's own
// work costs, apart from what being a Go process of its own costs.
//
// With -standby, a streaming standby stands behind pgowl beside the primary, as users deploy it
// (direct still runs on the primary). A use's verdict then picks its node, so it is not sent
// ahead of its session's change being taken in: it waits for the take-in before it is routed,
// and read_your_writes (on by default) sends it to the primary until the standby has replayed the
// change.
//
// With -baseline-binary, a pgowl binary built at another commit (go build -o /tmp/pgowl-old
// ./cmd/pgowl in a git worktree) runs as a process of its own beside the one built from this
// module (-process), interleaved with it: on a machine whose sittings differ by tens of percent,
// two builds are compared only within one.
//
// With -node-cpus (a CPU list as taskset -c takes it), the node's processes are pinned to those
// CPUs, and this process (the clients, and pgowl when it runs here) and the proxies it starts to
// the other CPUs it may use. By default the kernel places every process, and a small virtual
// machine's kernel may pack the client, the proxy and the node's backend onto one CPU while
// another idles: the work pgowl does while the node runs a statement then delays the node
// itself. Pinned, the node has CPUs of its own, as a database server has, and a proxy's work
// competes only with the client. Direct runs are pinned alike, so both sides of the ratio pay
// what a wakeup across CPUs costs. pgowl is never pinned by itself: this is the benchmark's
// placement, not a setting of pgowl.
//
// A table splits the time by statement kind (each CREATE, and each use of what it made): per
// kind, the median time per statement directly and what each target adds to it. A relay adds
// about the same to every kind; what pgowl adds beyond that to the uses is its catalogue work
// left on their path.
//
// A table gives the CPU per statement each proxy adds (this process's CPU while a run's
// statements run, against a direct run's, plus the proxy's process's, read from
// /proc/PID/task/*/schedstat), for the script and the floor, and the bytes this process
// allocates per statement more than in a direct run (pgowl's, when it runs here). On a machine
// whose scheduling moves the wall time of a run by tens of percent, these move less (CPU by about
// ±15% between sittings, allocation by a few percent): compare two builds by them. The same
// table gives the time the threads of this process and of the proxy's spent per statement
// runnable but waiting for a CPU (schedstat's run-queue time): where the client, the proxy and
// the node's backend want more CPUs than the machine has, the proxy's work waits for the node's
// statement instead of running beside it, and the wall time grows by its CPU nearly in full.
// Another table gives the node's side: what PostgreSQL's processes ran per statement, and how
// long they waited for a CPU, for each target.
//
// # Usage
//
//	go run ./integration/migrationbench              # 5 rounds (about 1 minute on 2 cores)
//	go run ./integration/migrationbench -rounds 1    # one quick round
//	go run ./integration/migrationbench -process     # pgowl as a process of its own, as deployed
//	go run ./integration/migrationbench -repeat-texts # every run the same texts: caches by text serve
//	go run ./integration/migrationbench -process -pgbouncer # as deployed, beside PgBouncer
//	go run ./integration/migrationbench -byte-relay  # beside a Go relay that does nothing else
//	go run ./integration/migrationbench -process -relay-process # beside that relay as a process of its own
//	go run ./integration/migrationbench -process -baseline-binary /tmp/pgowl-old # two builds, one sitting
//	go run ./integration/migrationbench -process -standby # as deployed, with a standby to read on
//	go run ./integration/migrationbench -node-cpus 1 # the node on CPU 1 alone, the rest on the others
//	go run ./integration/migrationbench -process -routing-log /tmp/owl.log # with the routing log, as deployed
//	go run ./integration/migrationbench -rounds 2 -log /tmp/mb.log -cpuprofile /tmp/mb.cpu \
//	    -blockprofile /tmp/mb.block -trace /tmp/mb.trace   # where pgowl spends and waits
//
// pgowl runs with its default configuration but for its log level: warn, so the routing log's
// line per statement is neither formatted nor written, as in a deployment that sends its log
// nowhere. -routing-log keeps the default level, info, and has pgowl write its log to a file
// itself, as it writes to a container's log: what the routing log costs is then in the time.
//
// The debug log (-log) has a line per statement ("routed", with its time on the node) and per
// catalogue change taken in ("function catalogue read": session true when it was read on the
// session's own connection, from_statement true when a created function was taken from its
// CREATE statement without a read, with the time it took to patch the catalogue). With -log the
// report ends with a table of where the statements sent ahead of their session's change being
// taken in waited once sent: the read's replies, the catalogue taking the read (or the created
// function) in, and the final classification (each statement's debug line "classified again
// with it" has them).
//
// The exit status is 1 when the ratio of either protocol exceeds -max-ratio (default 1.5).
package main
