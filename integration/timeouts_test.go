package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/config"
)

// sleepersOn counts the backends on every node of c that are running a
// statement containing marker.
func sleepersOn(t *testing.T, o *owl, marker string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	ctx := timeoutCtx(t, statementTimeout)
	for _, n := range o.nodes.Nodes {
		var count int64
		err := n.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid()", marker).Scan(&count)
		if err != nil {
			t.Fatalf("pg_stat_activity on %s: %v", n.Name, err)
		}
		out[n.Name] = count
	}
	return out
}

// TestQueryTimeoutCancelsOnTheNode: with limits.query_timeout, pg_sleep(60)
// is cancelled on the node that runs it (a CancelRequest: the node stops
// it), the client gets 57014 within the limit and a little, and the session
// goes on, inside and outside a transaction, with the simple and the
// extended protocol.
func TestQueryTimeoutCancelsOnTheNode(t *testing.T) {
	const limit = time.Second
	c := sharedClusterFor(t)
	o := startOwl(t, c, func(cfg *config.Config) { cfg.Limits.QueryTimeout = limit })
	conn := o.connect(t, nil)
	pg := conn.PgConn()
	ctx := timeoutCtx(t, 4*statementTimeout)

	want57014 := func(what string, run func() error, marker string) {
		t.Helper()
		start := time.Now()
		err := run()
		took := time.Since(start)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "57014" {
			t.Fatalf("%s: got %v after %s, want 57014", what, err, took)
		}
		t.Logf("%s: %s %s (%s) after %s", what, pgErr.Code, pgErr.Message, pgErr.Detail, took.Round(time.Millisecond))
		if !strings.Contains(pgErr.Message, "limits.query_timeout") {
			t.Errorf("%s: the message does not name limits.query_timeout: %q", what, pgErr.Message)
		}
		if took < limit || took > limit+3*time.Second {
			t.Errorf("%s: cancelled after %s, want within %s of the %s limit", what, took, 3*time.Second, limit)
		}
		if left := sleepersOn(t, o, marker); left[c.Nodes[0].Name]+left[c.Nodes[1].Name]+left[c.Nodes[2].Name] != 0 {
			t.Errorf("%s: the statement still runs on a node: %v", what, left)
		}
	}
	stillWorks := func(what string) {
		t.Helper()
		if got := queryInt(t, conn, what, "SELECT 7"); got != 7 {
			t.Errorf("%s: SELECT 7 returned %d", what, got)
		}
	}

	want57014("simple-protocol pg_sleep(60)", func() error {
		_, err := pg.Exec(ctx, "SELECT pg_sleep(60) /* qt_simple */").ReadAll()
		return err
	}, "qt_simple")
	stillWorks("after the cancelled simple query")

	want57014("extended-protocol pg_sleep($1)", func() error {
		return pg.ExecParams(ctx, "SELECT pg_sleep($1::float8) /* qt_extended */", [][]byte{[]byte("60")}, nil, nil, nil).Read().Err
	}, "qt_extended")
	stillWorks("after the cancelled extended query")

	if _, err := pg.Exec(ctx, "BEGIN").ReadAll(); err != nil {
		t.Fatal(err)
	}
	want57014("pg_sleep(60) in a transaction on the primary", func() error {
		_, err := pg.Exec(ctx, "SELECT pg_sleep(60), txid_current() /* qt_tx */").ReadAll()
		return err
	}, "qt_tx")
	if _, err := pg.Exec(ctx, "ROLLBACK").ReadAll(); err != nil {
		t.Fatalf("ROLLBACK of the transaction whose statement was cancelled: %v", err)
	}
	stillWorks("after the cancelled transaction")

	// A client's own cancel still reads as the node's.
	go func() {
		time.Sleep(300 * time.Millisecond)
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		pg.CancelRequest(cctx)
	}()
	_, err := pg.Exec(ctx, "SELECT pg_sleep(60) /* qt_client */").ReadAll()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "57014" || strings.Contains(pgErr.Message, "limits.query_timeout") {
		t.Errorf("a client's own cancel: %v, want the node's 57014", err)
	}
	stillWorks("after the client's own cancel")

	// A statement within the limit is not touched.
	if _, err := pg.Exec(ctx, "SELECT pg_sleep(0.2)").ReadAll(); err != nil {
		t.Errorf("a statement within the limit: %v", err)
	}
}

// TestIdleTransactionTimeoutClosesTheSession: with
// limits.idle_transaction_timeout, a session idle inside a transaction past
// the limit is closed with FATAL 25P03 and its transaction rolled back, as
// PostgreSQL's idle_in_transaction_session_timeout does; a session idle
// outside a transaction, or busy inside one, is not touched.
func TestIdleTransactionTimeoutClosesTheSession(t *testing.T) {
	const limit = time.Second
	c := sharedClusterFor(t)
	o := startOwl(t, c, func(cfg *config.Config) { cfg.Limits.IdleTransactionTimeout = limit })
	createTable(t, c, "itt_rows", "CREATE TABLE itt_rows (id int)")
	ctx := timeoutCtx(t, 4*statementTimeout)

	idleOutside := o.connect(t, nil)
	busyInside := o.connect(t, nil)
	victim := o.connect(t, nil)

	if _, err := victim.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := victim.Exec(ctx, "INSERT INTO itt_rows VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if _, err := busyInside.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	// Busy: a statement that runs longer than the limit is not idleness.
	if _, err := busyInside.Exec(ctx, fmt.Sprintf("SELECT pg_sleep(%f)", (limit+500*time.Millisecond).Seconds())); err != nil {
		t.Fatalf("a statement longer than the idle limit inside a transaction: %v", err)
	}
	if _, err := busyInside.Exec(ctx, "COMMIT"); err != nil {
		t.Fatalf("COMMIT after the long statement: %v", err)
	}
	time.Sleep(limit + time.Second)

	_, err := victim.Exec(ctx, "SELECT 1")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25P03" || pgErr.Severity != "FATAL" {
		t.Fatalf("statement after idling %s in a transaction: %v, want FATAL 25P03", limit+time.Second, err)
	}
	t.Logf("idle in transaction: %s %s: %s", pgErr.Severity, pgErr.Code, pgErr.Message)
	if !victim.PgConn().IsClosed() {
		pingCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if victim.Ping(pingCtx) == nil {
			t.Errorf("the session idle in a transaction still works")
		}
		cancel()
	}
	if n := queryInt(t, idleOutside, "rows of the closed transaction", "SELECT count(*) FROM itt_rows"); n != 0 {
		t.Errorf("the closed session's transaction left %d rows; want it rolled back", n)
	}
	if n := queryInt(t, idleOutside, "session idle outside a transaction", "SELECT 5"); n != 5 {
		t.Errorf("a session idle outside a transaction: SELECT 5 returned %d", n)
	}
	fresh := o.connect(t, nil)
	if n := queryInt(t, fresh, "new session", "SELECT 6"); n != 6 {
		t.Errorf("new session: SELECT 6 returned %d", n)
	}
}
