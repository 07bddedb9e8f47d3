// Package clients is pgowl's client matrix: one test per client library,
// each driving pgowl in front of a real primary and two streaming standbys
// through the same list of features (authentication, simple and extended
// queries, transactions, prepared statements, COPY in and out,
// LISTEN/NOTIFY, cancel, a result over 100 MB, an error in the middle of a
// batch, and where reads and writes ran).
//
// # Clients
//
// pgx v5 and lib/pq run inside the test binary. node-postgres
// (integration/clients/node), psycopg2 (integration/clients/python) and the
// PostgreSQL JDBC driver (integration/clients/java) run as child programs
// ("drivers") that the Go test steers over stdin and stdout: the test writes
// one request line per step (the step's name and arguments, separated by
// tabs), and the driver answers with one JSON line that holds the step's
// outcome, the SQLSTATE of any error, the NOTICEs every connection received
// during the step and the step's results. The Go test then checks the
// answer, and asks the nodes themselves (pg_stat_statements, through the
// internal/cluster harness) where the step's statements ran. psql and
// pgbench run as programs.
//
// # Evidence
//
// Every statement whose placement is checked carries a unique tag in a
// comment. The test clears pg_stat_statements on every node right before
// the step and counts, per node, the calls of statements whose text holds
// the tag afterwards.
//
// # Memory
//
// The large-result steps stream more than 100 MB through a pgowl built as a
// separate binary, and compare the process's peak resident set size
// (VmHWM in /proc/<pid>/status) with its size before the stream.
//
// # Running
//
//	go test ./integration/clients/ -count=1 -v
//
// The tests skip when the PostgreSQL 15 binaries are missing, and a client's
// test skips when its runtime (node and npm, /usr/bin/python3 with psycopg2,
// java with /usr/share/java/postgresql.jar) is missing.
package clients
