package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
)

// TestNodesReachedThroughUnixSockets: a node's host may be the directory of its Unix socket
// (config.Node.Host), as for pgowl beside its database sharing the socket's directory. Everything
// that reaches a node then goes through the socket: the monitor, the pools, the catalogue's
// reads, a SCRAM-passthrough login (a user known by verifier only), and the CancelRequests pgowl
// passes on, for a client's cancel and for limits.query_timeout.
func TestNodesReachedThroughUnixSockets(t *testing.T) {
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, 2*time.Minute)
	createTable(t, c, "t_unix_nodes", "CREATE TABLE t_unix_nodes (n int)")
	verifier := createVerifierRole(t, ctx, c.Nodes[0], "owl_unix_file", "never-seen-by-pgowl-3")
	catchUp(t, c)
	users := filepath.Join(t.TempDir(), "userlist.txt")
	if err := os.WriteFile(users, []byte(`"owl_unix_file" "`+verifier+`"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const queryTimeout = 2 * time.Second
	o := startOwl(t, c, func(cfg *config.Config) {
		for i := range cfg.Nodes {
			for _, n := range c.Nodes {
				if n.Name == cfg.Nodes[i].Name {
					cfg.Nodes[i].Host = n.SocketDir()
				}
			}
		}
		cfg.Auth.UsersFile = users
		cfg.Limits.QueryTimeout = queryTimeout
	})
	for _, n := range o.cfg.Nodes {
		if !filepath.IsAbs(n.Host) {
			t.Fatalf("node %s is configured at %q, not at its socket's directory", n.Name, n.Host)
		}
	}

	t.Run("writes_and_reads_are_routed", func(t *testing.T) {
		conn := o.connect(t, nil)
		rs, err := runAndRoutes(t, conn, "INSERT INTO t_unix_nodes VALUES (1)")
		if err != nil || len(rs) != 1 {
			t.Fatalf("INSERT: %v, NOTICEs %v", err, rs)
		}
		wantRoute(t, "INSERT", rs[0], "primary", "WRITE")
		// Another session: this one's next read waits for its write to be replayed (read_your_writes).
		rs, err = runAndRoutes(t, o.connect(t, nil), "SELECT n FROM t_unix_nodes")
		if err != nil || len(rs) != 1 {
			t.Fatalf("SELECT: %v, NOTICEs %v", err, rs)
		}
		wantRoute(t, "SELECT", rs[0], "standby", "")
	})

	t.Run("a_function_is_classified_from_the_catalogue", func(t *testing.T) {
		conn := o.connect(t, nil)
		if err := runToEnd(ctx, conn, "CREATE OR REPLACE FUNCTION unix_nodes_bump() RETURNS int LANGUAGE sql AS 'INSERT INTO t_unix_nodes VALUES (2) RETURNING n'"); err != nil {
			t.Fatal(err)
		}
		conn.routes(t)
		rs, err := runAndRoutes(t, conn, "SELECT unix_nodes_bump()")
		if err != nil || len(rs) != 1 {
			t.Fatalf("SELECT unix_nodes_bump(): %v, NOTICEs %v", err, rs)
		}
		wantRoute(t, "SELECT of a function that inserts", rs[0], "primary", "WRITING_FUNCTION")
	})

	// The test cluster trusts local connections, so the node asks for no SCRAM exchange here:
	// this checks that the passthrough login reaches the socket (it dialled TCP to the
	// directory's name before).
	t.Run("scram_passthrough_login", func(t *testing.T) {
		loginAndWrite(t, ctx, o, "owl_unix_file", "never-seen-by-pgowl-3")
	})

	for _, tc := range []struct{ name, sql string }{
		{"client_cancel_of_a_read", "SELECT pg_sleep(30)"},
		{"client_cancel_of_a_write", "INSERT INTO t_unix_nodes SELECT 3 FROM pg_sleep(30)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := o.connect(t, withCancelRequests)
			cancelCtx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			began := time.Now()
			err := runToEnd(cancelCtx, conn, tc.sql)
			wantSQLState(t, tc.sql+" cancelled by its client", err, "57014")
			if elapsed := time.Since(began); elapsed > queryTimeout {
				t.Errorf("%s ended after %s: the client's cancel did not reach the node (limits.query_timeout, %s, did)", tc.sql, elapsed, queryTimeout)
			}
			if got := queryInt(t, conn, "after the cancel", "SELECT $1::int + 2", 40); got != 42 {
				t.Errorf("query after the cancel returned %d", got)
			}
		})
	}

	t.Run("query_timeout_cancels_on_the_node", func(t *testing.T) {
		conn := o.connect(t, nil)
		began := time.Now()
		err := runToEnd(ctx, conn, "SELECT pg_sleep(30)")
		wantSQLState(t, "a read past limits.query_timeout", err, "57014")
		if elapsed := time.Since(began); elapsed > 10*time.Second {
			t.Errorf("the read past limits.query_timeout (%s) ended after %s", queryTimeout, elapsed)
		}
	})

	t.Run("no_node_still_runs_a_cancelled_statement", func(t *testing.T) {
		for _, n := range c.Nodes {
			var running int64
			if err := n.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%pg_sleep(30)%' AND pid <> pg_backend_pid()").Scan(&running); err != nil {
				t.Fatalf("pg_stat_activity on %s: %v", n.Name, err)
			}
			if running != 0 {
				t.Errorf("%s is still running %d cancelled statements", n.Name, running)
			}
		}
		if got := primaryInt(t, c, "SELECT count(*) FROM t_unix_nodes WHERE n = 3"); got != 0 {
			t.Errorf("the cancelled INSERT left %d rows", got)
		}
	})
}
