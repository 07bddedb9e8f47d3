package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgowl/pgowl/integration/owltest"
)

// The tests of this file give two clients one backend connection (pool.max_per_node 1, the
// primary alone: rvStartOneBackend) and check, on the node, that session state one client
// makes in a function call does not reach the other.

// stateLeakSetup creates, on the primary, a role the app user may SET ROLE to and functions
// that change session state in ways a client reaches through an ordinary SELECT.
func stateLeakSetup(t *testing.T) {
	t.Helper()
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, `DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'review_state_role') THEN CREATE ROLE review_state_role; END IF;
	END $$; GRANT review_state_role TO `+appUser+`;
	-- A generic "run this statement" helper, as applications and migration tools define.
	CREATE OR REPLACE FUNCTION public.review_state_exec(stmt text) RETURNS void LANGUAGE plpgsql AS $f$
	BEGIN
		EXECUTE stmt;
	END $f$;
	-- A tenant switch as multi-tenant applications write it.
	CREATE OR REPLACE FUNCTION public.review_state_tenant(tenant text) RETURNS void LANGUAGE plpgsql AS $f$
	BEGIN
		EXECUTE format('SET review_state.tenant = %L', tenant);
	END $f$;
	CREATE OR REPLACE FUNCTION public.review_state_become(r text) RETURNS void LANGUAGE plpgsql AS $f$
	BEGIN
		EXECUTE format('SET ROLE %I', r);
	END $f$;
	CREATE OR REPLACE FUNCTION public.review_state_listen(ch text) RETURNS void LANGUAGE plpgsql AS $f$
	BEGIN
		EXECUTE format('LISTEN %I', ch);
	END $f$;
	CREATE OR REPLACE FUNCTION public.review_state_lock(k bigint) RETURNS void LANGUAGE plpgsql AS $f$
	BEGIN
		EXECUTE format('SELECT pg_advisory_lock(%s)', k);
	END $f$;
	CREATE OR REPLACE FUNCTION public.review_state_scratch(n text) RETURNS void LANGUAGE plpgsql AS $f$
	BEGIN
		EXECUTE format('CREATE TEMP TABLE IF NOT EXISTS %I (id int)', n);
	END $f$;
	-- A body pg_query cannot read (a cursor variable): its effect is unknown.
	CREATE OR REPLACE FUNCTION public.review_state_cursor_lock() RETURNS int LANGUAGE plpgsql AS $f$
	DECLARE
		c CURSOR FOR SELECT 1 AS x;
		r record;
	BEGIN
		PERFORM pg_advisory_lock(7570);
		OPEN c;
		FETCH c INTO r;
		CLOSE c;
		RETURN r.x;
	END $f$;
	GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO `+appUser); err != nil {
		t.Fatalf("set up review_state functions: %v", err)
	}
	catchUp(t, c)
}

// stateLeakProbe is what the other client runs: the session state of its backend connection.
const stateLeakProbe = `SELECT concat_ws('|',
	'locks=' || (SELECT count(*) FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND pid = pg_catalog.pg_backend_pid()),
	'temp=' || (SELECT count(*) FROM pg_catalog.pg_class WHERE relnamespace = pg_catalog.pg_my_temp_schema()),
	'listen=' || (SELECT count(*) FROM pg_catalog.pg_listening_channels()),
	'cursors=' || (SELECT count(*) FROM pg_catalog.pg_cursors),
	'prepared=' || (SELECT count(*) FROM pg_catalog.pg_prepared_statements WHERE from_sql),
	'user=' || current_user || '/' || session_user,
	'tenant=' || coalesce(pg_catalog.current_setting('review_state.tenant', true), ''),
	'search_path=' || pg_catalog.current_setting('search_path'),
	'dtro=' || pg_catalog.current_setting('default_transaction_read_only'))`

const stateLeakClean = `locks=0|temp=0|listen=0|cursors=0|prepared=0|user=app/app|tenant=|search_path="$user", public|dtro=off`

// checkNoLeakedState runs the probe in b: a clean backend, or DATABASE_BUSY because the other
// client's pin holds the one backend (as it should while its state remains).
func checkNoLeakedState(t *testing.T, b *pgconn.PgConn, what string) {
	t.Helper()
	if leak := leakedState(t, b, what); leak != "" {
		t.Error(leak)
	}
}

// checkStatementsLeaveNoState runs stmts as client A through a pgowl with one backend, then
// checks that client B, given that backend next, finds none of A's session state (or waits for
// it while A's pin holds it).
func checkStatementsLeaveNoState(t *testing.T, stmts ...string) {
	t.Helper()
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	r3pExecAll(t, ctx, a, stmts...)
	checkNoLeakedState(t, b, "after A ran "+strings.Join(stmts, "; "))
}

// leakedState runs the probe in b and describes the state of session A that b's backend
// carries, or returns "" when it is clean (or b waited for A's pinned backend).
func leakedState(t *testing.T, b *pgconn.PgConn, what string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := rvQueryOne(ctx, b, stateLeakProbe)
	if rvSQLState(err) == "53300" {
		t.Logf("%s: B waited (DATABASE_BUSY): A's pin holds the backend", what)
		return ""
	}
	if err != nil {
		t.Fatalf("%s: B's probe: %v (SQLSTATE %s)", what, err, rvSQLState(err))
	}
	if got != stateLeakClean {
		return fmt.Sprintf("%s: session B got a backend carrying session A's state:\n got  %s\n want %s", what, got, stateLeakClean)
	}
	return ""
}

// TestSessionStateDynamicSQLInAFunction: a PL/pgSQL function that runs a computed string with
// EXECUTE changes session state the classifier cannot read (a write, with no session effect).
// On a direct connection the state stays with the client that called the function; through
// pgowl the other client must not get it.
func TestSessionStateDynamicSQLInAFunction(t *testing.T) {
	stateLeakSetup(t)
	for _, tc := range []struct{ name, sql string }{
		{"TenantSetting", "SELECT public.review_state_tenant('tenant-a')"},
		{"SetRole", "SELECT public.review_state_become('review_state_role')"},
		{"Listen", "SELECT public.review_state_listen('review_state_chan')"},
		{"AdvisoryLock", "SELECT public.review_state_lock(7501)"},
		{"TempTable", "SELECT public.review_state_scratch('review_state_tmp')"},
		{"UnreadableBodyTakesLock", "SELECT public.review_state_cursor_lock()"},
		{"ExecHelperSetRole", "SELECT public.review_state_exec('SET ROLE review_state_role')"},
		{"ExecHelperSearchPath", "SELECT public.review_state_exec('SET search_path = pg_catalog')"},
		{"ExecHelperReadOnlyDefault", "SELECT public.review_state_exec('SET default_transaction_read_only = on')"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkStatementsLeaveNoState(t, tc.sql)
		})
	}
}

// TestSessionStateDynamicSQLStateStaysWithItsClient: the client that changed its session state
// through a function keeps it on its next statements, wherever pgowl runs them (a direct
// connection keeps it): its tenant setting, its role, its temporary table.
func TestSessionStateDynamicSQLStateStaysWithItsClient(t *testing.T) {
	stateLeakSetup(t)
	c := sharedClusterFor(t)
	o := startOwl(t, c, readYourWritesOff)
	for _, tc := range []struct{ name, change, read, want string }{
		{"Tenant", "SELECT public.review_state_tenant('tenant-a')",
			"SELECT coalesce(current_setting('review_state.tenant', true), '<unset>')", "tenant-a"},
		{"Role", "SELECT public.review_state_become('review_state_role')",
			"SELECT current_user::text", "review_state_role"},
		{"TempTable", "SELECT public.review_state_scratch('review_state_own_tmp')",
			"SELECT count(*)::text FROM review_state_own_tmp", "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := timeoutCtx(t, statementTimeout)
			conn := o.connect(t, nil)
			a := conn.PgConn()
			r3pExecAll(t, ctx, a, tc.change)
			conn.routes(t)
			var seen []string
			bad := false
			for i := 0; i < 4; i++ {
				got, err := rvQueryOne(ctx, a, tc.read)
				if err != nil {
					got = "error: " + err.Error()
				}
				rs := conn.routes(t)
				if len(rs) > 0 {
					got += " (on " + rs[len(rs)-1].Node + " " + rs[len(rs)-1].Reason + ")"
				}
				seen = append(seen, got)
				bad = bad || err != nil || !strings.HasPrefix(got, tc.want+" ")
			}
			failure := fmt.Sprintf("after %s, A's %q answered:\n  %s\nwant %s every time (as on a direct connection)", tc.change, tc.read, strings.Join(seen, "\n  "), tc.want)
			if tc.name == "Tenant" {
				// README, Limits: a setting whose name pgowl cannot see (here set by dynamic SQL)
				// is lost when the session moves to another backend (its reads go to a standby).
				owltest.KnownGap(t, bad, "a setting set under a name pgowl cannot see is lost when the session moves: "+failure)
				return
			}
			if bad {
				t.Error(failure)
			}
		})
	}
}

// TestNotificationsOfADynamicListenReachOnlyItsClient: a client listens through a
// function that runs LISTEN as dynamic SQL. A notification on that channel must reach it, and
// not the other client that shares the (only) backend.
func TestNotificationsOfADynamicListenReachOnlyItsClient(t *testing.T) {
	stateLeakSetup(t)
	c := sharedClusterFor(t)
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, statementTimeout)
	a := o.connect(t, nil)
	b := o.connect(t, nil)
	if _, err := a.Exec(ctx, "SELECT public.review_state_listen('review_state_news')"); err != nil {
		t.Fatal(err)
	}
	if err := c.Nodes[0].Exec(ctx, "NOTIFY review_state_news, 'for-a'"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := b.Exec(ctx, "SELECT 1"); err != nil && rvSQLState(err) != "53300" {
		// DATABASE_BUSY: A's LISTEN pins the one backend to A, as it should.
		t.Fatalf("B: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	n, err := b.WaitForNotification(wctx)
	cancel()
	if err == nil {
		t.Errorf("B, which listens on nothing, received notification %q on channel %q (A listened on it)", n.Payload, n.Channel)
	}
	wctx, cancel = context.WithTimeout(ctx, time.Second)
	n, err = a.WaitForNotification(wctx)
	cancel()
	if err != nil {
		t.Errorf("A, which listens on review_state_news, did not receive the notification: %v", err)
	}
}
