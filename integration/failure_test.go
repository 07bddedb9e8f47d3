package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/route"
)

// TestNodeFailures runs on its own cluster (one primary, one standby). It
// kills the primary backend of an open transaction, and it stops and restarts
// the standby, checking that clients get clear errors and that their
// connections keep working.
func TestNodeFailures(t *testing.T) {
	c := ownCluster(t, 1)
	primary, standby := c.Nodes[0], c.Nodes[1]
	o := startOwl(t, c, nil)
	createTable(t, c, "t16_items", "CREATE TABLE t16_items (id int PRIMARY KEY, v text)")

	t.Run("primary_backend_killed_mid_transaction", func(t *testing.T) {
		const app = "t16-victim"
		conn := o.connect(t, withParams(map[string]string{"application_name": app}))
		ctx := timeoutCtx(t, time.Minute)
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO t16_items VALUES (2, 'doomed')"); err != nil {
			t.Fatal(err)
		}
		var pid int32
		if err := primary.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle in transaction'", app).Scan(&pid); err != nil {
			t.Fatalf("find the transaction's backend on the primary: %v", err)
		}
		if err := primary.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for primaryInt(t, c, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("backend %d still exists 10s after pg_terminate_backend", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}

		_, err = tx.Exec(ctx, "INSERT INTO t16_items VALUES (3, 'after the kill')")
		if err == nil {
			t.Fatalf("a statement in the killed transaction succeeded")
		}
		t.Logf("statement after the kill failed with: %v", err)
		_ = tx.Rollback(ctx)
		conn.routes(t)

		if conn.PgConn().IsClosed() {
			// pgowl's design keeps the client connection when a backend is
			// lost (the client gets an ERROR, not the node's FATAL).
			t.Errorf("the client connection was closed when its primary backend was killed; want an ERROR and a usable connection")
			conn = o.connect(t, nil)
		}
		tx, err = conn.Begin(ctx)
		if err != nil {
			t.Fatalf("BEGIN after the kill: %v", err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO t16_items VALUES (4, 'new transaction')"); err != nil {
			t.Fatalf("INSERT in the new transaction: %v", err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatalf("COMMIT of the new transaction: %v", err)
		}
		if got := primaryInt(t, c, "SELECT count(*) FROM t16_items WHERE id IN (2, 3)"); got != 0 {
			t.Errorf("rows of the killed transaction reached the primary (%d)", got)
		}
		if got := primaryInt(t, c, "SELECT count(*) FROM t16_items WHERE id = 4"); got != 1 {
			t.Errorf("the new transaction's row is not on the primary")
		}
	})

	t.Run("standby_stopped_and_restarted", func(t *testing.T) {
		conn := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
		ctx := timeoutCtx(t, 2*time.Minute)
		read := func() (int64, error) {
			var n int64
			err := conn.QueryRow(ctx, "SELECT count(*) FROM t16_items").Scan(&n)
			return n, err
		}
		if _, err := read(); err != nil {
			t.Fatalf("read before stopping the standby: %v", err)
		}
		wantRoute(t, "read before stopping the standby", conn.oneRoute(t, "read"), "standby", "READ_ONLY")

		if err := standby.Stop(ctx); err != nil {
			t.Fatalf("stop %s: %v", standby.Name, err)
		}
		o.waitSnapshot(t, 15*time.Second, standby.Name+" down", func(s *route.Snapshot) bool {
			n := findNode(s, standby.Name)
			return n != nil && !n.Up
		})
		for attempt := 1; attempt <= 2; attempt++ {
			_, err := read()
			pgErr := wantSQLState(t, "read with the standby down", err, "57P03")
			if pgErr != nil {
				if !strings.HasPrefix(pgErr.Message, "pgowl: NO_READABLE_REPLICA") {
					t.Errorf("read with the standby down: message %q, want it to start with \"pgowl: NO_READABLE_REPLICA\"", pgErr.Message)
				}
				if pgErr.Hint == "" {
					t.Errorf("read with the standby down: no HINT")
				}
				if pgErr.Severity != "ERROR" {
					t.Errorf("read with the standby down: severity %s, want ERROR", pgErr.Severity)
				}
			}
			if conn.PgConn().IsClosed() {
				t.Fatalf("the connection was closed by the refused read")
			}
			if _, err := conn.Exec(ctx, "INSERT INTO t16_items VALUES ($1, 'while the standby is down')", 10+attempt); err != nil {
				t.Errorf("write with the standby down: %v", err)
			}
			for _, r := range conn.routes(t) {
				wantRoute(t, "write with the standby down", r, "primary", "WRITE")
			}
		}

		if err := standby.Start(ctx); err != nil {
			t.Fatalf("restart %s: %v", standby.Name, err)
		}
		o.waitRoles(t, map[string]route.Role{primary.Name: route.RolePrimary, standby.Name: route.RoleStandby})
		catchUp(t, c)

		// The same connection reads from the standby again.
		var failures []string
		deadline := time.Now().Add(15 * time.Second)
		for {
			n, err := read()
			if err == nil {
				if n != 3 {
					t.Errorf("read after the restart counted %d rows, want 3", n)
				}
				break
			}
			failures = append(failures, err.Error())
			if conn.PgConn().IsClosed() {
				t.Fatalf("the client connection was closed after the standby restarted; errors: %q", failures)
			}
			if time.Now().After(deadline) {
				t.Fatalf("reads kept failing 15s after the standby came back: %q", failures)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if len(failures) > 0 {
			t.Logf("reads failed %d time(s) after the standby came back before one succeeded: %q", len(failures), failures)
		}
		rs := conn.routes(t)
		if len(rs) == 0 || rs[len(rs)-1].Node != standby.Name {
			t.Errorf("the read after the restart did not run on %s; NOTICEs: %v", standby.Name, rs)
		}
	})
}
