package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// withCancelRequests makes pgx answer a cancelled context with a
// CancelRequest (sent to pgowl, the only server pgx knows) instead of
// closing the connection. If no answer comes, pgx gives up after 10s.
func withCancelRequests(cfg *pgx.ConnConfig) {
	cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: 10 * time.Second}
	}
}

// TestCancel cancels long statements, a read and a write, through pgowl: the
// node must report query_canceled (57014) quickly and the connection must
// stay usable. A cancel sent while nothing runs must not hit a later statement.
func TestCancel(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	createTable(t, c, "t8_sleep", "CREATE TABLE t8_sleep (n int)")

	cases := []struct {
		name, sql string
		mode      pgx.QueryExecMode
	}{
		{"read_extended", "SELECT pg_sleep(30)", pgx.QueryExecModeCacheStatement},
		{"read_simple", "SELECT pg_sleep(30)", pgx.QueryExecModeSimpleProtocol},
		{"write_extended", "INSERT INTO t8_sleep SELECT 1 FROM pg_sleep(30)", pgx.QueryExecModeCacheStatement},
		{"write_simple", "INSERT INTO t8_sleep SELECT 1 FROM pg_sleep(30)", pgx.QueryExecModeSimpleProtocol},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn := o.connect(t, func(cfg *pgx.ConnConfig) {
				withCancelRequests(cfg)
				cfg.DefaultQueryExecMode = tc.mode
			})
			// The context must outlive the extended protocol's prepare round trip, which a loaded
			// machine can stretch past 300ms: then pgx gives up before the statement is even sent.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			began := time.Now()
			err := runToEnd(ctx, conn, tc.sql, tc.mode)
			elapsed := time.Since(began)
			t.Logf("%s: failed after %s with %v; NOTICEs %v", tc.sql, elapsed.Round(time.Millisecond), err, conn.routes(t))
			wantSQLState(t, "cancelled statement", err, "57014")
			if elapsed > 5*time.Second {
				t.Errorf("the cancelled statement took %s to fail, want well under 10s", elapsed)
			}
			if conn.PgConn().IsClosed() {
				t.Fatalf("the connection was closed by the cancel")
			}
			if got := queryInt(t, conn, "after the cancel", "SELECT $1::int + 2", 40); got != 42 {
				t.Errorf("query after the cancel returned %d", got)
			}
			// No node may still be running the statement.
			checkCtx := timeoutCtx(t, statementTimeout)
			for _, n := range c.Nodes {
				var running int64
				err := n.QueryRow(checkCtx, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%pg_sleep(30)%' AND pid <> pg_backend_pid()").Scan(&running)
				if err != nil {
					t.Fatalf("pg_stat_activity on %s: %v", n.Name, err)
				}
				if running != 0 {
					t.Errorf("%s is still running the cancelled statement", n.Name)
				}
			}
		})
	}
	if got := primaryInt(t, c, "SELECT count(*) FROM t8_sleep"); got != 0 {
		t.Errorf("cancelled INSERTs left %d rows", got)
	}

	t.Run("late_cancel_hits_nothing", func(t *testing.T) {
		conn := o.connect(t, withCancelRequests)
		ctx := timeoutCtx(t, statementTimeout)
		if got := queryInt(t, conn, "first statement", "SELECT 1"); got != 1 {
			t.Fatalf("SELECT 1 returned %d", got)
		}
		if err := conn.PgConn().CancelRequest(ctx); err != nil {
			t.Fatalf("send a CancelRequest while idle: %v", err)
		}
		// The next statement sleeps long enough for a stray cancel to hit it.
		for i := range 3 {
			if err := runToEnd(ctx, conn, fmt.Sprintf("SELECT pg_sleep(0.2), %d", i)); err != nil {
				t.Errorf("statement %d after an idle CancelRequest failed: %v", i, err)
			}
		}
	})
}

// runToEnd runs a query, which may not take arguments, with pgx's Query and
// reads every row; it returns the query's error. Unlike pgx's Exec, which
// sends a statement without arguments as a simple Query whatever the mode,
// Query keeps the connection's query exec mode (or the one args select): the
// extended protocol unless that is QueryExecModeSimpleProtocol.
func runToEnd(ctx context.Context, conn *client, sql string, args ...any) error {
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	for rows.Next() {
	}
	rows.Close()
	return rows.Err()
}
