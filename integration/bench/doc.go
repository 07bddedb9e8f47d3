// Command bench compares pgowl with a direct connection, PgBouncer and pgpool-II by running
// pgbench through each of them against one throw-away primary and two streaming standbys,
// and writes the medians to docs/benchmarks.md.
//
// # What it runs
//
// The cluster comes from internal/cluster. PgBouncer (transaction pooling, in front of the
// primary), pgpool-II (streaming-replication mode, load balancing over the three nodes) and two
// pgowl processes (routing.notice off and on, log.level warn) run as separate processes on free
// loopback ports, each with its configuration generated here in a temporary directory; PgBouncer
// and pgpool-II are installed with apt-get when missing, and run as the postgres user when the
// benchmark runs as root. pgbench -i -s 10 fills the primary once.
//
// One more target runs only when named in -targets: "forward", integration/bench/forward, a
// byte forwarder with one connection to the primary per client that parses, pools and routes
// nothing. It is the floor of what any proxy costs on the machine: how close to direct a
// proxy can get there at all.
//
// Another, "pgowl+admin", is pgowl with its admin listener on and /metrics fetched every
// second, as Prometheus would; the "pgowl" targets run with admin.listen "" (no listener,
// no metrics or history). Comparing the two measures what the admin side costs.
//
// "pgowl-ryw-off", also run only when named in -targets, is pgowl with routing.read_your_writes:
// off (the pgowl targets run with the default, session): the comparison "pgowl / pgowl-ryw-off" is
// what read your writes costs, and when both run the report gains the latency of a read right
// after a write on each (readyourwrites.go).
//
// Every workload (select-only in each query mode at 1, 16 and 64 clients, TPC-B, and a mixed
// 80 % read / 20 % write script) runs for -duration seconds per target, interleaved: for each
// workload, for each round, every target once. Runs that touch the primary start from the same
// state: pgbench_history is emptied and the small tables vacuumed directly on the primary, and the
// standbys have replayed everything, before each run.
//
// # What it measures
//
// pgbench's tps (without initial connection time), latency average and initial connection time;
// a run whose client aborted, or whose pgbench exited non-zero, counts as failed, with pgbench's
// first error line. For the proxies, the CPU time of the process tree (utime+stime+cutime+cstime
// from /proc) over each run is divided by the statements the run executed; the pgowl and
// PgBouncer processes' peak RSS (VmHWM) is read at the end.
//
// # Usage
//
//	go run ./integration/bench            # 3 rounds of 5 s, all workloads (20 to 25 minutes on 2 cores)
//	go run ./integration/bench -quick     # 1 round of 2 s, five workloads (about 3 minutes)
//	go run ./integration/bench -baseline main -targets pgowl -workloads select-simple-16,tpcb-simple-16
//
// -baseline <git rev> also builds pgowl at that revision (exported with git archive, so the
// checkout is not touched) and gives every pgowl target a twin, "pgowl@baseline", with the same
// configuration: in each round the twin runs right beside its target, and every round runs the
// targets in the reverse order of the round before (so the twin and its target swap places), and the report's "Against the baseline" section sets each side's median tps
// against the other with the spread of its rounds, so that a change can be shown to make
// nothing worse in one run on one machine (see baseline.go).
//
// Ctrl-C stops pgbench, every server and proxy, and removes the temporary directories; the
// report is only written after a complete run.
package main
