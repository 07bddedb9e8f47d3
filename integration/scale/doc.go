// Command scale measures pgowl against the scale targets of issue 5 and writes the result to
// docs/scale.md (and stdout).
//
// # What it runs
//
// A throw-away primary and two streaming standbys come from internal/cluster, each with
// max_connections = 100. pgowl is built from the working tree (go build ./cmd/pgowl) and runs as
// its own process (`pgowl serve --config FILE`) on a free loopback port, with log.level warn,
// routing.notice false, pool.max_per_node 40 and limits.max_client_connections 12000; every
// other key keeps its default (pool.mode transaction, pool.acquire_timeout 2s,
// routing.standby_choice least_lag). Running pgowl as a separate process lets the command read
// its memory (VmRSS, VmHWM) and descriptors from /proc/<pid>.
//
// The command first raises its own RLIMIT_NOFILE soft limit to the hard limit with
// syscall.Setrlimit. Go restores the original soft limit in children unless the program set it
// itself, so after this call pgowl and the PostgreSQL servers inherit the raised limit; the
// report shows the limit pgowl actually got, from /proc/<pid>/limits.
//
// # The idle test (-idle N, default 10000)
//
// N clients connect to pgowl with pgconn (SCRAM-SHA-256), -parallel at a time, and each runs one
// `SELECT 1`, so that every session has been through a routed unit and handed its backend back.
// They then stay connected and idle. pgowl's VmRSS is read before the first client (after a
// warm-up query) and -settle after the last one has finished its query; the difference divided
// by N is the memory cost of an idle client (target: under 64 KiB). While the clients sit idle,
// each node is asked, as the superuser, how many backends user app holds
// (pg_stat_activity): with transaction pooling that is the pool's idle connections, never one
// per client. After the measurement, a heap profile fetched through pgowl's hidden --pprof-addr
// (which runs a GC first) gives the Go runtime's own view: live heap and goroutine stacks per
// client.
//
// # The load test (-clients C, default 2000; -duration, default 20s)
//
// A table accounts (aid, abalance) with -rows rows (default 10000) is filled on the primary
// before pgowl starts. C clients, each with its own connection and goroutine, start together and
// run short transactions until -duration has passed: 80 % reads
// (SELECT abalance FROM accounts WHERE aid = $1, extended protocol) and 20 % writes (BEGIN;
// UPDATE accounts SET abalance = abalance + 1 WHERE aid = $1; COMMIT, three round trips; pgowl
// defers the BEGIN, so the transaction holds its backend from the UPDATE across one client turn). Successes and failures are counted,
// failures by SQLSTATE (pgowl's DATABASE_BUSY, 53300, separately), with latency per
// transaction. Every 500 ms a sampler counts user app's backends on each node through its own
// superuser connection (so each node also carries that connection and pgowl's monitor
// connection, both as postgres, neither counted). At the end, what the run added to the sum of
// abalance on the primary must equal the number of committed write transactions.
//
// # Watching pgowl
//
// While the idle clients connect and while the load runs, one more client asks pgowl
// `SHOW pgowl.nodes` every 500 ms (pgowl answers it without a backend): its latency shows how
// quickly pgowl answers at all, and its rows show the pool's in_use count and the age of the
// node monitor's last sample, which routing compares with monitor.down_after. The CPU time of
// pgowl, of the PostgreSQL servers, of this command and of the whole machine (/proc) is reported
// per phase, so that a run on a shared machine says how much of the CPU others took.
//
// # Diagnostic variants
//
// Each -variant key=value[,key=value] repeats the load test after restarting pgowl with those
// settings added (same cluster, same clients), and the report compares them with the load test
// above, e.g. a longer pool.acquire_timeout (is the timeout shorter than the queue?) or another
// routing.standby_choice (do the reads spread over both standbys?).
//
// # Usage
//
//	go run ./integration/scale                                    # the targets, about 2 minutes
//	go run ./integration/scale -idle 500 -clients 100 -duration 5s -out ''   # a quick check
//	go run ./integration/scale -set pool.acquire_timeout=10s      # any pgowl key, passed as a flag
//	go run ./integration/scale -variant pool.acquire_timeout=10s -variant routing.standby_choice=round_robin
//
// Every loop is bounded in count and time. Ctrl-C (or SIGTERM) closes the clients, stops pgowl
// and the cluster, and removes the temporary directories; no report is written then.
package main
