// Package integration holds pgowl's end-to-end tests: a real PostgreSQL 15
// primary with streaming standbys (package internal/cluster), a pgowl
// instance built in-process with proxy.Build, and real clients (pgx, psql,
// pgbench) talking to pgowl over loopback TCP.
//
// # What the tests trust
//
// A test never takes pgowl's word for where a statement ran. Each statement
// under test carries a unique comment (for example "t2-read-3f9a01c2"), and the
// test asks every node's pg_stat_statements how often it executed that
// statement. The routing NOTICE and the routing log are checked separately,
// against the same evidence.
//
// # Layout
//
// helpers_test.go starts the shared cluster (one primary, two standbys, started
// once per test binary and closed by TestMain), starts pgowl instances (one per
// test, each with its own JSON log buffer), opens pgx connections that collect
// NOTICEs, and reads the nodes' evidence. Each other file covers one area:
// clients (psql, pgbench), protocols, transactions, COPY, cancel,
// authentication, session settings, the routing log, hostile input and node
// failures. Tests that stop or kill nodes start their own cluster.
//
// Tests that measure pgowl's own memory, or need more descriptors than one
// process may hold here (20,000), run pgowl as a process built from the tree
// (process_helpers_test.go), and the silent-socket flood from helper
// processes (integration/silentflood).
//
// # Running
//
//	go test ./integration/ -count=1 -v
//
// The tests skip when the PostgreSQL 15 binaries are missing (see
// cluster.BinDirEnv). When a test fails, the tail of its pgowl instance's log
// is printed with the failure.
package integration
