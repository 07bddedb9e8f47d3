package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
)

// TestDeferredBegin covers BEGIN in transaction pooling: pgowl answers it,
// holds no backend until the transaction's first statement, then sends BEGIN
// with that statement to the node chosen for the transaction.
func TestDeferredBegin(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, func(cfg *config.Config) {
		// One backend per node: a held backend would block every other client.
		cfg.Pool.MaxPerNode = 1
		cfg.Pool.AcquireTimeout = 300 * time.Millisecond
	})
	createTable(t, c, "t_defer_items", "CREATE TABLE t_defer_items (id int PRIMARY KEY, v text NOT NULL)")
	ctx := timeoutCtx(t, statementTimeout)

	t.Run("begin_holds_no_backend", func(t *testing.T) {
		a := o.connect(t, nil)
		b := o.connect(t, nil)
		if _, err := a.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if got := a.PgConn().TxStatus(); got != 'T' {
			t.Errorf("after BEGIN the client's transaction status is %q, want T", got)
		}
		if rs := a.routes(t); len(rs) != 0 {
			t.Errorf("BEGIN ran on no node yet but got NOTICEs %v", rs)
		}
		// The primary's only backend is free: another client's write transaction runs.
		tx, err := b.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO t_defer_items VALUES (1, 'b')"); err != nil {
			t.Fatalf("write of another client while one sits after BEGIN: %v", err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		b.routes(t)

		// The first statement carries BEGIN: both run on the primary, BEGIN's NOTICE first.
		var v string
		if err := a.QueryRow(ctx, "SELECT v FROM t_defer_items WHERE id = 1").Scan(&v); err != nil {
			t.Fatalf("first statement of the deferred transaction: %v", err)
		}
		rs := a.routes(t)
		if len(rs) != 2 {
			t.Fatalf("first statement after BEGIN: NOTICEs %v, want BEGIN's and the statement's", rs)
		}
		wantRoute(t, "BEGIN", rs[0], "primary", "WRITE")
		wantRoute(t, "read inside the read-write transaction", rs[1], "primary", "")
		if rs[0].Node != rs[1].Node {
			t.Errorf("BEGIN ran on %s, its first statement on %s", rs[0].Node, rs[1].Node)
		}
		if _, err := a.Exec(ctx, "INSERT INTO t_defer_items VALUES (2, 'a')"); err != nil {
			t.Fatal(err)
		}
		// Now a holds the primary's only backend: b must wait and give up.
		_, err = b.Exec(ctx, "INSERT INTO t_defer_items VALUES (3, 'b')")
		wantSQLState(t, "write while the only primary backend is in a transaction", err, "53300")
		tag, err := a.Exec(ctx, "COMMIT")
		if err != nil || tag.String() != "COMMIT" {
			t.Fatalf("COMMIT: tag %q, %v", tag, err)
		}
		if got := primaryInt(t, c, "SELECT count(*) FROM t_defer_items WHERE id IN (1, 2)"); got != 2 {
			t.Errorf("after COMMIT the primary has %d of rows 1 and 2", got)
		}
		// The whole transaction ran in one backend session: xact start is shared.
		lines := o.logs.Entries(t)
		begins := 0
		for _, e := range lines {
			if e["message"] == "routed" && e["statement"] == "BEGIN" {
				begins++
				if e["role"] != "primary" {
					t.Errorf("routing log line of BEGIN: %v, want role primary", e)
				}
			}
		}
		if begins == 0 {
			t.Errorf("no routing log line for the deferred BEGIN")
		}
	})

	t.Run("empty_transactions_need_no_node", func(t *testing.T) {
		a := o.connect(t, nil)
		for _, end := range []struct{ sql, tag string }{{"COMMIT", "COMMIT"}, {"ROLLBACK", "ROLLBACK"}, {"END", "COMMIT"}, {"ABORT", "ROLLBACK"}} {
			if _, err := a.Exec(ctx, "START TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
				t.Fatal(err)
			}
			tag, err := a.Exec(ctx, end.sql)
			if err != nil || tag.String() != end.tag {
				t.Errorf("%s of an empty transaction: tag %q, %v; want %s", end.sql, tag, err, end.tag)
			}
			if got := a.PgConn().TxStatus(); got != 'I' {
				t.Errorf("after %s the transaction status is %q, want I", end.sql, got)
			}
		}
		if rs := a.routes(t); len(rs) != 0 {
			t.Errorf("empty transactions ran on no node but got NOTICEs %v", rs)
		}
	})

	t.Run("begin_options_reach_the_node", func(t *testing.T) {
		a := o.connect(t, nil)
		if _, err := a.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ"); err != nil {
			t.Fatal(err)
		}
		var iso string
		if err := a.QueryRow(ctx, "SELECT current_setting('transaction_isolation')").Scan(&iso); err != nil {
			t.Fatal(err)
		}
		if iso != "repeatable read" {
			t.Errorf("transaction_isolation inside BEGIN ISOLATION LEVEL REPEATABLE READ = %q", iso)
		}
		// A second BEGIN warns on the node, as without pgowl.
		if _, err := a.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		warned := false
		for _, n := range a.notices.take() {
			if n.Severity == "WARNING" && n.Code == "25001" {
				warned = true
			}
		}
		if !warned {
			t.Errorf("BEGIN inside a transaction: no WARNING 25001 from the node")
		}
		if _, err := a.Exec(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("serializable_begin_goes_to_the_primary_at_once", func(t *testing.T) {
		catchUp(t, c)
		a := o.connect(t, nil)
		// PostgreSQL applies the options in order, and a standby refuses
		// SERIALIZABLE before it reaches READ COMMITTED: the transaction
		// needs the primary although the last level wins there. A BEGIN the
		// node might reject is not deferred (a failed BEGIN opens no
		// transaction, so a statement sent with it would run on its own), so
		// it runs at once, and its NOTICE comes with its reply.
		if _, err := a.Exec(ctx, "START TRANSACTION ISOLATION LEVEL SERIALIZABLE, ISOLATION LEVEL READ COMMITTED, READ ONLY"); err != nil {
			t.Fatal(err)
		}
		wantRoute(t, "serializable-then-read-committed BEGIN", a.oneRoute(t, "START TRANSACTION"), "primary", "WRITE")
		if got := a.PgConn().TxStatus(); got != 'T' {
			t.Errorf("after BEGIN the status is %q, want T", got)
		}
		var level string
		if err := a.QueryRow(ctx, "SHOW transaction_isolation").Scan(&level); err != nil {
			t.Fatal(err)
		}
		if level != "read committed" {
			t.Errorf("transaction_isolation %q, want read committed (the last level wins)", level)
		}
		a.routes(t)
		if _, err := a.Exec(ctx, "COMMIT"); err != nil {
			t.Fatal(err)
		}
		// A plain SERIALIZABLE BEGIN goes to the primary, at once, and works.
		a.routes(t)
		if _, err := a.Exec(ctx, "BEGIN ISOLATION LEVEL SERIALIZABLE"); err != nil {
			t.Fatal(err)
		}
		wantRoute(t, "BEGIN ISOLATION LEVEL SERIALIZABLE", a.oneRoute(t, "serializable BEGIN"), "primary", "")
		if _, err := a.Exec(ctx, "COMMIT"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("read_only_transaction_follows_a_first_statement_that_needs_the_primary", func(t *testing.T) {
		catchUp(t, c)
		a := o.connect(t, nil)
		// SET TRANSACTION ISOLATION LEVEL SERIALIZABLE is allowed as a
		// transaction's first statement and refused by a standby: the
		// deferred BEGIN READ ONLY goes with it to the primary.
		if _, err := a.Exec(ctx, "BEGIN READ ONLY"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Exec(ctx, "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"); err != nil {
			t.Fatalf("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE in a read-only transaction: %v", err)
		}
		rs := a.routes(t)
		if len(rs) != 2 {
			t.Fatalf("NOTICEs %v, want BEGIN READ ONLY's and SET TRANSACTION's", rs)
		}
		wantRoute(t, "BEGIN READ ONLY before a serializable SET TRANSACTION", rs[0], "primary", "WRITE")
		if !strings.Contains(rs[0].Raw.Message, "the transaction's first statement") {
			t.Errorf("BEGIN's NOTICE %q does not say that the first statement chose the node", rs[0].Raw.Message)
		}
		wantRoute(t, "serializable SET TRANSACTION", rs[1], "primary", "WRITE")
		var level, readOnly string
		if err := a.QueryRow(ctx, "SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only')").Scan(&level, &readOnly); err != nil {
			t.Fatal(err)
		}
		if level != "serializable" || readOnly != "on" {
			t.Errorf("transaction is %s, read_only=%s; want serializable, read_only=on", level, readOnly)
		}
		wantRoute(t, "read in the transaction", a.oneRoute(t, "read"), "primary", "IN_TRANSACTION")
		// Still a read-only transaction: a write fails on the primary too.
		_, err := a.Exec(ctx, "INSERT INTO t_defer_items VALUES (11, 'x')")
		wantSQLState(t, "write inside BEGIN READ ONLY on the primary", err, "25006")
		if _, err := a.Exec(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		a.routes(t)

		// Node-local statistics are read on the primary, in a read-only
		// transaction as outside one.
		if _, err := a.Exec(ctx, "BEGIN READ ONLY"); err != nil {
			t.Fatal(err)
		}
		var inRecovery bool
		if err := a.QueryRow(ctx, "SELECT pg_is_in_recovery() FROM pg_stat_database WHERE datname = current_database()").Scan(&inRecovery); err != nil {
			t.Fatal(err)
		}
		if inRecovery {
			t.Errorf("pg_stat_database was read on a standby")
		}
		rs = a.routes(t)
		if len(rs) != 2 {
			t.Fatalf("NOTICEs %v, want BEGIN READ ONLY's and the statistics read's", rs)
		}
		wantRoute(t, "BEGIN READ ONLY before a statistics read", rs[0], "primary", "NODE_LOCAL_STATS")
		wantRoute(t, "statistics read", rs[1], "primary", "NODE_LOCAL_STATS")
		if _, err := a.Exec(ctx, "COMMIT"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("read_only_transaction_goes_to_a_standby", func(t *testing.T) {
		catchUp(t, c)
		a := o.connect(t, nil)
		if _, err := a.Exec(ctx, "BEGIN READ ONLY"); err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := a.QueryRow(ctx, "SELECT count(*) FROM t_defer_items").Scan(&n); err != nil {
			t.Fatal(err)
		}
		rs := a.routes(t)
		if len(rs) != 2 {
			t.Fatalf("NOTICEs %v, want BEGIN READ ONLY's and the read's", rs)
		}
		wantRoute(t, "BEGIN READ ONLY", rs[0], "standby", "READ_ONLY")
		wantRoute(t, "read in a read-only transaction", rs[1], "standby", "")
		// A write in it fails where the transaction is.
		_, err := a.Exec(ctx, "INSERT INTO t_defer_items VALUES (9, 'x')")
		wantSQLState(t, "write inside BEGIN READ ONLY", err, "25006")
		if _, err := a.Exec(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("unroutable_first_statement_fails_the_transaction", func(t *testing.T) {
		holder := o.connect(t, nil)
		a := o.connect(t, nil)
		// holder takes the primary's only backend.
		if _, err := holder.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if _, err := holder.Exec(ctx, "INSERT INTO t_defer_items VALUES (10, 'holder')"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		_, err := a.Exec(ctx, "INSERT INTO t_defer_items VALUES (11, 'a')")
		wantSQLState(t, "first write while the primary is busy", err, "53300")
		if got := a.PgConn().TxStatus(); got != 'E' {
			t.Errorf("after the failed first statement the status is %q, want E", got)
		}
		_, err = a.Exec(ctx, "INSERT INTO t_defer_items VALUES (12, 'a')")
		wantSQLState(t, "statement in the failed transaction", err, "25P02")
		if _, err := holder.Exec(ctx, "COMMIT"); err != nil {
			t.Fatal(err)
		}
		// Even with the primary free now, the statement is refused: the transaction failed.
		_, err = a.Exec(ctx, "INSERT INTO t_defer_items VALUES (13, 'a')")
		wantSQLState(t, "statement in the failed transaction, primary free", err, "25P02")
		tag, err := a.Exec(ctx, "COMMIT")
		if err != nil || tag.String() != "ROLLBACK" {
			t.Errorf("COMMIT of the failed transaction: tag %q, %v; want ROLLBACK", tag, err)
		}
		if got := primaryInt(t, c, "SELECT count(*) FROM t_defer_items WHERE id IN (11, 12, 13)"); got != 0 {
			t.Errorf("%d rows of the failed transaction reached the primary", got)
		}
		// The session goes on normally.
		if _, err := a.Exec(ctx, "INSERT INTO t_defer_items VALUES (14, 'a')"); err != nil {
			t.Errorf("write after the failed transaction: %v", err)
		}
	})

	t.Run("extended_protocol_inside", func(t *testing.T) {
		a := o.connect(t, nil)
		tx, err := a.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var id int
		if err := tx.QueryRow(ctx, "INSERT INTO t_defer_items VALUES ($1, $2) RETURNING id", 20, "ext").Scan(&id); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := primaryInt(t, c, "SELECT count(*) FROM t_defer_items WHERE id = 20"); got != 0 {
			t.Errorf("a rolled-back extended-protocol insert is on the primary")
		}
	})
}
