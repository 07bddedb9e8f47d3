package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
)

// Review 4: routing. Every object is named r4r_* and is created idempotently on the primary as the
// superuser before pgowl starts (pgowl's first catalogue load sees it). pgowl runs with a long
// catalogue refresh interval, so that only DDL through pgowl reloads the catalogue during a test.

const r4rSetupSQL = `
CREATE SEQUENCE IF NOT EXISTS public.r4r_seq;
GRANT ALL ON SEQUENCE public.r4r_seq TO PUBLIC;

CREATE TABLE IF NOT EXISTS public.r4r_t (id int PRIMARY KEY, v int);
GRANT SELECT, INSERT, UPDATE, DELETE ON public.r4r_t TO PUBLIC;
INSERT INTO public.r4r_t VALUES (1, 1) ON CONFLICT DO NOTHING;

-- An unlogged table: its contents live on the primary only; a hot standby refuses to read it.
CREATE UNLOGGED TABLE IF NOT EXISTS public.r4r_unlogged (id int);
INSERT INTO public.r4r_unlogged SELECT 1 WHERE NOT EXISTS (SELECT FROM public.r4r_unlogged);
GRANT SELECT ON public.r4r_unlogged TO PUBLIC;
CREATE OR REPLACE VIEW public.r4r_unlogged_view AS SELECT id FROM public.r4r_unlogged;
GRANT SELECT ON public.r4r_unlogged_view TO PUBLIC;
CREATE OR REPLACE FUNCTION public.r4r_unlogged_count() RETURNS bigint LANGUAGE sql STABLE
  AS 'SELECT count(*) FROM public.r4r_unlogged';

-- A function pgowl cannot analyse (internal language): UNKNOWN_EFFECT.
CREATE OR REPLACE FUNCTION public.r4r_internal_abs(int) RETURNS int LANGUAGE internal VOLATILE AS 'int4abs';

-- IMMUTABLE functions whose bodies call nextval / read node-local statistics: the planner
-- evaluates an IMMUTABLE call with constant arguments while planning (evaluate_function).
CREATE OR REPLACE FUNCTION public.r4r_imm_nextval() RETURNS bigint LANGUAGE sql IMMUTABLE
  AS $$SELECT nextval('public.r4r_seq')$$;
CREATE OR REPLACE FUNCTION public.r4r_imm_repl() RETURNS bigint LANGUAGE sql IMMUTABLE
  AS 'SELECT count(*) FROM pg_catalog.pg_stat_replication';

-- Functions the app user replaces through pgowl; reset to a body that only reads.
CREATE OR REPLACE FUNCTION public.r4r_other(n int) RETURNS int LANGUAGE sql STABLE AS 'SELECT n';
CREATE OR REPLACE FUNCTION public.r4r_swap_tx() RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 0::bigint';
CREATE OR REPLACE FUNCTION public.r4r_swap_do() RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 0::bigint';
ALTER FUNCTION public.r4r_swap_tx() OWNER TO app;
ALTER FUNCTION public.r4r_swap_do() OWNER TO app;

-- Passing shapes.
CREATE OR REPLACE FUNCTION public.r4r_pl_lock() RETURNS int LANGUAGE plpgsql VOLATILE AS $$
DECLARE x int; BEGIN SELECT id INTO x FROM public.r4r_t WHERE id = 1 FOR UPDATE; RETURN x; END $$;
CREATE OR REPLACE FUNCTION public.r4r_pl_dyn() RETURNS int LANGUAGE plpgsql VOLATILE AS $$
BEGIN EXECUTE 'SELECT nextval(''public.r4r_seq'')'; RETURN 1; END $$;
CREATE OR REPLACE FUNCTION public.r4r_srf_next() RETURNS SETOF bigint LANGUAGE sql VOLATILE
  AS $$SELECT nextval('public.r4r_seq')$$;
CREATE OR REPLACE FUNCTION public.r4r_out_next(OUT a bigint, OUT b int) LANGUAGE sql VOLATILE
  AS $$SELECT nextval('public.r4r_seq'), 1$$;
CREATE OR REPLACE FUNCTION public.r4r_atomic_next() RETURNS bigint LANGUAGE sql VOLATILE
  BEGIN ATOMIC SELECT nextval('public.r4r_seq'); END;
CREATE OR REPLACE FUNCTION public.r4r_sfunc(s bigint, x int) RETURNS bigint LANGUAGE sql VOLATILE
  AS $$SELECT coalesce(s, 0) + nextval('public.r4r_seq') * 0 + x$$;
DROP AGGREGATE IF EXISTS public.r4r_agg(int);
CREATE AGGREGATE public.r4r_agg(int) (SFUNC = public.r4r_sfunc, STYPE = bigint);
CREATE OR REPLACE FUNCTION public.r4r_var(VARIADIC xs int[]) RETURNS bigint LANGUAGE sql VOLATILE
  AS $$SELECT nextval('public.r4r_seq')$$;
CREATE OR REPLACE FUNCTION public.r4r_poly(x anyelement) RETURNS bigint LANGUAGE sql VOLATILE
  AS $$SELECT nextval('public.r4r_seq')$$;
CREATE OR REPLACE VIEW public.r4r_lock_view AS SELECT id FROM public.r4r_t FOR UPDATE;
GRANT SELECT, UPDATE ON public.r4r_lock_view TO PUBLIC;
`

// r4rSetup creates the review objects, waits for the standbys and starts pgowl.
func r4rSetup(t *testing.T) (*cluster.Cluster, *owl) {
	t.Helper()
	return setupAndStart(t, "review 4 objects", r4rSetupSQL, func(cfg *config.Config) { cfg.Classify.RefreshInterval = 10 * time.Minute })
}

// r4rRows runs sql on conn and renders every row's first column, one per line.
func r4rRows(t *testing.T, conn *client, sql string) (string, error) {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		values, err := rows.Values()
		if err != nil {
			return "", err
		}
		out = append(out, fmt.Sprint(values[0]))
	}
	return strings.Join(out, "\n"), rows.Err()
}

// r4rMust runs sql through pgowl and requires it to succeed (on any node).
func r4rMust(t *testing.T, conn *client, sql string) {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	_, err := conn.PgConn().Exec(ctx, sql).ReadAll()
	rs := conn.routes(t)
	if err != nil {
		t.Fatalf("%s: %v (routes %v)", sql, err, rs)
	}
}

// TestRoutingUnloggedTable: reading an UNLOGGED table.
//
// BUG. SELECT count(*) FROM public.r4r_unlogged (and the same through a view, a STABLE SQL
// function, COPY ... TO STDOUT) is classified READ_ONLY and sent to a standby, which refuses it:
// ERROR 0A000 "cannot access temporary or unlogged relations during recovery". The primary answers
// 1. pg_relation_size of the unlogged table is node-local too: the standby has no main fork (0 bytes),
// the primary has the data. Cause: loadRelations (classify/catalog/load.go) reads relkind but not
// relpersistence, and resolveRelation (classify/analysis.go) treats every catalogued table as a
// plain read; docs/routing.md says nothing about unlogged tables.
func TestRoutingUnloggedTable(t *testing.T) {
	c, o := r4rSetup(t)
	conn := rvConnect(t, o)
	for _, tc := range []struct{ name, sql string }{
		{"Table", "SELECT count(*) FROM public.r4r_unlogged"},
		{"View", "SELECT count(*) FROM public.r4r_unlogged_view"},
		{"Function", "SELECT public.r4r_unlogged_count()"},
		{"RelationSize", "SELECT pg_catalog.pg_relation_size('public.r4r_unlogged') > 0"},
	} {
		t.Run(tc.name, func(t *testing.T) { r3Primary(t, c, conn, tc.sql) })
	}
	t.Run("CopyTo", func(t *testing.T) {
		var out strings.Builder
		ctx := timeoutCtx(t, statementTimeout)
		_, err := conn.PgConn().CopyTo(ctx, &out, "COPY public.r4r_unlogged TO STDOUT")
		r := conn.oneRoute(t, "copy")
		if err != nil || strings.TrimSpace(out.String()) != "1" || r.Role != "primary" {
			t.Errorf("COPY public.r4r_unlogged TO STDOUT: %q, %v on %v; the primary answers 1", out.String(), err, r)
		}
	})
}

// TestRoutingReadonlyHintMultiStatement: a /*pgowl:readonly*/ hint on a multi-statement string.
//
// BUG. "/*pgowl:readonly*/ SELECT public.r4r_internal_abs(-3); INSERT INTO public.r4r_t ..." is sent
// to a standby, where the INSERT fails with 25006. docs/routing.md: the readonly hint "never turns a
// statement that itself writes or locks rows into a read". Cause: combine (classify/classifier.go)
// keeps only the first writing statement's reason (UNKNOWN_EFFECT of the internal function), and
// applyHint/hintOverridable (classify/hints.go) judge the whole string by that reason, so the INSERT's
// WRITE (or a later nextval, LISTEN, FOR UPDATE, ...) is overridden too.
func TestRoutingReadonlyHintMultiStatement(t *testing.T) {
	_, o := r4rSetup(t)
	conn := rvConnect(t, o)
	for _, sql := range []string{
		"/*pgowl:readonly*/ SELECT public.r4r_internal_abs(-3); INSERT INTO public.r4r_t VALUES (-4, 0) ON CONFLICT (id) DO UPDATE SET v = 0",
		"/*pgowl:readonly*/ SELECT count(*) FROM pg_catalog.pg_stat_activity; SELECT nextval('public.r4r_seq')",
		"/*pgowl:readonly*/ SELECT public.r4r_internal_abs(-3); SELECT id FROM public.r4r_t WHERE id = 1 FOR UPDATE",
	} {
		runOnPrimary(t, conn, sql)
	}
}

// TestRoutingExplainFoldsImmutableCall: EXPLAIN without ANALYZE still plans, and the planner
// evaluates an IMMUTABLE function call with constant arguments (eval_const_expressions ->
// evaluate_function).
//
// BUG. EXPLAIN (COSTS OFF) SELECT public.r4r_imm_nextval() runs nextval while planning; pgowl calls
// every EXPLAIN without ANALYZE a read ("read, whatever it explains", docs/routing.md) and sends it to
// a standby, which fails with 25006 "cannot execute nextval() in a read-only transaction". The same
// for an INSERT whose VALUES call it, and EXPLAIN (VERBOSE) of an IMMUTABLE function over
// pg_stat_replication prints the standby's folded count (Output: '0'::bigint) where the primary's is
// 2. Cause: explain (classify/statements.go) returns read("EXPLAIN") without scanning the explained
// query for IMMUTABLE user functions whose bodies need the primary. (The plain SELECT of the same
// function goes to the primary: the control below.)
func TestRoutingExplainFoldsImmutableCall(t *testing.T) {
	c, o := r4rSetup(t)
	conn := rvConnect(t, o)
	t.Run("Control", func(t *testing.T) { runOnPrimary(t, conn, "SELECT public.r4r_imm_nextval()") })
	t.Run("ExplainSelect", func(t *testing.T) { runOnPrimary(t, conn, "EXPLAIN (COSTS OFF) SELECT public.r4r_imm_nextval()") })
	t.Run("ExplainInsert", func(t *testing.T) {
		runOnPrimary(t, conn, "EXPLAIN (COSTS OFF) INSERT INTO public.r4r_t VALUES (-5, public.r4r_imm_nextval()::int)")
	})
	t.Run("ExplainVerboseNodeLocal", func(t *testing.T) {
		sql := "EXPLAIN (VERBOSE, COSTS OFF) SELECT public.r4r_imm_repl()"
		want := r3DirectAll(t, c.Nodes[0], sql)
		standby := r3DirectAll(t, c.Nodes[1], sql)
		if want == standby {
			t.Fatalf("%s: primary and standby both answer %q", sql, want)
		}
		got, err := r4rRows(t, conn, sql)
		r := conn.oneRoute(t, sql)
		if err != nil || got != want || r.Role != "primary" {
			t.Errorf("%s: answered %q (%v) on %v; the primary answers %q (a standby %q)", sql, got, err, r, want, standby)
		}
	})
}

// r3DirectAll is a node's own answer to sql (every row's first column), as the superuser.
func r3DirectAll(t *testing.T, n *cluster.Node, sql string) string {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	conn, err := n.Connect(ctx)
	if err != nil {
		t.Fatalf("connect to %s: %v", n.Name, err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return "error: " + err.Error()
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		values, err := rows.Values()
		if err != nil {
			return "error: " + err.Error()
		}
		out = append(out, fmt.Sprint(values[0]))
	}
	if err := rows.Err(); err != nil {
		return "error: " + err.Error()
	}
	return strings.Join(out, "\n")
}

// TestRoutingFunctionReplacedInTransaction: CREATE OR REPLACE FUNCTION inside a transaction.
//
// BUG. BEGIN; CREATE OR REPLACE FUNCTION r4r_swap_tx() (now calls nextval); other statements;
// COMMIT; SELECT r4r_swap_tx() goes to a standby, which fails with 25006. The CREATE invalidates the
// catalogue when it is classified, but the transaction's next statements reload it while the change
// is uncommitted (invisible to the loader's connection), the settle reload a second later also runs
// before COMMIT, and after COMMIT nothing invalidates it again: proxy/classifier.go re-invalidates
// only when sess.last (the previous unit) itself had CatalogueChange, and after a transaction the
// previous unit is COMMIT. The old read verdict holds until classify.refresh_interval.
func TestRoutingFunctionReplacedInTransaction(t *testing.T) {
	_, o := r4rSetup(t)
	conn := rvConnect(t, o)
	r4rMust(t, conn, "SELECT public.r4r_swap_tx()") // the catalogue is loaded, r4r_swap_tx reads
	r4rMust(t, conn, "BEGIN")
	r4rMust(t, conn, `CREATE OR REPLACE FUNCTION public.r4r_swap_tx() RETURNS bigint LANGUAGE sql VOLATILE
  AS $$SELECT nextval('public.r4r_seq')$$`)
	r4rMust(t, conn, "SELECT public.r4r_other(1)")
	time.Sleep(1500 * time.Millisecond) // past the catalogue's settle delay (1 s)
	r4rMust(t, conn, "SELECT public.r4r_other(2)")
	time.Sleep(500 * time.Millisecond)
	r4rMust(t, conn, "SELECT public.r4r_other(3)")
	r4rMust(t, conn, "COMMIT")
	for i := 0; i < 3; i++ {
		runOnPrimary(t, conn, "SELECT public.r4r_swap_tx()")
		time.Sleep(300 * time.Millisecond)
	}
}

// TestRoutingFunctionReplacedInDoBlock: a DO block (a migration's usual shape) replaces a
// function.
//
// BUG. After DO $$ BEGIN CREATE OR REPLACE FUNCTION public.r4r_swap_do() ... nextval ...; END $$,
// SELECT public.r4r_swap_do() still goes to a standby (25006) until classify.refresh_interval.
// Cause: changesCatalogue (classify/analysis.go) does not count DoStmt (nor CALL, nor a function
// whose body runs DDL) as a catalogue change, although its effect is unknown.
func TestRoutingFunctionReplacedInDoBlock(t *testing.T) {
	_, o := r4rSetup(t)
	conn := rvConnect(t, o)
	r4rMust(t, conn, "SELECT public.r4r_swap_do()") // the catalogue is loaded, r4r_swap_do reads
	r4rMust(t, conn, `DO $do$ BEGIN
  CREATE OR REPLACE FUNCTION public.r4r_swap_do() RETURNS bigint LANGUAGE sql VOLATILE
    AS $f$SELECT nextval('public.r4r_seq')$f$;
END $do$`)
	time.Sleep(1500 * time.Millisecond)
	for i := 0; i < 3; i++ {
		runOnPrimary(t, conn, "SELECT public.r4r_swap_do()")
	}
}

// TestRoutingShapesPass: shapes pgowl handles (pass): each must succeed on the primary.
func TestRoutingShapesPass(t *testing.T) {
	_, o := r4rSetup(t)
	conn := rvConnect(t, o)
	for _, sql := range []string{
		"MERGE INTO public.r4r_t t USING (VALUES (-6, 1)) s(id, v) ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v)",
		"WITH ins AS (INSERT INTO public.r4r_t VALUES (-7, 0) ON CONFLICT (id) DO UPDATE SET v = 1 RETURNING id) SELECT count(*) FROM ins",
		"SELECT x.id FROM (VALUES (1)) v(a), LATERAL (SELECT id FROM public.r4r_t WHERE id = v.a FOR UPDATE) x",
		"SELECT (SELECT id FROM public.r4r_t WHERE id = 1 FOR NO KEY UPDATE)",
		"WITH l AS (SELECT id FROM public.r4r_t WHERE id = 1 FOR KEY SHARE) SELECT count(*) FROM l",
		"SELECT count(*) FROM public.r4r_lock_view",
		"SELECT public.r4r_pl_lock()",
		"SELECT public.r4r_pl_dyn()",
		"SELECT * FROM public.r4r_srf_next()",
		"SELECT * FROM ROWS FROM (public.r4r_srf_next(), generate_series(1, 2))",
		"SELECT count(*) FROM unnest(ARRAY(SELECT public.r4r_srf_next()))",
		"SELECT * FROM public.r4r_out_next()",
		"SELECT (public.r4r_out_next()).a",
		"SELECT public.r4r_atomic_next()",
		"SELECT public.r4r_agg(id) FROM public.r4r_t",
		"SELECT public.r4r_agg(id) OVER () FROM public.r4r_t",
		"SELECT public.r4r_var(1, 2, 3)",
		"SELECT public.r4r_var(VARIADIC ARRAY[1])",
		"SELECT public.r4r_poly('x'::text)",
		"SELECT public.r4r_poly(1)",
		"EXPLAIN ANALYZE INSERT INTO public.r4r_t VALUES (-8, 0) ON CONFLICT DO NOTHING",
		"EXPLAIN (ANALYZE, COSTS OFF) SELECT public.r4r_atomic_next()",
	} {
		runOnPrimary(t, conn, sql)
	}
	// COPY (SELECT writing function) TO STDOUT.
	var out strings.Builder
	ctx := timeoutCtx(t, statementTimeout)
	_, err := conn.PgConn().CopyTo(ctx, &out, "COPY (SELECT public.r4r_atomic_next()) TO STDOUT")
	r := conn.oneRoute(t, "copy")
	if err != nil || r.Role != "primary" {
		t.Errorf("COPY (SELECT r4r_atomic_next()) TO STDOUT: %v on %v", err, r)
	}
	// EXPLAIN without ANALYZE of a write runs nowhere: a standby is fine.
	for _, sql := range []string{
		"EXPLAIN INSERT INTO public.r4r_t VALUES (-9, 0)",
		"EXPLAIN (COSTS OFF) DELETE FROM public.r4r_t WHERE id = -9",
		"EXPLAIN SELECT nextval('public.r4r_seq')",
	} {
		_, err := conn.PgConn().Exec(ctx, sql).ReadAll()
		rs := conn.routes(t)
		if err != nil {
			t.Errorf("%s: %v on %v", sql, err, rs)
		}
	}
	// BEGIN READ ONLY then SET TRANSACTION READ WRITE, then a write and a savepoint.
	for _, sql := range []string{"BEGIN READ ONLY", "SET TRANSACTION READ WRITE", "SAVEPOINT s1",
		"LOCK TABLE public.r4r_t IN ACCESS SHARE MODE",
		"INSERT INTO public.r4r_t VALUES (-10, 0) ON CONFLICT DO NOTHING", "RELEASE SAVEPOINT s1", "COMMIT"} {
		if _, err := conn.PgConn().Exec(ctx, sql).ReadAll(); err != nil {
			t.Errorf("%s: %v (routes %v)", sql, err, conn.routes(t))
		}
	}
	conn.routes(t)
}
