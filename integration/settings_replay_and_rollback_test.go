package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgowl/pgowl/config"
)

// Review 4: session settings and session state across pooled backends.
//
// Tests that use rvStartOneBackend run pgowl in front of the primary alone
// with pool.max_per_node = 1: sessions A and B share the one backend.

// r4sSetup creates the objects the tests use, idempotently.
func r4sSetup(t *testing.T) {
	t.Helper()
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, `
	CREATE SEQUENCE IF NOT EXISTS public.r4s_seq;
	CREATE TABLE IF NOT EXISTS public.r4s_audit (tenant text NOT NULL, at timestamptz NOT NULL DEFAULT now());
	CREATE OR REPLACE FUNCTION public.r4s_login(t text) RETURNS text LANGUAGE plpgsql AS $f$
	BEGIN
		PERFORM set_config('r4s.tenant', t, false);
		INSERT INTO public.r4s_audit (tenant) VALUES (t);
		RETURN t;
	END $f$;
	GRANT USAGE, SELECT, UPDATE ON SEQUENCE public.r4s_seq TO `+appUser+`;
	GRANT SELECT, INSERT ON public.r4s_audit TO `+appUser+`;
	GRANT EXECUTE ON FUNCTION public.r4s_login(text) TO `+appUser); err != nil {
		t.Fatalf("setup: %v", err)
	}
	catchUp(t, c)
}

func r4sExec(t *testing.T, ctx context.Context, conn *pgconn.PgConn, sqls ...string) {
	t.Helper()
	for _, sql := range sqls {
		if _, err := conn.Exec(ctx, sql).ReadAll(); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

func r4sOne(t *testing.T, ctx context.Context, conn *pgconn.PgConn, sql string) string {
	t.Helper()
	v, err := rvQueryOne(ctx, conn, sql)
	if err != nil {
		t.Fatalf("%s: %v (SQLSTATE %s)", sql, err, rvSQLState(err))
	}
	return v
}

// r4sWorkMemDefault is work_mem as a fresh session of the app user sees it.
func r4sWorkMemDefault(t *testing.T) string {
	t.Helper()
	c := sharedClusterFor(t)
	d := rtDirect(t, c)
	return rtShow(t, d, "work_mem")
}

// TestSessionParamSetConfigReplayLeaksOtherSessionSettings:
// a client using the extended protocol (pgx's default mode) runs
// SELECT set_config('r4s.b', $1, false) with a parameter. The Parse carries
// no parameter types, so pgowl records the statement text as a session SET
// (runBatch: u.setSQL = stmts[0].sql when paramTypes is empty) and later
// replays it as a simple Query, which fails ("there is no parameter $1").
// prepareBackend sends "RESET ALL; <sets>" as one string: the failure rolls
// back the RESET ALL too, and the unit then runs on a backend that still
// carries another session's settings (marking the replay failed, then a
// sentinel string in pool.Conn.Settings, now proxy's settingsReplayFailed,
// only makes the next unit retry). So session B sees session A's work_mem, and loses
// its own r4s.b.
// Should: a SET with parameters is never replayed as text (treat it as
// untracked: mark the backend's settings unknown, or replay with the bound
// values), and a failed replay must never leave another session's settings
// in force (run RESET ALL separately, or drop the connection).
// Suspected cause: proxy/batch.go runBatch (setSQL for a statement with
// parameters but no declared types) and proxy/choose.go prepareBackend.
func TestSessionParamSetConfigReplayLeaksOtherSessionSettings(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	def := r4sWorkMemDefault(t)
	ctx := timeoutCtx(t, 2*statementTimeout)
	a := o.connect(t, nil)
	b := o.connect(t, nil)
	if _, err := b.Exec(ctx, "SELECT set_config('r4s.b', $1, false)", "from-b"); err != nil {
		t.Fatalf("B: set_config with a parameter: %v", err)
	}
	r4sExec(t, ctx, a.PgConn(), "SET work_mem = '4321kB'")
	got := r4sOne(t, ctx, b.PgConn(), "SELECT current_setting('work_mem') || '/' || coalesce(current_setting('r4s.b', true), '<null>')")
	if want := def + "/from-b"; got != want {
		t.Errorf("session B (work_mem never set, r4s.b set to from-b): got %s, want %s (A set work_mem = 4321kB)", got, want)
	}
}

// TestSessionSetConfigReplayReevaluates: SELECT set_config('r4s.req',
// gen_random_uuid()::text, false) is a session SET whose value is computed.
// pgowl replays the whole SELECT on every other backend the session uses, so
// each node computes a new value: the session's setting differs from node to
// node, and from the value the client was told. (A request id or tenant
// chosen from a table changes the same way.)
// Should: the value the statement set is what follows the session (replay
// SET name = <value read back from the node>, e.g. with current_setting
// after the statement, rather than the statement's text).
// Suspected cause: proxy/session.go trackSessionEffects/applySets record
// u.setSQL verbatim; proxy/choose.go prepareBackend re-runs it.
func TestSessionSetConfigReplayReevaluates(t *testing.T) {
	r4sSetup(t)
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	ctx := timeoutCtx(t, 2*statementTimeout)
	conn := o.connect(t, nil).PgConn()
	want := r4sOne(t, ctx, conn, "SELECT set_config('r4s.req', gen_random_uuid()::text, false)")
	var got []string
	bad := false
	for i := 0; i < 4; i++ {
		// A read (a standby) and a write (the primary).
		for _, q := range []string{"SELECT current_setting('r4s.req')",
			"SELECT current_setting('r4s.req') FROM (SELECT nextval('public.r4s_seq')) s"} {
			v := r4sOne(t, ctx, conn, q)
			got = append(got, v)
			bad = bad || v != want
		}
	}
	if bad {
		t.Errorf("set_config returned %s, then current_setting('r4s.req') gave %v; PostgreSQL keeps the one value", want, got)
	}
}

// TestSessionSetConfigReplayRerunsWrites: a function that sets a
// session setting and writes (here: PERFORM set_config(...); INSERT audit
// row) is classified SET + WRITE. pgowl replays the whole call on every
// other backend the session uses: on a standby the replay fails (read-only
// transaction), so the session's setting is silently missing there (and
// every other setting replayed in the same string: it is one implicit
// transaction; RESET ALL included, so the backend keeps whatever it had);
// on another primary backend the INSERT runs a second time.
// Should: the replay applies only the setting, never re-runs the
// statement's other effects, and never drops the setting silently.
// Suspected cause: proxy/session.go trackSessionEffects (u.setSQL replayed
// for any statement with SessionSet) and proxy/choose.go prepareBackend (a
// failed replay only logs a warning).
func TestSessionSetConfigReplayRerunsWrites(t *testing.T) {
	r4sSetup(t)
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	ctx := timeoutCtx(t, 3*statementTimeout)
	tenant := fmt.Sprintf("r4s_t%08x", rand.Uint32())
	s := o.connect(t, nil)
	r4sExec(t, ctx, s.PgConn(), "SET work_mem = '3333kB'")
	r4sExec(t, ctx, s.PgConn(), "SELECT r4s_login('"+tenant+"')")
	s.routes(t)
	catchUp(t, c)

	t.Run("setting_on_standby", func(t *testing.T) {
		var got []string
		bad := false
		for i := 0; i < 4; i++ {
			v := r4sOne(t, ctx, s.PgConn(), "SELECT coalesce(current_setting('r4s.tenant', true), '<null>') || '/' || current_setting('work_mem')")
			got = append(got, v)
			bad = bad || v != tenant+"/3333kB"
		}
		if bad {
			t.Errorf("after SELECT r4s_login(%q) and SET work_mem = 3333kB, reads gave %v, want %s/3333kB every time (routes %v)", tenant, got, tenant, s.routes(t))
		}
	})

	t.Run("write_not_repeated", func(t *testing.T) {
		// Another session holds the primary backend s used, so s's next
		// write runs on a fresh primary backend.
		other := o.connect(t, nil)
		r4sExec(t, ctx, other.PgConn(), "BEGIN", "SELECT nextval('r4s_seq')")
		r4sExec(t, ctx, s.PgConn(), "SELECT nextval('r4s_seq')")
		r4sExec(t, ctx, other.PgConn(), "COMMIT")
		if n := primaryInt(t, c, "SELECT count(*) FROM r4s_audit WHERE tenant = $1", tenant); n != 1 {
			t.Errorf("the session called r4s_login(%q) once; the audit table has %d rows for it", tenant, n)
		}
	})
}

// r4sFlushThenFail sends: Parse/Bind/Execute of first, Flush; reads up to
// its CommandComplete; then Parse/Bind/Execute SELECT 1/0, Sync, and reads
// up to ReadyForQuery. In PostgreSQL both parts are one implicit
// transaction, and the error rolls back what first did.
func r4sFlushThenFail(t *testing.T, conn *client, first string) {
	t.Helper()
	rawSend(t, conn, &pgproto3.Parse{Query: first}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Flush{})
	rs := rawReceive(t, conn, func(r rawReply, _ []rawReply) bool { return r.typ == 'C' || r.typ == 'E' })
	if hasType(rs, 'E', "") {
		t.Fatalf("%s: %s", first, describeReplies(rs))
	}
	rawSend(t, conn, &pgproto3.Parse{Query: "SELECT 1/0"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{})
	rs = rawReceive(t, conn, untilReady(1))
	if !hasType(rs, 'E', "22012") || lastReady(rs) != 'I' {
		t.Fatalf("SELECT 1/0: replies %s, want E(22012) Z(I)", describeReplies(rs))
	}
}

// TestSessionFlushedResetAllRolledBackLeaks: session A sets work_mem,
// then sends RESET ALL through the extended protocol followed by Flush, and
// a statement that fails before Sync. PostgreSQL runs both in one implicit
// transaction: the error undoes RESET ALL, so A's backend still has
// work_mem = 4321kB. pgowl routes the part before Flush as a unit of one
// statement and applies it at once (trackSessionEffects -> applySets with
// the stale TxStatus 'I'): A's settings become empty and the backend is
// recorded as carrying none. When Sync ends the batch the backend goes back
// to the pool with A's work_mem and session B, which set nothing, gets it
// without RESET ALL.
// Should: settings changed by an unsynced part of a batch count only when
// the implicit transaction ends without error (treat them like pendingSets,
// or mark the backend's settings unknown), as README "Limits" promises for
// pipelines.
// Suspected cause: proxy/session.go afterUnit/trackSessionEffects for units
// with expectsReady == false (proxy/batch.go runBatch(ctx, false) on Flush).
func TestSessionFlushedResetAllRolledBackLeaks(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	def := r4sWorkMemDefault(t)
	ctx := timeoutCtx(t, 2*statementTimeout)
	a := o.connect(t, nil)
	b := o.connect(t, nil)
	r4sExec(t, ctx, a.PgConn(), "SET work_mem = '4321kB'")
	r4sFlushThenFail(t, a, "RESET ALL")
	if got := r4sOne(t, ctx, b.PgConn(), "SHOW work_mem"); got != def {
		t.Errorf("session B, which never set work_mem, sees work_mem = %s (session A's); want %s", got, def)
	}
}

// TestSessionFlushedSetRolledBack: the same with a SET in the part
// before Flush: PostgreSQL undoes it with the implicit transaction, but pgowl
// keeps it in the session's settings and replays it on the session's other
// backends, so the session's work_mem depends on the node.
// Should/cause: as TestSessionFlushedResetAllRolledBackLeaks.
func TestSessionFlushedSetRolledBack(t *testing.T) {
	r4sSetup(t)
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	def := r4sWorkMemDefault(t)
	for _, target := range rtTargets(t, c, o) {
		conn := target.conn(t)
		r4sFlushThenFail(t, conn, "SET work_mem = '1357kB'")
		var got []string
		bad := false
		for i := 0; i < 3; i++ {
			v := rtShow(t, conn, "work_mem")
			got = append(got, v)
			bad = bad || v != def
			// The same from the primary.
			v = r4sOne(t, timeoutCtx(t, statementTimeout), conn.PgConn(), "SELECT current_setting('work_mem') FROM (SELECT nextval('public.r4s_seq')) s")
			got = append(got, v)
			bad = bad || v != def
		}
		if bad {
			t.Errorf("%s: SET work_mem before a Flush, then an error before Sync; SHOW work_mem gave %v, want %s every time", target.name, got, def)
		}
	}
}

// TestSessionSetsFollowSavepoints: SETs made in a transaction block follow
// its savepoints as PostgreSQL's settings do, and what survives the COMMIT
// is the session's on every backend it moves to (a nextval between the SHOWs
// makes the session use the primary and a standby in turn): a SET made
// before a savepoint survives ROLLBACK TO it; one made after it does not;
// RELEASE keeps it; ROLLBACK TO a name set twice returns to the newer one.
// Before, every pending SET was dropped at COMMIT after any ROLLBACK TO
// SAVEPOINT, and the session's other backends ran with the old value.
func TestSessionSetsFollowSavepoints(t *testing.T) {
	r4sSetup(t)
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	def := r4sWorkMemDefault(t)
	cases := []struct {
		what  string
		steps []string
		want  string
	}{
		{"SET before the savepoint", []string{"BEGIN", "SET work_mem = '2468kB'", "SAVEPOINT s", "SELECT 1", "ROLLBACK TO SAVEPOINT s", "COMMIT"}, "2468kB"},
		{"SET after the savepoint", []string{"BEGIN", "SAVEPOINT s", "SET work_mem = '1357kB'", "ROLLBACK TO SAVEPOINT s", "COMMIT"}, def},
		{"SET after the savepoint, RELEASE", []string{"BEGIN", "SAVEPOINT s", "SET work_mem = '1358kB'", "RELEASE s", "COMMIT"}, "1358kB"},
		{"ROLLBACK TO a name set twice", []string{"BEGIN", "SAVEPOINT s", "SET work_mem = '1359kB'", "SAVEPOINT s", "SET work_mem = '1360kB'", "ROLLBACK TO s", "COMMIT"}, "1359kB"},
		{"ROLLBACK TO in a failed block", []string{"BEGIN", "SET work_mem = '1361kB'", "SAVEPOINT s", "SET work_mem = '1362kB'", "SELECT 1/0", "ROLLBACK TO s", "COMMIT"}, "1361kB"},
	}
	for _, target := range rtTargets(t, c, o) {
		for _, tc := range cases {
			conn := target.conn(t)
			for _, step := range tc.steps {
				if step == "SELECT 1/0" {
					conn.Exec(timeoutCtx(t, statementTimeout), step)
					continue
				}
				rtExec(t, conn, step)
			}
			var got []string
			bad := false
			for i := 0; i < 6; i++ {
				v := rtShow(t, conn, "work_mem")
				got = append(got, v)
				bad = bad || v != tc.want
				rtExec(t, conn, "SELECT nextval('public.r4s_seq')")
			}
			if bad {
				t.Errorf("%s: %s: SHOW work_mem gave %v, want %s every time", target.name, tc.what, got, tc.want)
			}
		}
	}
}

// TestSessionRepeatedSetReplayGrows: every successful SET is appended
// to the session's settings, also when it sets the same setting again
// (applySets), and the whole list is replayed whenever the session's next
// unit runs on a backend without its settings. An application that sets a
// value per request (SELECT set_config('app.user_id', ..., false), common
// with row-level security) makes every later move replay all of its past
// SETs: the list, the key hashing and the replay grow without bound.
// Should: keep at most one entry per setting (or replay the current values).
// Suspected cause: proxy/session.go applySets.
func TestSessionRepeatedSetReplayGrows(t *testing.T) {
	c := sharedClusterFor(t)
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, 4*statementTimeout)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	name := fmt.Sprintf("r4s.m%08x", rand.Uint32())
	const n = 200
	for i := 0; i < n; i++ {
		r4sExec(t, ctx, a, "SET "+name+" = '1'")
	}
	r4sExec(t, ctx, b, "SELECT 1") // the backend loses A's settings
	r4sExec(t, ctx, a, "SELECT 1") // A's settings are applied again
	calls := evidence(t, c, name)[primaryName(c)]
	if calls > n+1 {
		t.Errorf("the session ran SET %s = '1' %d times; moving once between backends made the primary run it %d times in all (want at most %d: one replay of the current value)",
			name, n, calls, n+1)
	}
}

// ---------------------------------------------------------------------------
// Checks that pass (kept as regression guards).

// TestSessionSettingForms: SET TIME ZONE, SET NAMES, SET SCHEMA,
// SET SESSION CHARACTERISTICS, RESET of one setting and startup -c options
// follow the session to every node, as on PostgreSQL.
func TestSessionSettingForms(t *testing.T) {
	r4sSetup(t) // r4s_seq, which a form below reads: run alone, nothing else made it
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	ctx := timeoutCtx(t, 3*statementTimeout)
	conn := o.connect(t, withParams(map[string]string{"options": "-c statement_timeout=7777"}))
	p := conn.PgConn()
	r4sExec(t, ctx, p, "SET TIME ZONE 'America/Los_Angeles'", "SET NAMES 'LATIN1'", "SET SCHEMA 'pg_catalog'",
		"SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", "SET statement_timeout = 1234", "RESET statement_timeout",
		"SET DateStyle = 'SQL, DMY'")
	want := "America/Los_Angeles|LATIN1|pg_catalog|on|7777ms|SQL, DMY"
	for i := 0; i < 6; i++ {
		got := r4sOne(t, ctx, p, "SELECT concat_ws('|', current_setting('TimeZone'), current_setting('client_encoding'), current_setting('search_path'), current_setting('default_transaction_read_only'), current_setting('statement_timeout'), current_setting('DateStyle'))")
		if got != want {
			t.Errorf("read %d: got %s, want %s", i, got, want)
		}
	}
	for k, v := range map[string]string{"TimeZone": "America/Los_Angeles", "client_encoding": "LATIN1", "DateStyle": "SQL, DMY"} {
		if got := p.ParameterStatus(k); got != v {
			t.Errorf("ParameterStatus %s = %q, want %q", k, got, v)
		}
	}
	// READ ONLY default: a write fails wherever it runs.
	_, err := p.Exec(ctx, "SELECT nextval('public.r4s_seq')").ReadAll()
	if rvSQLState(err) != "25006" {
		t.Errorf("nextval with default_transaction_read_only on: got %v, want SQLSTATE 25006", err)
	}
}

// TestSessionParameterStatusAfterRollback: a SET application_name in a
// transaction that rolls back: the client is told the value again.
func TestSessionParameterStatusAfterRollback(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	ctx := timeoutCtx(t, statementTimeout)
	p := o.connect(t, nil).PgConn()
	r4sExec(t, ctx, p, "SET application_name = 'r4s_app'", "SELECT 1", "BEGIN", "SET application_name = 'r4s_tx'")
	if got := p.ParameterStatus("application_name"); got != "r4s_tx" {
		t.Errorf("in the transaction: application_name %q, want r4s_tx", got)
	}
	r4sExec(t, ctx, p, "ROLLBACK", "SELECT 1")
	if got := p.ParameterStatus("application_name"); got != "r4s_app" {
		t.Errorf("after ROLLBACK: application_name %q, want r4s_app", got)
	}
	for i := 0; i < 4; i++ {
		if got := r4sOne(t, ctx, p, "SELECT current_setting('application_name')"); got != "r4s_app" {
			t.Errorf("read %d: application_name %s, want r4s_app", i, got)
		}
	}
}

// TestSessionSetConfigRolledBack: set_config in a transaction or a
// savepoint that rolls back does not follow the session, and does not leak.
func TestSessionSetConfigRolledBack(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	def := r4sWorkMemDefault(t)
	ctx := timeoutCtx(t, 2*statementTimeout)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	r4sExec(t, ctx, a, "BEGIN", "SELECT set_config('work_mem', '1111kB', false)", "ROLLBACK")
	r4sExec(t, ctx, a, "BEGIN", "SAVEPOINT s", "SELECT set_config('work_mem', '2222kB', false)", "ROLLBACK TO SAVEPOINT s", "COMMIT")
	if got := r4sOne(t, ctx, b, "SHOW work_mem"); got != def {
		t.Errorf("B: work_mem %s, want %s", got, def)
	}
	if got := r4sOne(t, ctx, a, "SHOW work_mem"); got != def {
		t.Errorf("A: work_mem %s, want %s", got, def)
	}
}

// TestSessionModeHandOver: in pool.mode session a client that leaves
// with settings, pins and an open transaction hands over a clean backend.
func TestSessionModeHandOver(t *testing.T) {
	r3pSetup(t)
	o := rvStartOneBackend(t, func(cfg *config.Config) { cfg.Pool.Mode = config.PoolSession })
	ctx := timeoutCtx(t, 2*statementTimeout)
	a := o.connect(t, nil)
	r4sExec(t, ctx, a.PgConn(), "SET search_path = pg_catalog", "LISTEN r4s_ch", "CREATE TEMP TABLE r4s_tmp (x int)",
		"SELECT pg_advisory_lock(4242)", "BEGIN", "DECLARE r4s_c CURSOR WITH HOLD FOR SELECT 1")
	a.Close(ctx)
	b := o.connect(t, nil)
	r3pCheckB(t, b.PgConn(), "pool.mode session, after A left")
}

// TestSessionDisconnectMidCopy: a client that leaves during COPY FROM
// STDIN: nothing is committed, and the next session gets a clean backend.
func TestSessionDisconnectMidCopy(t *testing.T) {
	r3pSetup(t)
	r4sSetup(t)
	c := sharedClusterFor(t)
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, 2*statementTimeout)
	tenant := fmt.Sprintf("r4s_c%08x", rand.Uint32())
	a := o.connect(t, nil)
	r4sExec(t, ctx, a.PgConn(), "SET search_path = pg_catalog")
	rawSend(t, a, &pgproto3.Query{String: "COPY public.r4s_audit (tenant) FROM STDIN"})
	rawReceive(t, a, func(r rawReply, _ []rawReply) bool { return r.typ == 'G' || r.typ == 'E' })
	rawSend(t, a, &pgproto3.CopyData{Data: []byte(tenant + "\n")})
	a.PgConn().Conn().Close()
	time.Sleep(200 * time.Millisecond)
	b := o.connect(t, nil)
	r3pCheckB(t, b.PgConn(), "after A left mid-COPY")
	if n := primaryInt(t, c, "SELECT count(*) FROM r4s_audit WHERE tenant = $1", tenant); n != 0 {
		t.Errorf("%d rows of an abandoned COPY committed", n)
	}
}

// TestSessionPreparedSetConfigFollows: a named prepared statement
// that sets a value with a literal, executed via the extended protocol,
// follows the session to every node.
func TestSessionPreparedSetConfigFollows(t *testing.T) {
	c := sharedClusterFor(t)
	o := startOwl(t, c, nil)
	ctx := timeoutCtx(t, 2*statementTimeout)
	conn := o.connect(t, withMode(pgx.QueryExecModeCacheStatement))
	// QueryRow, not Exec: pgx sends an Exec without arguments as a simple
	// Query whatever the mode; QueryRow prepares the named statement.
	var set string
	if err := conn.QueryRow(ctx, "SELECT set_config('r4s.lit', 'lit-value', false)").Scan(&set); err != nil || set != "lit-value" {
		t.Fatalf("set_config through a prepared statement: %q, %v", set, err)
	}
	for i := 0; i < 6; i++ {
		var v string
		if err := conn.QueryRow(ctx, "SELECT current_setting('r4s.lit')").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != "lit-value" {
			t.Errorf("read %d: %s, want lit-value", i, v)
		}
	}
}

// TestSessionTypedParamSetConfigLost: session A runs
// SELECT set_config('r4s.p', $1, false) through the extended protocol with
// the parameter's type declared in Parse (pgconn.ExecParams with OID 25;
// what drivers do for typed parameters, e.g. an RLS "app.user_id" set per
// request). runBatch leaves u.setSQL empty for a statement with parameter
// types, so afterUnit treats it as an untracked SET (trackUncertainEffects):
// the backend is reset (RESET ALL) before its next unit, whoever runs it, and
// the setting is not replayed anywhere. Another session taking the shared
// backend in between (here session B) is enough for A to lose r4s.p: A's
// own next statement sees it unset. (No leak to B: B gets RESET ALL.)
// README "Limits" lists only multi-statement strings and pipelines as not
// followed; a single SET with a parameter is silently lost.
// Should: follow it (replay with the bound value, e.g. SET via the value
// read back after the statement), or at least document it in Limits.
// Suspected cause: proxy/batch.go runBatch (setSQL only without parameter
// types) and proxy/session.go afterUnit.
func TestSessionTypedParamSetConfigLost(t *testing.T) {
	o := rvStartOneBackend(t, nil)
	ctx := timeoutCtx(t, 2*statementTimeout)
	a := o.connect(t, nil).PgConn()
	b := o.connect(t, nil).PgConn()
	res := a.ExecParams(ctx, "SELECT set_config('r4s.p', $1, false)", [][]byte{[]byte("from-a")}, []uint32{25}, nil, nil).Read()
	if res.Err != nil {
		t.Fatalf("A: %v", res.Err)
	}
	got := r4sOne(t, ctx, b, "SELECT coalesce(current_setting('r4s.p', true), '<null>')")
	if got == "from-a" {
		t.Errorf("session B sees session A's r4s.p = %q; B never set it", got)
	}
	// And A keeps its value wherever it runs.
	if got := r4sOne(t, ctx, a, "SELECT coalesce(current_setting('r4s.p', true), '<null>')"); got != "from-a" {
		t.Errorf("session A: r4s.p = %q, want from-a", got)
	}
}
