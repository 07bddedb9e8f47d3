package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/route"
)

// The tests of this file check that one client session cannot see, use or
// lose state because another session used the same pooled backend
// connection before or after it. Each starts pgowl in front of the shared
// cluster's primary only, with pool.max_per_node 1, so that every session
// runs on the same backend connection, one unit after the other.

// rvStartOneBackend starts pgowl in front of the primary alone with one
// backend connection; mutate (which may be nil) adjusts the configuration
// further.
func rvStartOneBackend(t *testing.T, mutate func(*config.Config)) *owl {
	t.Helper()
	c := sharedClusterFor(t)
	o := startOwlNoWait(t, c, func(cfg *config.Config) {
		cfg.Nodes = cfg.Nodes[:1]
		cfg.Pool.MaxPerNode = 1
		cfg.Pool.AcquireTimeout = 2 * time.Second
		if mutate != nil {
			mutate(cfg)
		}
	})
	o.waitRoles(t, map[string]route.Role{c.Nodes[0].Name: route.RolePrimary})
	return o
}

// rvExecPrepared runs a prepared statement (Bind/Describe/Execute/Sync) and
// returns its single text value.
func rvExecPrepared(ctx context.Context, conn *pgconn.PgConn, name string) (string, error) {
	res := conn.ExecPrepared(ctx, name, nil, nil, nil).Read()
	if res.Err != nil {
		return "", res.Err
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		return "", fmt.Errorf("got %d rows, want one row of one column", len(res.Rows))
	}
	return string(res.Rows[0][0]), nil
}

// rvQueryOne runs a simple query and returns its single text value ("<null>" for NULL).
func rvQueryOne(ctx context.Context, conn *pgconn.PgConn, sql string) (string, error) {
	results, err := conn.Exec(ctx, sql).ReadAll()
	if err != nil {
		return "", err
	}
	last := results[len(results)-1]
	if len(last.Rows) != 1 || len(last.Rows[0]) != 1 {
		return "", fmt.Errorf("%s: got %d rows, want one row of one column", sql, len(last.Rows))
	}
	if last.Rows[0][0] == nil {
		return "<null>", nil
	}
	return string(last.Rows[0][0]), nil
}

func rvSQLState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// TestSharedBackendFailedUnnamedParseKeepsOtherSessionsStatement: PostgreSQL drops
// the unnamed statement at the start of a Parse of the unnamed statement,
// even when that Parse then fails. pgowl's undo of the failed Parse restores
// the connection's record of the previous unnamed statement, which belongs
// to another session: that session's next Bind is sent without the Parse it
// needs and fails with 26000, where PostgreSQL would run it.
func TestSharedBackendFailedUnnamedParseKeepsOtherSessionsStatement(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	b := o.connect(t, nil).PgConn()
	a := o.connect(t, nil).PgConn()

	// B: Parse "" / Describe / Sync (pgx's describe-then-execute).
	if _, err := b.Prepare(ctx, "", "SELECT 'b-statement'::text", nil); err != nil {
		t.Fatalf("B prepares the unnamed statement: %v", err)
	}
	// A: a Parse of the unnamed statement that fails (on the same backend).
	if _, err := a.Prepare(ctx, "", "SELEC 1", nil); err == nil {
		t.Fatalf("A's Parse of invalid SQL succeeded")
	}
	// B executes its unnamed statement: PostgreSQL runs it.
	got, err := rvExecPrepared(ctx, b, "")
	if err != nil {
		t.Fatalf("B's Bind of its own unnamed statement failed after another session's failed Parse (SQLSTATE %s): %v", rvSQLState(err), err)
	}
	if got != "b-statement" {
		t.Errorf("B's unnamed statement returned %q, want b-statement", got)
	}
}

// TestSharedBackendOwnFailedUnnamedParse: the same within one session. After a
// failed Parse of the unnamed statement a Bind of "" must fail (PostgreSQL
// dropped the statement); pgowl restores the client's previous unnamed
// statement and runs it.
func TestSharedBackendOwnFailedUnnamedParse(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	a := o.connect(t, nil).PgConn()
	if _, err := a.Prepare(ctx, "", "SELECT 'first'::text", nil); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if _, err := a.Prepare(ctx, "", "SELEC 1", nil); err == nil {
		t.Fatalf("Parse of invalid SQL succeeded")
	}
	got, err := rvExecPrepared(ctx, a, "")
	if err == nil {
		t.Errorf("Bind of the unnamed statement after its Parse failed returned %q; PostgreSQL answers 26000 (the failed Parse dropped the unnamed statement)", got)
	} else if rvSQLState(err) != "26000" {
		t.Errorf("Bind after failed Parse: %v, want SQLSTATE 26000", err)
	}
}

// TestSharedBackendQuietSettingsQueryDropsUnnamed: the settings pgowl applies before
// a unit (SET ... / RESET ALL, sent as a simple Query) drop the node's unnamed
// statement, but the connection's record of it stays. A session that parsed
// the unnamed statement, then finds its backend used meanwhile by a session
// with other settings, has its Bind sent without the Parse it needs.
func TestSharedBackendQuietSettingsQueryDropsUnnamed(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	b := o.connect(t, nil).PgConn()
	a := o.connect(t, nil).PgConn()

	if _, err := a.Exec(ctx, "SET review.tenant = 'a'").ReadAll(); err != nil {
		t.Fatalf("A SET: %v", err)
	}
	if _, err := b.Prepare(ctx, "", "SELECT 'b-statement'::text", nil); err != nil {
		t.Fatalf("B prepares the unnamed statement: %v", err)
	}
	// A prepares a named statement: pgowl first re-applies A's SET on the backend.
	if _, err := a.Prepare(ctx, "a1", "SELECT 1", nil); err != nil {
		t.Fatalf("A prepares a named statement: %v", err)
	}
	got, err := rvExecPrepared(ctx, b, "")
	if err != nil {
		t.Fatalf("B's Bind of its own unnamed statement failed after another session used the backend (SQLSTATE %s): %v", rvSQLState(err), err)
	}
	if got != "b-statement" {
		t.Errorf("B's unnamed statement returned %q, want b-statement", got)
	}
}

// TestSharedBackendHealthCheckDropsUnnamed: the pool's health check is an empty
// simple Query, which drops the node's unnamed statement; the connection
// still records it, so a Bind after the check is sent without the Parse.
func TestSharedBackendHealthCheckDropsUnnamed(t *testing.T) {
	o := rvStartOneBackend(t, func(cfg *config.Config) {
		cfg.Pool.HealthCheckAfter = 50 * time.Millisecond
	})
	ctx := timeoutCtx(t, statementTimeout)
	a := o.connect(t, nil).PgConn()
	if _, err := a.Prepare(ctx, "", "SELECT 'mine'::text", nil); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	got, err := rvExecPrepared(ctx, a, "")
	if err != nil {
		t.Fatalf("Bind of the unnamed statement after the backend sat idle past health_check_after failed (SQLSTATE %s): %v", rvSQLState(err), err)
	}
	if got != "mine" {
		t.Errorf("got %q, want mine", got)
	}
}

// TestSharedBackendBindUnnamedRunsOtherSessionsStatement: a client that binds the
// unnamed statement without having one gets 26000 from PostgreSQL. pgowl
// forwards the Bind as it is, and the backend runs the unnamed statement
// another session parsed there.
func TestSharedBackendBindUnnamedRunsOtherSessionsStatement(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	b := o.connect(t, nil).PgConn()
	a := o.connect(t, nil).PgConn()
	if _, err := b.Prepare(ctx, "", "SELECT 'b-secret'::text", nil); err != nil {
		t.Fatalf("B prepares the unnamed statement: %v", err)
	}
	got, err := rvExecPrepared(ctx, a, "")
	if err == nil {
		t.Fatalf("A, which never parsed an unnamed statement, bound one and got %q (B's statement); PostgreSQL answers 26000", got)
	}
	if rvSQLState(err) != "26000" {
		t.Errorf("A's Bind of a missing unnamed statement: %v, want SQLSTATE 26000", err)
	}
}

// TestSharedBackendDeallocateAllNotRecognised: DEALLOCATE ALL and DISCARD ALL drop
// every prepared statement on the backend. pgowl recognises them only as the
// exact words, alone: inside a multi-statement string or with a comment, the
// connection still lists the statements it held, and another session's Bind
// of its named statement is sent without the Parse it needs.
func TestSharedBackendDeallocateAllNotRecognised(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	for i, sql := range []string{
		"SELECT 1; DEALLOCATE ALL",
		"/* pool reset */ DEALLOCATE ALL",
		"DISCARD ALL -- pool reset",
	} {
		t.Run(fmt.Sprintf("case%d", i), func(t *testing.T) {
			ctx := timeoutCtx(t, statementTimeout)
			b := o.connect(t, nil).PgConn()
			a := o.connect(t, nil).PgConn()
			want := fmt.Sprintf("b-named-%d", i)
			if _, err := b.Prepare(ctx, "b1", fmt.Sprintf("SELECT '%s'::text", want), nil); err != nil {
				t.Fatalf("B prepares: %v", err)
			}
			if _, err := a.Exec(ctx, sql).ReadAll(); err != nil {
				t.Fatalf("A %q: %v", sql, err)
			}
			got, err := rvExecPrepared(ctx, b, "b1")
			if err != nil {
				t.Fatalf("after another session ran %q, B's own named statement failed (SQLSTATE %s): %v", sql, rvSQLState(err), err)
			}
			if got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}

// TestSharedBackendUntrackedSetLeaks: a session-level SET that pgowl does not track
// stays on the pooled backend, whose record says it carries no settings, so
// the next session that gets it sees the first session's setting.
func TestSharedBackendUntrackedSetLeaks(t *testing.T) {
	o := rvStartOneBackend(t, nil)

	t.Run("multi_statement_string", func(t *testing.T) {
		ctx := timeoutCtx(t, statementTimeout)
		a := o.connect(t, nil).PgConn()
		b := o.connect(t, nil).PgConn()
		if _, err := a.Exec(ctx, "SET review.leak1 = 'from-a'; SELECT 1").ReadAll(); err != nil {
			t.Fatalf("A: %v", err)
		}
		got, err := rvQueryOne(ctx, b, "SELECT current_setting('review.leak1', true)")
		if err != nil {
			t.Fatalf("B: %v", err)
		}
		if got == "from-a" {
			t.Errorf("session B sees session A's setting review.leak1 = %q; on PostgreSQL B's session has no such setting", got)
		}
	})

	// SET inside a transaction, committed by a multi-statement string whose
	// last command is not COMMIT: pgowl applies the transaction's settings
	// only when the unit's last command tag is COMMIT, so it forgets them
	// while the node keeps them.
	t.Run("commit_in_multi_statement_string", func(t *testing.T) {
		ctx := timeoutCtx(t, statementTimeout)
		a := o.connect(t, nil).PgConn()
		b := o.connect(t, nil).PgConn()
		for _, sql := range []string{"BEGIN", "SET review.leak3 = 'from-a'", "COMMIT; SELECT 1"} {
			if _, err := a.Exec(ctx, sql).ReadAll(); err != nil {
				t.Fatalf("A %q: %v", sql, err)
			}
		}
		got, err := rvQueryOne(ctx, b, "SELECT current_setting('review.leak3', true)")
		if err != nil {
			t.Fatalf("B: %v", err)
		}
		if got == "from-a" {
			t.Errorf("session B sees session A's setting review.leak3 = %q; on PostgreSQL B's session has no such setting", got)
		}
	})
}

// TestSharedBackendFailedUnitSkipsPin: a session-pinning statement (SET ROLE) that
// is committed inside a unit which then fails. pgowl skips a failed unit's
// session effects, so the session is not pinned and the backend, still
// running as the role, goes back to the pool for another session.
func TestSharedBackendFailedUnitSkipsPin(t *testing.T) {
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, 2*statementTimeout)
	su, err := c.Nodes[0].Connect(ctx)
	if err != nil {
		t.Fatalf("connect as superuser: %v", err)
	}
	defer su.Close(context.Background())
	for _, sql := range []string{
		"DROP ROLE IF EXISTS review_leak_role",
		"CREATE ROLE review_leak_role NOLOGIN",
		"GRANT review_leak_role TO " + appUser,
	} {
		if _, err := su.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	o := rvStartOneBackend(t, nil)

	// checkB runs current_user in a second session: on PostgreSQL it is the
	// app user. DATABASE_BUSY means A's pin holds the one backend, as it should.
	checkB := func(t *testing.T, b *pgconn.PgConn) {
		t.Helper()
		got, err := rvQueryOne(ctx, b, "SELECT current_user::text")
		if rvSQLState(err) == "53300" {
			return
		}
		if err != nil {
			t.Fatalf("B: %v", err)
		}
		if got != appUser {
			t.Errorf("session B runs as %q, set by session A's SET ROLE; want %q", got, appUser)
		}
	}

	// One simple Query: SET ROLE, COMMIT (which ends the implicit transaction
	// and keeps the role), then a statement that fails.
	t.Run("multi_statement_commit_then_error", func(t *testing.T) {
		a := o.connect(t, nil).PgConn()
		b := o.connect(t, nil).PgConn()
		_, err := a.Exec(ctx, "SET ROLE review_leak_role; COMMIT; SELECT 1/0").ReadAll()
		if rvSQLState(err) != "22012" {
			t.Fatalf("A: %v, want division by zero", err)
		}
		if got, err := rvQueryOne(ctx, a, "SELECT current_user::text"); err != nil || got != "review_leak_role" {
			t.Logf("A's current_user afterwards: %q, %v (PostgreSQL: review_leak_role)", got, err)
		}
		checkB(t, b)
	})

	// A pipeline: each Sync ends its own unit in pgowl, so the SET ROLE
	// segment is tracked (this passes; it guards the per-Sync units).
	t.Run("pipeline_segments", func(t *testing.T) {
		a := o.connect(t, nil).PgConn()
		b := o.connect(t, nil).PgConn()
		p := a.StartPipeline(ctx)
		p.SendQueryParams("SET ROLE review_leak_role", nil, nil, nil, nil)
		p.Sync()
		p.SendQueryParams("SELECT 1/0", nil, nil, nil, nil)
		p.Sync()
		if err := p.Flush(); err != nil {
			t.Fatalf("flush: %v", err)
		}
		for syncs := 0; syncs < 2; {
			r, err := p.GetResults()
			if err != nil {
				continue
			}
			switch r := r.(type) {
			case *pgconn.ResultReader:
				r.Close()
			case *pgconn.PipelineSync:
				syncs++
			case nil:
				t.Fatalf("pipeline ended early")
			}
		}
		p.Close()
		checkB(t, b)
	})
}

// TestSharedBackendAdvisoryUnlockAllReleasesPinWithLockHeld: a statement that calls
// pg_advisory_unlock_all() and then takes a lock releases pgowl's pin, so the
// backend, still holding the lock, goes back to the pool: another session
// can release it, and it outlives its owner's session.
func TestSharedBackendAdvisoryUnlockAllReleasesPinWithLockHeld(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	if _, err := a.Exec(ctx, "SELECT pg_advisory_unlock_all(), pg_advisory_lock(424242)").ReadAll(); err != nil {
		t.Fatalf("A takes the lock: %v", err)
	}
	// On PostgreSQL B does not hold A's lock: pg_advisory_unlock returns false.
	bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	got, err := rvQueryOne(bctx, b, "SELECT pg_advisory_unlock(424242)::text")
	if rvSQLState(err) == "53300" {
		a.Exec(ctx, "SELECT pg_advisory_unlock_all()").ReadAll()
		return // A's pin holds the one backend: B waits for it, as it should
	}
	if err != nil {
		t.Fatalf("B: %v (SQLSTATE %s)", err, rvSQLState(err))
	}
	if got != "false" {
		t.Errorf("session B released session A's advisory lock (pg_advisory_unlock returned %s)", got)
	}
	a.Exec(ctx, "SELECT pg_advisory_unlock_all()").ReadAll()
}

// TestSharedBackendSkippedCloseKeepsUnnamedStatement: after an error in an
// extended batch the node skips the rest up to Sync, Close included, so the
// unnamed statement it was to close is still on the connection. pgowl must
// still know it is there: a session with no unnamed statement of its own
// that binds one must get 26000, not the statement the other left.
func TestSharedBackendSkippedCloseKeepsUnnamedStatement(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	if _, err := a.Prepare(ctx, "", "SELECT 'a-secret'::text", nil); err != nil {
		t.Fatalf("A prepares the unnamed statement: %v", err)
	}
	// Execute of a portal that does not exist fails (34000); the Close after
	// it is skipped by the node.
	fe := a.Frontend()
	fe.Send(&pgproto3.Execute{Portal: "no_such_portal"})
	fe.Send(&pgproto3.Close{ObjectType: 'S', Name: ""})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	var sawError bool
	for {
		msg, err := a.ReceiveMessage(ctx)
		if err != nil {
			t.Fatalf("A's batch: %v", err)
		}
		if e, ok := msg.(*pgproto3.ErrorResponse); ok {
			sawError = e.Code == "34000"
		}
		if _, ok := msg.(*pgproto3.CloseComplete); ok {
			t.Errorf("the node skips a Close after an error, but A got CloseComplete")
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			break
		}
	}
	if !sawError {
		t.Fatalf("A's Execute of a missing portal did not fail with 34000")
	}
	got, err := rvExecPrepared(ctx, b, "")
	if err == nil {
		t.Fatalf("B, which never parsed an unnamed statement, bound one and got %q (A's statement); PostgreSQL answers 26000", got)
	}
	if rvSQLState(err) != "26000" {
		t.Errorf("B's Bind of a missing unnamed statement: %v, want SQLSTATE 26000", err)
	}
	// A's statement survived its skipped Close, as on PostgreSQL.
	if got, err := rvExecPrepared(ctx, a, ""); err != nil || got != "a-secret" {
		t.Errorf("A's unnamed statement after its skipped Close: %q, %v; want a-secret", got, err)
	}
}
