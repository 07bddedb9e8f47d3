package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
)

// Review 7: statements routed to a standby that fail there or answer differently. Objects are named
// r7c_* (schema r7c_s, role r7c_ser), created idempotently on the primary as the superuser before
// pgowl starts, so that pgowl's first catalogue load sees them.

const r7cSetupSQL = `
CREATE SCHEMA IF NOT EXISTS r7c_s;
GRANT USAGE ON SCHEMA r7c_s TO PUBLIC;
CREATE SEQUENCE IF NOT EXISTS public.r7c_seq;
CREATE SEQUENCE IF NOT EXISTS public.r7c_seq_lv;
GRANT ALL ON SEQUENCE public.r7c_seq, public.r7c_seq_lv TO PUBLIC;

-- Same name in two schemas; only the r7c_s one writes.
CREATE OR REPLACE FUNCTION public.r7c_f() RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 0::bigint';
CREATE OR REPLACE FUNCTION r7c_s.r7c_f() RETURNS bigint LANGUAGE sql VOLATILE
  AS $$SELECT nextval('public.r7c_seq')$$;

-- Named notation: public.r7c_named has no parameter b, so r7c_named(b => 1) can only be r7c_s's.
CREATE OR REPLACE FUNCTION public.r7c_named(a int) RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 0::bigint';
CREATE OR REPLACE FUNCTION r7c_s.r7c_named(b int) RETURNS bigint LANGUAGE sql VOLATILE
  AS $$SELECT nextval('public.r7c_seq')$$;
-- Named notation reordering arguments: positional evidence points at the reading overload.
CREATE OR REPLACE FUNCTION public.r7c_ord(a int, b text) RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 0::bigint';
CREATE OR REPLACE FUNCTION public.r7c_ord(a text, b int) RETURNS bigint LANGUAGE sql VOLATILE
  AS $$SELECT nextval('public.r7c_seq')$$;

-- A domain whose CHECK constraint calls a function that writes: every coercion to it runs the check.
CREATE OR REPLACE FUNCTION public.r7c_chk_next(v int) RETURNS boolean LANGUAGE sql VOLATILE
  AS $$SELECT nextval('public.r7c_seq') > 0 AND v > 0$$;
DROP DOMAIN IF EXISTS public.r7c_dom CASCADE;
CREATE DOMAIN public.r7c_dom AS int CHECK (public.r7c_chk_next(VALUE));
CREATE OR REPLACE FUNCTION public.r7c_takes_dom(d public.r7c_dom) RETURNS int LANGUAGE sql VOLATILE AS 'SELECT d';
CREATE OR REPLACE FUNCTION public.r7c_pl_dom() RETURNS int LANGUAGE plpgsql VOLATILE
  AS $$DECLARE d public.r7c_dom := 5; BEGIN RETURN d; END$$;
CREATE TABLE IF NOT EXISTS public.r7c_domtab (id int);
INSERT INTO public.r7c_domtab SELECT 1 WHERE NOT EXISTS (SELECT FROM public.r7c_domtab);
GRANT SELECT ON public.r7c_domtab TO PUBLIC;
CREATE OR REPLACE VIEW public.r7c_domview AS SELECT id::public.r7c_dom AS d FROM public.r7c_domtab;
GRANT SELECT ON public.r7c_domview TO PUBLIC;

-- PL/pgSQL bodies that change search_path before an unqualified call.
CREATE OR REPLACE FUNCTION public.r7c_pl_setlocal() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
BEGIN SET LOCAL search_path = r7c_s, public; RETURN r7c_f(); END $$;
CREATE OR REPLACE FUNCTION public.r7c_pl_setconfig() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
BEGIN PERFORM pg_catalog.set_config('search_path', 'r7c_s, public', true); RETURN r7c_f(); END $$;
-- A function that changes the session's search_path (is_local false).
CREATE OR REPLACE FUNCTION public.r7c_pl_setsession() RETURNS int LANGUAGE plpgsql VOLATILE AS $$
BEGIN PERFORM pg_catalog.set_config('search_path', 'r7c_s, public', false); RETURN 1; END $$;

-- Passing shapes.
CREATE OR REPLACE VIEW public.r7c_nextview AS SELECT nextval('public.r7c_seq') AS n;
GRANT SELECT ON public.r7c_nextview TO PUBLIC;
CREATE OR REPLACE FUNCTION public.r7c_srf_next(n int) RETURNS SETOF bigint LANGUAGE plpgsql VOLATILE AS $$
BEGIN RETURN QUERY SELECT nextval('public.r7c_seq') FROM generate_series(1, n); END $$;
CREATE OR REPLACE FUNCTION public.r7c_secdef() RETURNS bigint LANGUAGE sql VOLATILE SECURITY DEFINER
  SET search_path = r7c_s, public AS 'SELECT r7c_f()';
CREATE OR REPLACE FUNCTION public.r7c_poly(x anyelement) RETURNS bigint LANGUAGE sql VOLATILE
  AS $$SELECT nextval('public.r7c_seq')$$;
CREATE OR REPLACE FUNCTION public.r7c_poly(x int) RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 0::bigint';
CREATE OR REPLACE FUNCTION public.r7c_var(VARIADIC xs int[]) RETURNS bigint LANGUAGE sql VOLATILE
  AS $$SELECT nextval('public.r7c_seq')$$;
CREATE OR REPLACE FUNCTION public.r7c_var(a int, b int) RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 0::bigint';
CREATE OR REPLACE FUNCTION public.r7c_ffunc(s bigint) RETURNS bigint LANGUAGE sql VOLATILE
  AS $$SELECT s + nextval('public.r7c_seq') * 0$$;
CREATE OR REPLACE FUNCTION public.r7c_sfunc(s bigint, x int) RETURNS bigint LANGUAGE sql IMMUTABLE
  AS 'SELECT coalesce(s, 0) + x';
DROP AGGREGATE IF EXISTS public.r7c_agg(int);
CREATE AGGREGATE public.r7c_agg(int) (SFUNC = public.r7c_sfunc, STYPE = bigint, FINALFUNC = public.r7c_ffunc);
CREATE TABLE IF NOT EXISTS public.r7c_t (id int PRIMARY KEY, v int);
INSERT INTO public.r7c_t VALUES (1, 1) ON CONFLICT DO NOTHING;
GRANT ALL ON public.r7c_t TO PUBLIC;
CREATE OR REPLACE VIEW public.r7c_where_view AS SELECT id FROM public.r7c_t WHERE public.r7c_chk_next(id);
GRANT SELECT ON public.r7c_where_view TO PUBLIC;
ALTER TABLE public.r7c_t OWNER TO app;
DROP TABLE IF EXISTS r7c_s.r7c_into;
GRANT CREATE ON SCHEMA r7c_s TO PUBLIC;

-- A role whose default isolation level is serializable (ALTER ROLE ... SET).
DO $$BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'r7c_ser') THEN
    CREATE ROLE r7c_ser LOGIN PASSWORD 'secret';
  END IF;
END$$;
ALTER ROLE r7c_ser SET default_transaction_isolation = 'serializable';
`

func r7cSetup(t *testing.T, mutate func(*config.Config)) (*cluster.Cluster, *owl) {
	t.Helper()
	return setupAndStart(t, "review 7 objects", r7cSetupSQL, func(cfg *config.Config) {
		cfg.Classify.RefreshInterval = 10 * time.Minute
		if mutate != nil {
			mutate(cfg)
		}
	})
}

// r7cConnect opens a simple-protocol connection with extra startup parameters.
func r7cConnect(t *testing.T, o *owl, params map[string]string) *client {
	t.Helper()
	conn := o.connect(t, func(cfg *pgx.ConnConfig) {
		withMode(pgx.QueryExecModeSimpleProtocol)(cfg)
		withParams(params)(cfg)
	})
	conn.routes(t)
	return conn
}

// r7cOK runs sql through pgowl; it must succeed wherever it runs.
func r7cOK(t *testing.T, conn *client, sql string) []routeNotice {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	_, err := conn.PgConn().Exec(ctx, sql).ReadAll()
	rs := conn.routes(t)
	if err != nil {
		t.Errorf("%s: %v (routes %v)", sql, err, rs)
	}
	return rs
}

// TestClassifyDomainCheck: a cast or coercion to a domain runs the domain's CHECK
// constraints; here the CHECK calls a function that calls nextval.
//
// BUG. SELECT 5::public.r7c_dom (also CAST(... AS ...), '5'::r7c_dom, ARRAY[5]::r7c_dom[], a call
// r7c_takes_dom(5) of a function with a domain parameter, a PL/pgSQL variable of the domain, a view
// whose column is cast to it) is READ_ONLY and goes to a standby, which fails with 25006 (nextval
// in the CHECK). Cause: the catalogue holds a domain only as its base type (implicit.go: "casts to
// and from a domain are its base type's"); domain CHECK constraints (pg_constraint.contypid) are not
// loaded or analysed. A CHECK reading node-local state answers the standby's value the same way.
func TestClassifyDomainCheck(t *testing.T) {
	c, o := r7cSetup(t, nil)
	conn := rvConnect(t, o)
	// Proof: a standby refuses it (the check runs nextval).
	if got := r3DirectAll(t, c.Nodes[1], "SELECT 5::public.r7c_dom"); !strings.Contains(got, "25006") {
		t.Fatalf("on a standby SELECT 5::public.r7c_dom answered %q, want a 25006 error", got)
	}
	for _, sql := range []string{
		"SELECT 5::public.r7c_dom",
		"SELECT CAST(5 AS public.r7c_dom)",
		"SELECT '5'::public.r7c_dom",
		"SELECT public.r7c_takes_dom(5)",
		"SELECT public.r7c_pl_dom()",
		"SELECT d FROM public.r7c_domview",
		"SELECT ARRAY[5]::public.r7c_dom[]",
	} {
		runOnPrimary(t, conn, sql)
	}
}

// TestClassifyNamedArgumentHidesOverload: named notation excludes an overload earlier on the
// search path that has no parameter of that name.
//
// BUG. With search_path public, r7c_s: SELECT r7c_named(b => 1) runs r7c_s.r7c_named(b int)
// (nextval): public.r7c_named(a int) has no parameter b, so PostgreSQL's FuncnameGetCandidates drops
// it (MatchNamedCall) before hiding same-signature functions later on the path. pgowl's candidates
// (classify/analysis.go) keeps only the first of two functions with the same argument types and
// ignores parameter names, so it sees public.r7c_named (reads) and sends the call to a standby:
// 25006. (public.r7c_ord(b => 1, a => 'x') goes to the primary as UNKNOWN_EFFECT "overloads differ
// in effect": right node, because named arguments give no evidence; it passes.)
func TestClassifyNamedArgumentHidesOverload(t *testing.T) {
	_, o := r7cSetup(t, nil)
	conn := r7cConnect(t, o, map[string]string{"search_path": "public, r7c_s"})
	runOnPrimary(t, conn, "SELECT r7c_named(b => 1)")
	// Named arguments reordered: r7c_ord(b => 1, a => 'x') is r7c_ord(a text, b int), which writes.
	runOnPrimary(t, conn, "SELECT public.r7c_ord(b => 1, a => 'x')")
	runOnPrimary(t, conn, "SELECT public.r7c_ord(b := 1, a := 'x')")
	// control: r7c_named(a => 1) only reads.
	r7cOK(t, conn, "SELECT r7c_named(a => 1)")
}

// TestClassifyPlpgsqlSetsSearchPath: a PL/pgSQL body that sets search_path (SET LOCAL, or
// set_config(..., true)) before an unqualified call: PostgreSQL plans the call after the SET ran and
// resolves it to r7c_s.r7c_f (nextval).
//
// BUG. SELECT public.r7c_pl_setlocal() and SELECT public.r7c_pl_setconfig() are READ_ONLY and fail
// on a standby with 25006. Cause: the body's names are resolved with the session's path (or the
// function's proconfig); a SET search_path / set_config('search_path', ...) statement inside the
// body does not change the path used for the body's later statements.
func TestClassifyPlpgsqlSetsSearchPath(t *testing.T) {
	_, o := r7cSetup(t, nil)
	conn := r7cConnect(t, o, map[string]string{"search_path": "public"})
	runOnPrimary(t, conn, "SELECT public.r7c_pl_setlocal()")
	runOnPrimary(t, conn, "SELECT public.r7c_pl_setconfig()")
}

// TestClassifyFunctionChangesSessionSearchPath: a function that calls
// set_config('search_path', ..., false) changes the session's path; the next unqualified call
// resolves to r7c_s.r7c_f (nextval).
//
// BUG. SELECT public.r7c_pl_setsession() runs on a standby (READ_ONLY); pgowl logs "a session
// setting changed in a way pgowl cannot replay (inside a function ...); it holds on this
// connection only, which is reset before its next use" and does not pin the session. The next
// SHOW search_path answers "public" (on PostgreSQL: "r7c_s, public"), and SELECT r7c_f() runs
// public.r7c_f on a standby instead of r7c_s.r7c_f (nextval) on the primary: the session silently
// lost its setting. Expected: a function with a session-level SET effect pins the session (as SQL
// PREPARE does), or at least makes the path unknown so user functions go to the primary.
func TestClassifyFunctionChangesSessionSearchPath(t *testing.T) {
	_, o := r7cSetup(t, nil)
	conn := r7cConnect(t, o, map[string]string{"search_path": "public"})
	r7cOK(t, conn, "SELECT public.r7c_pl_setsession()")
	ctx := timeoutCtx(t, statementTimeout)
	var path string
	if err := conn.QueryRow(ctx, "SHOW search_path").Scan(&path); err != nil {
		t.Fatalf("SHOW search_path: %v", err)
	}
	rs := conn.routes(t)
	if path != "r7c_s, public" {
		t.Errorf("SHOW search_path after r7c_pl_setsession(): %q on %v, want \"r7c_s, public\" (the function set it for the session)", path, rs)
	}
	runOnPrimary(t, conn, "SELECT r7c_f()")
}

// TestClassifySerializableDefaultAtStartup: a serializable default isolation level from the
// startup packet or from ALTER ROLE ... SET: a standby refuses every statement ("cannot use
// serializable mode in a hot standby", 0A000).
//
// BUG. With startup parameter default_transaction_isolation=serializable, with options
// '-c default_transaction_isolation=serializable', or as a role with ALTER ROLE ... SET
// default_transaction_isolation = 'serializable', SELECT 1 goes to a standby (READ_ONLY) and fails
// with 0A000. A session-level SET of the same is handled (SessionSerializableDefault pins the
// session; see SerializableDefaultBySet in TestClassifyDomainsOverloadsSearchPathShapesPass), but the startup packet and
// pg_db_role_setting are only read for search_path.
func TestClassifySerializableDefaultAtStartup(t *testing.T) {
	_, o := r7cSetup(t, func(cfg *config.Config) {
		cfg.Users = append(cfg.Users, config.User{Name: "r7c_ser", Password: "secret", Auth: config.AuthSCRAM})
	})
	t.Run("StartupParameter", func(t *testing.T) {
		conn := r7cConnect(t, o, map[string]string{"default_transaction_isolation": "serializable"})
		r7cOK(t, conn, "SELECT 1")
	})
	t.Run("Options", func(t *testing.T) {
		conn := r7cConnect(t, o, map[string]string{"options": "-c default_transaction_isolation=serializable"})
		r7cOK(t, conn, "SELECT 1")
	})
	t.Run("RoleSetting", func(t *testing.T) {
		notices := &noticeLog{}
		cfg := o.connConfig(t, "r7c_ser", "secret", notices)
		cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		pc, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatalf("connect as r7c_ser: %v", err)
		}
		defer pc.Close(context.Background())
		conn := &client{Conn: pc, notices: notices}
		conn.routes(t)
		r7cOK(t, conn, "SELECT 1")
	})
}

// TestClassifyExportedSnapshot: pg_dump --jobs shares a snapshot: the leader runs
// pg_export_snapshot() in a read-only repeatable-read transaction, each worker imports it with SET
// TRANSACTION SNAPSHOT. The import only works on the node that exported it.
//
// BUG. pg_export_snapshot() is not in the reviewed table (a read) and SET TRANSACTION SNAPSHOT is
// txOther (a read): leader and worker transactions go to whichever standby each session's choice
// gives. With round_robin (and by chance with least_lag) they differ and the import fails:
// 22023 invalid snapshot identifier. Expected: both run on one node deterministically, i.e.
// pg_export_snapshot() and SET TRANSACTION SNAPSHOT need the primary.
func TestClassifyExportedSnapshot(t *testing.T) {
	_, o := r7cSetup(t, func(cfg *config.Config) { cfg.Routing.StandbyChoice = config.StandbyRoundRobin })
	leader := rvConnect(t, o)
	worker := rvConnect(t, o)
	ctx := timeoutCtx(t, statementTimeout)
	for i := 0; i < 4; i++ {
		if _, err := leader.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"); err != nil {
			t.Fatalf("leader BEGIN: %v", err)
		}
		var snap string
		if err := leader.QueryRow(ctx, "SELECT pg_export_snapshot()").Scan(&snap); err != nil {
			t.Fatalf("pg_export_snapshot(): %v (routes %v)", err, leader.routes(t))
		}
		lr := leader.routes(t)
		// round_robin turns per session: a read of the worker's own moves its turn on.
		if i%2 == 1 {
			r7cOK(t, worker, "SELECT 1")
		}
		if _, err := worker.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"); err != nil {
			t.Fatalf("worker BEGIN: %v", err)
		}
		_, err := worker.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+snap+"'")
		wr := worker.routes(t)
		if err != nil {
			t.Errorf("attempt %d: SET TRANSACTION SNAPSHOT '%s': %v; the leader exported it on %v, the worker ran on %v", i+1, snap, err, lr, wr)
		}
		worker.Exec(ctx, "ROLLBACK")
		leader.Exec(ctx, "ROLLBACK")
		leader.routes(t)
		worker.routes(t)
	}
}

// TestClassifySequenceLastValueFunction: pg_sequence_last_value() on a standby answers the
// WAL-logged-ahead value, not the primary's last_value (like SELECT last_value FROM seq).
func TestClassifySequenceLastValueFunction(t *testing.T) {
	c, o := r7cSetup(t, nil)
	conn := rvConnect(t, o)
	want := primaryInt(t, c, "SELECT nextval('public.r7c_seq_lv')")
	catchUp(t, c)
	for _, sql := range []string{
		"SELECT pg_catalog.pg_sequence_last_value('public.r7c_seq_lv')",
		"SELECT last_value FROM public.r7c_seq_lv",
	} {
		ctx := timeoutCtx(t, statementTimeout)
		var got int64
		err := conn.QueryRow(ctx, sql).Scan(&got)
		r := conn.oneRoute(t, sql)
		if err != nil || got != want {
			t.Errorf("%s: answered %d (err %v) on %v; the primary's last_value is %d", sql, got, err, r, want)
		}
	}
}

// TestClassifyTransactionReadWriteSetting: transaction_read_only = off outside a transaction
// block: the primary accepts it, a standby refuses it (25001: "cannot set transaction read-write
// mode during recovery" for SET, "transaction read-write mode must be set before any query" for
// set_config, whose SELECT has taken a snapshot).
//
// BUG. SELECT set_config('transaction_read_only', 'off', false) is READ_ONLY and fails on a standby
// with 25001; the primary answers off. (SET transaction_read_only = off and SET TRANSACTION READ
// WRITE are handled: they go to the primary.) Cause: builtinResult treats set_config as a read
// whatever the setting; statements.go refuses read-write mode only for the SET forms.
func TestClassifyTransactionReadWriteSetting(t *testing.T) {
	c, o := r7cSetup(t, nil)
	conn := rvConnect(t, o)
	const probe = "SELECT set_config('transaction_read_only', 'off', false)"
	if p, s := r3DirectAll(t, c.Nodes[0], probe), r3DirectAll(t, c.Nodes[1], probe); p != "off" || !strings.Contains(s, "25001") {
		t.Fatalf("%s: the primary answers %q, a standby %q; want off and a 25001 error", probe, p, s)
	}
	for _, sql := range []string{
		"SET transaction_read_only = off",
		"SET transaction_read_only TO false",
		"SELECT set_config('transaction_read_only', 'off', false)",
		"SET TRANSACTION READ WRITE",
	} {
		r7cOK(t, conn, sql)
	}
}

// TestClassifyDomainsOverloadsSearchPathShapesPass: shapes pgowl handles (regression cover).
func TestClassifyDomainsOverloadsSearchPathShapesPass(t *testing.T) {
	_, o := r7cSetup(t, nil)
	conn := rvConnect(t, o)
	for _, sql := range []string{
		"SELECT 1 AS x INTO r7c_s.r7c_into",
		"DROP TABLE r7c_s.r7c_into",
		"TABLE public.r7c_nextview",
		"VALUES (nextval('public.r7c_seq'))",
		"SELECT pg_notify('r7c_chan', 'x')",
		"SELECT pg_try_advisory_xact_lock(7007)",
		"SELECT * FROM public.r7c_srf_next(2)",
		"SELECT x.n FROM (VALUES (1)) v(a), LATERAL public.r7c_srf_next(v.a) x(n)",
		"SELECT public.r7c_secdef()",
		"SELECT public.r7c_poly('x'::text)",
		"SELECT public.r7c_poly(1.5)",
		"SELECT public.r7c_var(1, 2, 3)",
		"SELECT public.r7c_agg(id) FROM public.r7c_t",
		"SELECT count(*) FROM public.r7c_where_view",
		"SELECT pg_current_xact_id()",
		"SELECT txid_current()",
		"WITH i AS (INSERT INTO public.r7c_t VALUES (-1, 0) ON CONFLICT DO NOTHING RETURNING id) SELECT count(*) FROM i",
		"MERGE INTO public.r7c_t t USING (VALUES (-2, 1)) s(id, v) ON t.id = s.id WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v) WHEN MATCHED THEN DO NOTHING",
		"SELECT * FROM (SELECT id FROM public.r7c_t WHERE id = 1 FOR UPDATE) s",
		"ANALYZE public.r7c_t",
		"VACUUM public.r7c_t",
		"COMMENT ON TABLE public.r7c_t IS 'r7c'",
	} {
		runOnPrimary(t, conn, sql)
	}
	// Reads a standby answers the same.
	for _, sql := range []string{
		"SELECT public.r7c_poly(1)",
		"SELECT public.r7c_var(1, 2)",
		"TABLE public.r7c_t",
	} {
		r7cOK(t, conn, sql)
	}
	t.Run("PrepareExecute", func(t *testing.T) {
		r7cOK(t, conn, "PREPARE r7c_p AS SELECT nextval('public.r7c_seq')")
		runOnPrimary(t, conn, "EXECUTE r7c_p")
		r7cOK(t, conn, "DEALLOCATE r7c_p")
	})
	t.Run("SerializableDefaultBySet", func(t *testing.T) {
		c2 := rvConnect(t, o)
		r7cOK(t, c2, "SET default_transaction_isolation = 'serializable'")
		r7cOK(t, c2, "SELECT 1")
	})
}
