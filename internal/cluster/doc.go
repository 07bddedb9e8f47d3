// Package cluster starts throwaway PostgreSQL 15 clusters, one primary and
// any number of streaming standbys, for integration tests, benchmarks, the
// classifier's generator and the `pgowl demo` command. It is the project's one
// cluster harness.
//
// # What ships in the pgowl binary
//
// The demo links this package, so it must not pull test machinery into the
// product: it does not import "testing" (StartForTest takes the small TB
// interface, which *testing.T satisfies), and the watchdog is reachable only
// from StartWatched and StartForTest, which the binary never calls, so the
// linker drops it. cmd/pgowl's TestBinaryLinksNoTestMachinery checks both.
//
// # Layout
//
// Start creates one temporary directory (Cluster.Dir) holding a directory per
// node, named after the node: "pg1" is the primary, "pg2", "pg3", ... are the
// standbys. Each node directory holds the data directory ("data"), the server
// log ("server.log", see Node.LogPath) and the node's Unix socket. Nodes
// listen on 127.0.0.1 only, on ports found free by binding 127.0.0.1:0.
// Settings shared by every node live in "data/pgowl.conf", included from
// postgresql.conf; Options.Settings are appended there and win over the
// defaults.
//
// # Lifecycle
//
// Start runs initdb, starts the primary with pg_ctl, creates Options.Users and
// the pg_stat_statements extension, then clones every standby with
// pg_basebackup -R -X stream through its own physical replication slot
// ("pgowl_pg2", ...). Start returns once every standby reports
// pg_is_in_recovery() and has replayed the primary's current WAL position.
// If any step fails, everything started so far is stopped and the directory
// removed. Cluster.Close stops every node in immediate mode and removes the
// directory; it is safe to call more than once. StartWatched and StartForTest
// also start a watchdog, a detached shell process that does what Close does if
// the process that started the cluster dies first (a test killed by -timeout).
//
// # Users and authentication
//
// PostgreSQL refuses to run as root. When the process runs as root, every
// PostgreSQL tool runs as the operating-system user "postgres" (the child
// process gets postgres' uid and gid) and the cluster directory is owned by
// postgres; otherwise the tools run as the current user. The database
// superuser is always "postgres". It may connect over TCP without a password
// (trust) so that test helpers and monitors need no credentials; every other
// role authenticates with Options.HBAMethod (scram-sha-256 by default).
// The helpers on Node (Exec, QueryRow, StatementCalls, ...) open a fresh
// connection as postgres for each call.
//
// # Waiting
//
// Every wait (WaitReplayed, WaitCaughtUp, PauseReplay, Kill) polls observed
// server state until it holds, bounded by the caller's context and by
// DefaultWaitTimeout; none sleeps for a fixed time and hopes. Nodes run with
// synchronous_commit=off, so a commit can sit unflushed in the primary's WAL buffers;
// CurrentLSN first commits a tiny synchronous transaction so that the position it returns,
// and therefore WaitCaughtUp, covers every transaction committed before the call.
//
// # Errors
//
// Every failure is an *Error carrying a Code, the node concerned and a reason,
// plus the tail of the tool's output or server log where one exists. Use
// IsBinariesMissing to tell "PostgreSQL is not installed" apart from real
// failures; StartForTest skips the test in exactly that case.
//
// # Debugging
//
// Set Options.Logf (StartForTest uses t.Logf) to see each step. The server
// logs stay in Cluster.Dir until Close; log_line_prefix includes the pid.
package cluster
