package integration

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Review of commit aaf5f5d ("A pin ends when the node says its state is gone").
// Every test of this file that uses rvStartOneBackend runs pgowl in front of
// the primary alone with pool.max_per_node = 1: sessions A and B share the one
// backend connection, so whatever A leaves on it while pgowl thinks A holds
// nothing is seen by B. B's probe may instead wait for the backend and fail
// with 53300 (acquire timeout): that means A's pin holds the backend, which is
// what must happen while A's state remains.

// r3pSetup creates the objects the tests use, idempotently.
func r3pSetup(t *testing.T) {
	t.Helper()
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, `DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'r3p_role') THEN CREATE ROLE r3p_role; END IF;
	END $$; GRANT r3p_role TO `+appUser+`;
	CREATE OR REPLACE FUNCTION public.r3p_make_temp() RETURNS int LANGUAGE plpgsql AS $f$
	BEGIN
		CREATE TEMP TABLE IF NOT EXISTS r3p_fn_temp (id int);
		RETURN 1;
	END $f$;
	GRANT EXECUTE ON FUNCTION public.r3p_make_temp() TO `+appUser); err != nil {
		t.Fatalf("setup: %v", err)
	}
	catchUp(t, c)
}

// r3pProbe is what B runs: every kind of state a pin stands for, as seen on
// B's backend connection. A clean backend answers r3pClean.
const r3pProbe = `SELECT concat_ws('|',
	'locks=' || (SELECT count(*) FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND pid = pg_catalog.pg_backend_pid()),
	'temp=' || (SELECT count(*) FROM pg_catalog.pg_class WHERE relnamespace = pg_catalog.pg_my_temp_schema()),
	'tempfuncs=' || (SELECT count(*) FROM pg_catalog.pg_proc WHERE pronamespace = pg_catalog.pg_my_temp_schema()),
	'listen=' || (SELECT count(*) FROM pg_catalog.pg_listening_channels()),
	'cursors=' || (SELECT count(*) FROM pg_catalog.pg_cursors),
	'prepared=' || (SELECT count(*) FROM pg_catalog.pg_prepared_statements WHERE from_sql),
	'user=' || current_user || '/' || session_user,
	'search_path=' || pg_catalog.current_setting('search_path'))`

var r3pClean = `locks=0|temp=0|tempfuncs=0|listen=0|cursors=0|prepared=0|user=app/app|search_path="$user", public`

// r3pCheckB runs the probe in session B. It fails t when B's backend shows
// state B never made (someone else's). 53300 (B waited for the one backend
// in vain) is accepted.
func r3pCheckB(t *testing.T, b *pgconn.PgConn, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := rvQueryOne(ctx, b, r3pProbe)
	if rvSQLState(err) == "53300" {
		return // A's pin holds the backend: as it should while its state remains
	}
	if err != nil {
		t.Fatalf("%s: B's probe: %v (SQLSTATE %s)", what, err, rvSQLState(err))
	}
	if got != r3pClean {
		t.Errorf("%s: session B got a backend carrying another session's state:\n got  %s\n want %s", what, got, r3pClean)
	}
}

// r3pExecAll runs sql statements in A with the simple protocol.
func r3pExecAll(t *testing.T, ctx context.Context, a *pgconn.PgConn, stmts ...string) {
	t.Helper()
	for _, sql := range stmts {
		if _, err := a.Exec(ctx, sql).ReadAll(); err != nil {
			t.Fatalf("A: %s: %v", sql, err)
		}
	}
}

// TestPinsExecuteThenDeallocateLeaksLock: PREPARE pins the session
// (SQL PREPARE), EXECUTE runs the prepared query, whose effects pgowl does not
// follow (unknown effect, no session bits), and DEALLOCATE now ends the
// PREPARE pin because pg_prepared_statements is empty. recheckPins only asks
// about the pins the session has (asked := sess.pinBits & checkablePins), so
// the advisory lock taken by the EXECUTE is never looked for: the pin ends
// and the backend, still holding A's session-level advisory lock, goes back
// to the pool where B gets it. Before aaf5f5d a plain DEALLOCATE kept the
// pin. Expected: the pin stays while the lock is held (B waits, 53300, or
// sees no lock). Cause: proxy/pins.go recheckPins asks only about pinBits;
// EXECUTE (classify/statements.go, Node_ExecuteStmt) carries none of the
// prepared statement's session effects.
func TestPinsExecuteThenDeallocateLeaksLock(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	r3pExecAll(t, ctx, a,
		"PREPARE r3p_lockit AS SELECT pg_advisory_lock(7371)",
		"EXECUTE r3p_lockit",
		"DEALLOCATE r3p_lockit")
	r3pCheckB(t, b, "after PREPARE/EXECUTE (lock)/DEALLOCATE")
}

// TestPinsExecuteThenDeallocateLeaksRole: the same with a role set by
// the prepared query (set_config('role', ...)). After DEALLOCATE the PREPARE
// pin ends and B runs as r3p_role. Expected: B runs as app (or waits).
func TestPinsExecuteThenDeallocateLeaksRole(t *testing.T) {
	r3pSetup(t)
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	r3pExecAll(t, ctx, a,
		"PREPARE r3p_roleit AS SELECT set_config('role', 'r3p_role', false)",
		"EXECUTE r3p_roleit",
		"DEALLOCATE r3p_roleit")
	r3pCheckB(t, b, "after PREPARE/EXECUTE (set_config role)/DEALLOCATE")
}

// TestPinsPrepareOnlyDiscardAllLeaksLock: a client that only prepares
// DISCARD ALL (Parse/Describe/Sync, nothing executes) makes pgowl believe
// every pin ended: runBatch gives the prepare-only unit the statement's
// effects and setSQL, afterUnit sends it to trackSessionEffects, whose
// SessionDiscardAll case sets pinBits = 0 (and forgets settings and
// statements). A's advisory lock is still held; the backend goes back to the
// pool and B gets it. Expected: a unit that executes nothing changes no
// session state (B waits, 53300). Cause: proxy/session.go afterUnit /
// trackSessionEffects do not look at u.runsNothing.
func TestPinsPrepareOnlyDiscardAllLeaksLock(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	r3pExecAll(t, ctx, a, "SELECT pg_advisory_lock(7372)")
	if _, err := a.Prepare(ctx, "r3p_discard", "DISCARD ALL", nil); err != nil {
		t.Fatalf("A prepares DISCARD ALL: %v", err)
	}
	r3pCheckB(t, b, "after A prepared (not executed) DISCARD ALL while holding a lock")
}

// TestPinsPrepareOnlyDiscardAllLeaksSettings: the same without a pin.
// A's SET search_path is applied to the backend before the prepare-only unit;
// the unit's DISCARD ALL effect then records the backend as having no
// settings (its connSettings key ""), so B, whose settings key is empty too,
// gets it without RESET ALL and runs with A's search_path.
func TestPinsPrepareOnlyDiscardAllLeaksSettings(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	r3pExecAll(t, ctx, a, "SET search_path = r3p_somewhere_else, public")
	// B uses the backend in between, so that A's next unit re-applies its SET.
	r3pCheckB(t, b, "B before")
	if _, err := a.Prepare(ctx, "r3p_discard2", "DISCARD ALL", nil); err != nil {
		t.Fatalf("A prepares DISCARD ALL: %v", err)
	}
	r3pCheckB(t, b, "after A prepared (not executed) DISCARD ALL with a search_path set")
	// A's own setting must still hold (it never executed DISCARD ALL).
	got, err := rvQueryOne(ctx, a, "SHOW search_path")
	if err != nil {
		t.Fatalf("A: SHOW search_path: %v", err)
	}
	if got != "r3p_somewhere_else, public" {
		t.Errorf("A's search_path is %q after only preparing DISCARD ALL; want r3p_somewhere_else, public", got)
	}
}

// TestPinsPrepareOnlyDeallocateAllBreaksStatements: preparing (not
// executing) DEALLOCATE ALL makes pgowl forget the session's prepared
// statements (trackSessionEffects -> forgetStatements), although they exist.
// The client's next Bind of its statement fails with 26000. Expected: the
// statement runs (PostgreSQL deallocated nothing).
func TestPinsPrepareOnlyDeallocateAllBreaksStatements(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	a := o.connect(t, nil).PgConn()
	if _, err := a.Prepare(ctx, "r3p_s1", "SELECT 'kept'::text", nil); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if _, err := a.Prepare(ctx, "r3p_dealloc", "DEALLOCATE ALL", nil); err != nil {
		t.Fatalf("A prepares DEALLOCATE ALL: %v", err)
	}
	got, err := rvExecPrepared(ctx, a, "r3p_s1")
	if err != nil {
		t.Fatalf("A's statement r3p_s1 after only preparing DEALLOCATE ALL: %v (SQLSTATE %s); PostgreSQL still has it", err, rvSQLState(err))
	}
	if got != "kept" {
		t.Errorf("got %q, want kept", got)
	}
}

// TestPinsFailedStatementKeepsLock: a single statement that takes a
// session-level advisory lock and then fails. Session-level advisory locks
// survive the error (they are not transactional), but afterUnit skips the
// session effects of a failed single statement ("A statement that failed
// changed nothing"), so the session is not pinned and B gets the backend with
// A's lock. Expected: the lock pins the session (or the node is asked, as
// recheckPins can). Cause: proxy/session.go afterUnit, first case.
func TestPinsFailedStatementKeepsLock(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	_, err := a.Exec(ctx, "SELECT pg_advisory_lock(7373), 1/(random()*0)::int").ReadAll()
	if rvSQLState(err) != "22012" {
		t.Fatalf("A: %v, want division by zero", err)
	}
	r3pCheckB(t, b, "after a failed statement that took a session lock")
	// A holds the one backend while its lock pins it; it leaves (its backend
	// is reset before reuse) so that A2 can log in.
	a.Close(ctx)
	// In an explicit transaction, ended by ROLLBACK.
	a2 := o.connect(t, nil).PgConn()
	r3pExecAll(t, ctx, a2, "BEGIN")
	_, err = a2.Exec(ctx, "SELECT pg_advisory_lock(7374), 1/(random()*0)::int").ReadAll()
	if rvSQLState(err) != "22012" {
		t.Fatalf("A2: %v, want division by zero", err)
	}
	r3pExecAll(t, ctx, a2, "ROLLBACK")
	r3pCheckB(t, b, "after ROLLBACK of a transaction whose failed statement took a session lock")
}

// TestPinsTempFunctionOutlivesDroppedTable: the temporary-table pin
// is checked with pg_class only. A function created in pg_temp is not in
// pg_class, so DROP TABLE of the last temporary table ends the pin while
// the temporary function remains: B can call pg_temp.r3p_tf(), A's.
// Expected: the pin stays while anything remains in the temporary schema
// (pg_proc, pg_type too), or DISCARD TEMP before hand-over. Cause:
// proxy/pins.go pinChecks (SessionTempTable); CREATE FUNCTION pg_temp.* is
// not pinned at all by the classifier either.
func TestPinsTempFunctionOutlivesDroppedTable(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	r3pExecAll(t, ctx, a,
		"CREATE TEMP TABLE r3p_tt (id int)",
		"CREATE FUNCTION pg_temp.r3p_tf() RETURNS text LANGUAGE sql AS $$SELECT 'a-temp-function'::text$$",
		"DROP TABLE r3p_tt")
	r3pCheckB(t, b, "after A dropped its temporary table but kept a temporary function")
}

// TestPinsTempTableInPgTempSchema: CREATE TABLE pg_temp.x creates a
// temporary table, but the classifier pins only relpersistence 't' (CREATE
// TEMP TABLE), so the session is never pinned and B sees A's table.
// Expected: pinned like CREATE TEMP TABLE. Cause: classify/statements.go
// isTemp ignores the pg_temp schema name.
func TestPinsTempTableInPgTempSchema(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	r3pExecAll(t, ctx, a, "CREATE TABLE pg_temp.r3p_tt2 (id int)")
	r3pCheckB(t, b, "after CREATE TABLE pg_temp.r3p_tt2")
}

// TestPinsDoBlockLock: a DO block is classified write("DO") with no
// session effect, so a session-level advisory lock (or LISTEN, temp table,
// SET ROLE) taken in it pins nothing and leaks to B. Expected: a DO block,
// whose effects pgowl cannot see, pins the session (or marks the backend
// dirty so it is DISCARDed before reuse).
func TestPinsDoBlockLock(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	r3pExecAll(t, ctx, a, "DO $$BEGIN PERFORM pg_advisory_lock(7375); END$$")
	r3pCheckB(t, b, "after a DO block took a session lock")
}

// TestPinsSharedBackendKept: cases where A's state remains after a
// statement that may release it; the pin must hold (B waits or finds a
// clean backend). These pass.
func TestPinsSharedBackendKept(t *testing.T) {
	r3pSetup(t)
	for _, tc := range []struct {
		name  string
		steps []string
	}{
		{"UnlockRolledBackStillReleases", []string{"SELECT pg_advisory_lock(7380)", "BEGIN", "SELECT pg_advisory_unlock(7380)", "ROLLBACK"}},
		{"DropTempRolledBack", []string{"CREATE TEMP TABLE r3p_a (id int)", "BEGIN", "DROP TABLE r3p_a", "ROLLBACK"}},
		{"DropTempSavepoint", []string{"CREATE TEMP TABLE r3p_b (id int)", "BEGIN", "SAVEPOINT s", "DROP TABLE r3p_b", "ROLLBACK TO SAVEPOINT s", "COMMIT"}},
		{"DiscardTempRolledBack", []string{"CREATE TEMP TABLE r3p_c (id int)", "BEGIN", "DISCARD TEMP", "ROLLBACK"}},
		{"UnlockAllThenLockMulti", []string{"SELECT pg_advisory_lock(7381)", "SELECT pg_advisory_unlock_all(); SELECT pg_advisory_lock(7382)"}},
		{"ResetRoleRolledBack", []string{"SET ROLE r3p_role", "BEGIN", "RESET ROLE", "ROLLBACK"}},
		{"SetLocalRoleInsideSetRole", []string{"SET ROLE r3p_role", "BEGIN", "SET LOCAL ROLE " + appUser, "COMMIT"}},
		{"UnlistenRolledBack", []string{"LISTEN r3p_chan", "BEGIN", "UNLISTEN r3p_chan", "ROLLBACK"}},
		{"HoldCursorCommittedOtherClosed", []string{"BEGIN", "DECLARE r3p_h CURSOR WITH HOLD FOR SELECT 1", "DECLARE r3p_c CURSOR FOR SELECT 1", "CLOSE r3p_c", "COMMIT"}},
		{"CloseMissingCursorFails", []string{"DECLARE r3p_h2 CURSOR WITH HOLD FOR SELECT 1", "-CLOSE r3p_nope"}},
		{"DropMissingTableFails", []string{"CREATE TEMP TABLE r3p_d (id int)", "-DROP TABLE r3p_nope_table"}},
		{"DeallocateOtherPrepare", []string{"PREPARE r3p_p1 AS SELECT 1", "PREPARE r3p_p2 AS SELECT 2", "DEALLOCATE r3p_p1"}},
		{"DeallocateThenPrepareMulti", []string{"PREPARE r3p_p3 AS SELECT 1", "DEALLOCATE r3p_p3; PREPARE r3p_p4 AS SELECT 2"}},
		{"NestedLockOneUnlock", []string{"SELECT pg_advisory_lock(7383)", "SELECT pg_advisory_lock_shared(7383)", "SELECT pg_advisory_unlock(7383)"}},
		{"UnlockInFailedStatement", []string{"SELECT pg_advisory_lock(7384), pg_advisory_lock(7385)", "-SELECT pg_advisory_unlock(7384), 1/(random()*0)::int"}},
		{"TempTableFromFunctionThenDropOther", []string{"CREATE TEMP TABLE r3p_e (id int)", "SELECT public.r3p_make_temp()", "DROP TABLE r3p_e"}},
		{"SetSessionRoleViaSetConfigLocalInTx", []string{"SET ROLE r3p_role", "BEGIN", "SELECT set_config('role', 'none', true)", "COMMIT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := rvStartOneBackend(t, nil)
			ctx := timeoutCtx(t, statementTimeout)
			a := o.connect(t, nil).PgConn()
			b := o.connect(t, nil).PgConn()
			for _, s := range tc.steps {
				if strings.HasPrefix(s, "-") {
					if _, err := a.Exec(ctx, s[1:]).ReadAll(); err == nil {
						t.Fatalf("A: %s succeeded, want an error", s[1:])
					}
					continue
				}
				r3pExecAll(t, ctx, a, s)
			}
			r3pCheckB(t, b, strings.Join(tc.steps, "; "))
		})
	}
}

// TestPinsExtendedProtocol: releases through the extended protocol
// (pgx's default statement cache, a batch with one Sync, a pipeline with a
// Sync per statement) keep the pin while state remains, and the session
// keeps working after pgowl's check query.
func TestPinsExtendedProtocol(t *testing.T) {
	t.Run("CachedStatementsNestedLock", func(t *testing.T) {
		o := rvStartOneBackend(t, nil)
		ctx := timeoutCtx(t, statementTimeout)
		a := o.connect(t, withMode(pgx.QueryExecModeCacheStatement))
		b := o.connect(t, nil).PgConn()
		for i := 0; i < 2; i++ {
			if _, err := a.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(7390)); err != nil {
				t.Fatal(err)
			}
		}
		var ok bool
		if err := a.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", int64(7390)).Scan(&ok); err != nil || !ok {
			t.Fatalf("unlock: %v %v", ok, err)
		}
		r3pCheckB(t, b, "lock twice, unlock once (cached statements)")
		// A's cached statements still work after the check queries.
		if err := a.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", int64(7390)).Scan(&ok); err != nil || !ok {
			t.Fatalf("second unlock: %v %v", ok, err)
		}
		var n int
		if err := a.QueryRow(ctx, "SELECT $1::int + 1", 1).Scan(&n); err != nil || n != 2 {
			t.Fatalf("A after the pin ended: %d %v", n, err)
		}
	})
	t.Run("BatchUnlockAllThenLock", func(t *testing.T) {
		o := rvStartOneBackend(t, nil)
		ctx := timeoutCtx(t, statementTimeout)
		a := o.connect(t, nil)
		b := o.connect(t, nil).PgConn()
		if _, err := a.Exec(ctx, "SELECT pg_advisory_lock(7391)"); err != nil {
			t.Fatal(err)
		}
		batch := &pgx.Batch{}
		batch.Queue("SELECT pg_advisory_unlock_all()")
		batch.Queue("SELECT pg_advisory_lock($1)", int64(7392))
		if err := a.SendBatch(ctx, batch).Close(); err != nil {
			t.Fatal(err)
		}
		r3pCheckB(t, b, "batch unlock_all then lock")
	})
	t.Run("PipelineUnlockSyncLockSync", func(t *testing.T) {
		o := rvStartOneBackend(t, nil)
		ctx := timeoutCtx(t, statementTimeout)
		a := o.connect(t, nil).PgConn()
		b := o.connect(t, nil).PgConn()
		r3pExecAll(t, ctx, a, "SELECT pg_advisory_lock(7393)")
		p := a.StartPipeline(ctx)
		p.SendQueryParams("SELECT pg_advisory_unlock(7393)", nil, nil, nil, nil)
		p.Sync()
		p.SendQueryParams("SELECT pg_advisory_lock(7394)", nil, nil, nil, nil)
		p.Sync()
		p.SendQueryParams("SELECT 'after'::text", nil, nil, nil, nil)
		p.Sync()
		if err := p.Flush(); err != nil {
			t.Fatal(err)
		}
		var values []string
		for syncs := 0; syncs < 3; {
			r, err := p.GetResults()
			if err != nil {
				t.Fatalf("pipeline: %v", err)
			}
			switch r := r.(type) {
			case *pgconn.ResultReader:
				res := r.Read()
				if res.Err != nil {
					t.Fatalf("pipeline result: %v", res.Err)
				}
				for _, row := range res.Rows {
					values = append(values, string(row[0]))
				}
			case *pgconn.PipelineSync:
				syncs++
			case nil:
				t.Fatalf("pipeline ended early")
			}
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if strings.Join(values, ",") != "t,,after" {
			t.Errorf("pipeline values %q, want t,,after", values)
		}
		r3pCheckB(t, b, "pipeline unlock/Sync/lock/Sync")
	})
	t.Run("UnnamedStatementRebindAfterCheck", func(t *testing.T) {
		// Parse "" once, Bind "" twice: the check query (a simple Query)
		// drops the node's unnamed statement in between.
		o := rvStartOneBackend(t, nil)
		ctx := timeoutCtx(t, statementTimeout)
		a := o.connect(t, nil).PgConn()
		r3pExecAll(t, ctx, a, "SELECT pg_advisory_lock(7395)", "SELECT pg_advisory_lock(7395)", "SELECT pg_advisory_lock(7395)")
		if _, err := a.Prepare(ctx, "", "SELECT pg_advisory_unlock(7395)::text", nil); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			got, err := rvExecPrepared(ctx, a, "")
			if err != nil || got != "true" {
				t.Fatalf("Bind of the unnamed statement #%d: %q %v", i+1, got, err)
			}
		}
	})
}

// TestPinsNotificationsDuringCheck: a session listening on two
// channels unlistens and relistens one of them many times (each UNLISTEN
// makes pgowl ask the node what remains) while notifications on the other
// channel keep arriving. Every notification must reach the client.
func TestPinsNotificationsDuringCheck(t *testing.T) {
	c := sharedClusterFor(t)
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, 60*time.Second)
	// The listener goes through pgowl; the notifier connects to the primary
	// directly so that it does not need the one backend.
	listener := o.connect(t, nil)
	notifier, err := c.Nodes[0].Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer notifier.Close(context.Background())
	if _, err := listener.Exec(ctx, "LISTEN r3p_keep"); err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			n := sent.Load() + 1
			if _, err := notifier.Exec(ctx, "SELECT pg_notify('r3p_keep', $1)", fmt.Sprint(n)); err != nil {
				done <- err
				return
			}
			sent.Store(n)
		}
	}()
	for i := 0; i < 200; i++ {
		if _, err := listener.Exec(ctx, "LISTEN r3p_flip"); err != nil {
			t.Fatal(err)
		}
		if _, err := listener.Exec(ctx, "UNLISTEN r3p_flip"); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := sent.Load()
	got := map[string]bool{}
	for int64(len(got)) < want {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := listener.WaitForNotification(wctx)
		cancel()
		if err != nil {
			t.Fatalf("received %d of %d notifications: %v", len(got), want, err)
		}
		if n.Channel != "r3p_keep" {
			t.Errorf("notification on %q", n.Channel)
			continue
		}
		got[n.Payload] = true
	}
	// The session still works and is still pinned by r3p_keep.
	if _, err := listener.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
}

// TestPinsRollbackLeavesStalePin: a pin whose state a ROLLBACK
// removed (a temporary table or LISTEN or WITH HOLD cursor created in a
// transaction that rolled back) is not rechecked: ROLLBACK carries no
// SessionRelease, so the session stays pinned to the primary although
// nothing remains. Expected: the read after ROLLBACK runs on a standby.
// (Second class: no leak, but the pin never ends until a release statement.)
func TestPinsRollbackLeavesStalePin(t *testing.T) {
	c := sharedClusterFor(t)
	// read_your_writes off: this test reads on a standby right after a write in
	// the same session to check that the pin ended, not read your writes (read_your_writes_test.go).
	o := startOwl(t, c, readYourWritesOff)
	for _, tc := range []struct{ name, stmt string }{
		{"TempTable", "CREATE TEMP TABLE r3p_rb (id int)"},
		{"Listen", "LISTEN r3p_rb_chan"},
		{"HoldCursor", "DECLARE r3p_rb_cur CURSOR WITH HOLD FOR SELECT 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := o.connect(t, nil)
			ctx := timeoutCtx(t, statementTimeout)
			for _, s := range []string{"BEGIN", tc.stmt, "ROLLBACK"} {
				if _, err := conn.Exec(ctx, s); err != nil {
					t.Fatalf("%s: %v", s, err)
				}
			}
			conn.routes(t)
			if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
				t.Fatal(err)
			}
			r := conn.oneRoute(t, "read after ROLLBACK")
			wantRoute(t, "read after BEGIN; "+tc.stmt+"; ROLLBACK (nothing left)", r, "standby", "READ_ONLY")
		})
	}
}

// TestPinsCheckQueryFollowsSessionSearchPath: pgowl's check query
// names its tables and functions with pg_catalog but not its operators
// (locktype = 'advisory', current_user = session_user), and runs under the
// session's search_path. A session whose search_path puts a schema with its
// own text = operator before pg_catalog makes the check answer "no advisory
// lock" while it holds one; the pin ends and B gets A's lock. Expected: the
// check reads the same whatever the session's search_path (OPERATOR(pg_catalog.=),
// or a search_path of its own). Cause: proxy/pins.go pinChecks.
func TestPinsCheckQueryFollowsSessionSearchPath(t *testing.T) {
	c := sharedClusterFor(t)
	setup := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(setup, `CREATE SCHEMA IF NOT EXISTS r3p_ops;
	CREATE OR REPLACE FUNCTION r3p_ops.never(text, text) RETURNS bool LANGUAGE sql IMMUTABLE AS 'SELECT false';
	DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_operator o JOIN pg_namespace n ON n.oid = o.oprnamespace
		               WHERE n.nspname = 'r3p_ops' AND o.oprname = '=') THEN
			CREATE OPERATOR r3p_ops.= (LEFTARG = text, RIGHTARG = text, FUNCTION = r3p_ops.never);
		END IF;
	END $$;
	GRANT USAGE ON SCHEMA r3p_ops TO `+appUser); err != nil {
		t.Fatalf("setup: %v", err)
	}
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	r3pExecAll(t, ctx, a,
		"SET search_path = r3p_ops, pg_catalog, public",
		"SELECT pg_advisory_lock(7396)",
		"SELECT pg_advisory_unlock(7397)") // releases nothing; makes pgowl ask
	r3pCheckB(t, b, "after A's check query ran under A's search_path")
}
