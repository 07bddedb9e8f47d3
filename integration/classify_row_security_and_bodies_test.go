package integration

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/integration/owltest"
	"github.com/pgowl/pgowl/internal/cluster"
)

// Review 8: row security policies, domain checks, named notation, search_path changes inside
// bodies, catalogue changes made by bodies, and settings carried by value. Objects are named r8c_*
// (schema r8c_s), created idempotently on the primary as the superuser before pgowl starts, so that
// pgowl's first catalogue load sees them. Tables with policies are owned by the superuser (app is
// not their owner, so their policies apply to it) unless a test needs app to change them, in which
// case they FORCE ROW LEVEL SECURITY.

const r8cSetupSQL = `
CREATE SCHEMA IF NOT EXISTS r8c_s;
GRANT USAGE, CREATE ON SCHEMA r8c_s TO PUBLIC;
CREATE SEQUENCE IF NOT EXISTS public.r8c_seq;
GRANT ALL ON SEQUENCE public.r8c_seq TO PUBLIC;

-- A predicate that writes (nextval), true for every value but -1 (also for NULL).
CREATE OR REPLACE FUNCTION public.r8c_next(v int) RETURNS boolean LANGUAGE sql VOLATILE
  AS $$SELECT nextval('public.r8c_seq') > 0 AND v IS DISTINCT FROM -1$$;

-- Same name in two schemas; only r8c_s's writes.
CREATE OR REPLACE FUNCTION public.r8c_f() RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 0::bigint';
CREATE OR REPLACE FUNCTION r8c_s.r8c_f() RETURNS bigint LANGUAGE sql VOLATILE
  AS $$SELECT nextval('public.r8c_seq')$$;
-- A PL/pgSQL function that calls r8c_f() unqualified: which one runs depends on the path in force.
CREATE OR REPLACE FUNCTION public.r8c_call_f() RETURNS bigint LANGUAGE plpgsql VOLATILE
  AS $$BEGIN RETURN r8c_f(); END$$;

---------------------------------------------------------------- row security
DROP TABLE IF EXISTS public.r8c_rls, public.r8c_rls_op, r8c_s.r8c_two, public.r8c_two,
  public.r8c_part, public.r8c_rls_mig, public.r8c_rls_nest, public.r8c_recreate CASCADE;
CREATE TABLE public.r8c_rls (v int);
INSERT INTO public.r8c_rls VALUES (1);
GRANT SELECT ON public.r8c_rls TO PUBLIC;
ALTER TABLE public.r8c_rls ENABLE ROW LEVEL SECURITY;
CREATE POLICY r8c_rls_p ON public.r8c_rls FOR SELECT USING (public.r8c_next(v));
CREATE VIEW public.r8c_rls_sbv WITH (security_barrier) AS SELECT v FROM public.r8c_rls;
CREATE VIEW public.r8c_rls_siv WITH (security_invoker) AS SELECT v FROM public.r8c_rls;
GRANT SELECT ON public.r8c_rls_sbv, public.r8c_rls_siv TO PUBLIC;

-- A policy that runs a user operator whose function writes.
CREATE OR REPLACE FUNCTION public.r8c_op_fn(a int, b int) RETURNS boolean LANGUAGE sql VOLATILE
  AS $$SELECT nextval('public.r8c_seq') > 0$$;
DROP OPERATOR IF EXISTS public.#=# (int, int);
CREATE OPERATOR public.#=# (LEFTARG = int, RIGHTARG = int, FUNCTION = public.r8c_op_fn);
CREATE TABLE public.r8c_rls_op (v int);
INSERT INTO public.r8c_rls_op VALUES (1);
GRANT SELECT ON public.r8c_rls_op TO PUBLIC;
ALTER TABLE public.r8c_rls_op ENABLE ROW LEVEL SECURITY;
CREATE POLICY r8c_rls_op_p ON public.r8c_rls_op FOR SELECT USING (v #=# 1);

-- The same table name in two schemas: only r8c_s's has a writing policy.
CREATE TABLE public.r8c_two (v int);
CREATE TABLE r8c_s.r8c_two (v int);
INSERT INTO public.r8c_two VALUES (1);
INSERT INTO r8c_s.r8c_two VALUES (1);
GRANT SELECT ON public.r8c_two, r8c_s.r8c_two TO PUBLIC;
ALTER TABLE r8c_s.r8c_two ENABLE ROW LEVEL SECURITY;
CREATE POLICY r8c_two_p ON r8c_s.r8c_two FOR SELECT USING (public.r8c_next(v));

-- A partition with its own writing policy: applied when the partition is read directly only.
CREATE TABLE public.r8c_part (v int) PARTITION BY RANGE (v);
CREATE TABLE public.r8c_part_1 PARTITION OF public.r8c_part FOR VALUES FROM (0) TO (100);
INSERT INTO public.r8c_part VALUES (1);
GRANT SELECT ON public.r8c_part, public.r8c_part_1 TO PUBLIC;
ALTER TABLE public.r8c_part_1 ENABLE ROW LEVEL SECURITY;
CREATE POLICY r8c_part_1_p ON public.r8c_part_1 FOR SELECT USING (public.r8c_next(v));

-- Migrations run as procedures (owned by app, FORCE so that the policies apply to it).
CREATE TABLE public.r8c_rls_mig (v int);
INSERT INTO public.r8c_rls_mig VALUES (1);
ALTER TABLE public.r8c_rls_mig OWNER TO app;
ALTER TABLE public.r8c_rls_mig ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE OR REPLACE PROCEDURE public.r8c_mig_exec_policy() LANGUAGE plpgsql AS $p$
BEGIN
  EXECUTE 'CREATE POLICY r8c_mig_p ON public.r8c_rls_mig FOR SELECT USING (public.r8c_next(v))';
END $p$;
CREATE TABLE public.r8c_rls_nest (v int);
INSERT INTO public.r8c_rls_nest VALUES (1);
ALTER TABLE public.r8c_rls_nest OWNER TO app;
ALTER TABLE public.r8c_rls_nest ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY r8c_nest_p ON public.r8c_rls_nest FOR SELECT USING (true);
CREATE OR REPLACE PROCEDURE public.r8c_mig_inner() LANGUAGE plpgsql AS $p$
BEGIN
  ALTER POLICY r8c_nest_p ON public.r8c_rls_nest USING (public.r8c_next(v));
END $p$;
CREATE OR REPLACE PROCEDURE public.r8c_mig_outer() LANGUAGE plpgsql AS $p$
BEGIN
  CALL public.r8c_mig_inner();
END $p$;
-- A table app drops and creates again, without policies the second time.
CREATE TABLE public.r8c_recreate (v int);
INSERT INTO public.r8c_recreate VALUES (1);
ALTER TABLE public.r8c_recreate OWNER TO app;
ALTER TABLE public.r8c_recreate ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY r8c_recreate_p ON public.r8c_recreate FOR SELECT USING (public.r8c_next(v));

-- A function replaced by a migration procedure through EXECUTE.
CREATE OR REPLACE FUNCTION public.r8c_tally() RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 0::bigint';
ALTER FUNCTION public.r8c_tally() OWNER TO app;
CREATE OR REPLACE PROCEDURE public.r8c_mig_exec_function() LANGUAGE plpgsql AS $p$
BEGIN
  EXECUTE $e$CREATE OR REPLACE FUNCTION public.r8c_tally() RETURNS bigint LANGUAGE sql VOLATILE
    AS 'SELECT nextval(''public.r8c_seq'')'$e$;
END $p$;

---------------------------------------------------------------- domains
DROP TABLE IF EXISTS public.r8c_domcol;
DROP TYPE IF EXISTS public.r8c_comp;
DROP DOMAIN IF EXISTS public.r8c_dom2, public.r8c_arrdom, public.r8c_nn CASCADE;
DROP DOMAIN IF EXISTS public.r8c_dom CASCADE;
CREATE DOMAIN public.r8c_dom AS int CHECK (public.r8c_next(VALUE));
CREATE DOMAIN public.r8c_dom2 AS public.r8c_dom;
CREATE DOMAIN public.r8c_arrdom AS int[] CHECK (public.r8c_next(VALUE[1]));
CREATE DOMAIN public.r8c_nn AS int NOT NULL;
CREATE TYPE public.r8c_comp AS (d public.r8c_dom);
CREATE TABLE public.r8c_domcol (id int, d public.r8c_dom);
INSERT INTO public.r8c_domcol VALUES (1, 5);
GRANT SELECT ON public.r8c_domcol TO PUBLIC;
CREATE OR REPLACE FUNCTION public.r8c_ret_pl() RETURNS public.r8c_dom LANGUAGE plpgsql VOLATILE
  AS $$BEGIN RETURN 5; END$$;
CREATE OR REPLACE FUNCTION public.r8c_ret_sql() RETURNS public.r8c_dom LANGUAGE sql VOLATILE AS 'SELECT 5';
CREATE OR REPLACE FUNCTION public.r8c_out_pl(OUT d public.r8c_dom) LANGUAGE plpgsql VOLATILE
  AS $$BEGIN d := 5; END$$;
CREATE OR REPLACE FUNCTION public.r8c_pl_typeof() RETURNS int LANGUAGE plpgsql VOLATILE
  AS $$DECLARE x public.r8c_domcol.d%TYPE; BEGIN x := 5; RETURN x; END$$;
CREATE OR REPLACE FUNCTION public.r8c_takes_arr(ds public.r8c_dom[]) RETURNS int LANGUAGE sql VOLATILE
  AS 'SELECT cardinality(ds)';
CREATE OR REPLACE FUNCTION public.r8c_var_dom(VARIADIC ds public.r8c_dom[]) RETURNS int LANGUAGE sql VOLATILE
  AS 'SELECT cardinality(ds)';
CREATE OR REPLACE FUNCTION public.r8c_takes_dom2(d public.r8c_dom2) RETURNS int LANGUAGE sql VOLATILE AS 'SELECT d';

---------------------------------------------------------------- named notation
-- public.r8c_mix has b first: r8c_mix(1, b => 2) gives b twice there, so PostgreSQL skips it.
CREATE OR REPLACE FUNCTION public.r8c_mix(b int, a int) RETURNS bigint LANGUAGE sql VOLATILE
  AS 'SELECT 0::bigint';
CREATE OR REPLACE FUNCTION r8c_s.r8c_mix(a int, b int) RETURNS bigint LANGUAGE sql VOLATILE
  AS $$SELECT nextval('public.r8c_seq')$$;

---------------------------------------------------------------- search_path inside bodies
CREATE OR REPLACE FUNCTION public.r8c_pl_quoted() RETURNS bigint LANGUAGE plpgsql VOLATILE
  AS $$BEGIN SET LOCAL "search_path" = r8c_s, public; RETURN r8c_f(); END$$;
CREATE OR REPLACE FUNCTION public.r8c_pl_schema() RETURNS bigint LANGUAGE plpgsql VOLATILE
  AS $$BEGIN SET LOCAL SCHEMA 'r8c_s'; RETURN r8c_f(); END$$;
CREATE OR REPLACE FUNCTION public.r8c_pl_qfunc() RETURNS bigint LANGUAGE plpgsql VOLATILE
  AS $$BEGIN PERFORM "set_config"('search_path', 'r8c_s, public', true); RETURN r8c_f(); END$$;
CREATE OR REPLACE FUNCTION public.r8c_atomic_path() RETURNS bigint LANGUAGE sql VOLATILE
BEGIN ATOMIC
  SELECT pg_catalog.set_config('search_path', 'r8c_s, public', true);
  SELECT public.r8c_call_f();
END;
-- Mentions that are no change.
CREATE OR REPLACE FUNCTION public.r8c_pl_comment() RETURNS int LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  -- callers SET search_path themselves; this function does not
  RETURN 1;
END$$;
CREATE OR REPLACE FUNCTION public.r8c_sql_string() RETURNS text LANGUAGE sql VOLATILE
  AS $$SELECT 'reset all caches, then set search_path'::text$$;

---------------------------------------------------------------- settings changed by bodies
CREATE OR REPLACE FUNCTION public.r8c_set_tenant() RETURNS int LANGUAGE plpgsql VOLATILE
  AS $$BEGIN SET app.r8c_tenant = 'acme'; RETURN 1; END$$;
CREATE OR REPLACE FUNCTION public.r8c_set_computed() RETURNS int LANGUAGE plpgsql VOLATILE
  AS $$BEGIN PERFORM set_config('app.' || 'r8c_comp', 'acme', false); RETURN 1; END$$;
CREATE OR REPLACE FUNCTION public.r8c_set_ser() RETURNS int LANGUAGE plpgsql VOLATILE
  AS $$BEGIN PERFORM set_config('default_transaction_' || 'isolation', 'serializable', false); RETURN 1; END$$;
CREATE OR REPLACE FUNCTION public.r8c_maybe_set() RETURNS int LANGUAGE plpgsql VOLATILE
  AS $$BEGIN IF false THEN PERFORM set_config('app.r8c_never', 'x', false); END IF; RETURN 1; END$$;
CREATE OR REPLACE PROCEDURE public.r8c_proc_path() LANGUAGE plpgsql
  AS $$BEGIN SET search_path = r8c_s, public; END$$;
CREATE OR REPLACE FUNCTION public.r8c_export() RETURNS text LANGUAGE sql VOLATILE
  AS 'SELECT pg_catalog.pg_export_snapshot()';
`

func r8cSetup(t *testing.T) (*cluster.Cluster, *owl) {
	t.Helper()
	return setupAndStart(t, "review 8 objects", r8cSetupSQL, func(cfg *config.Config) {
		cfg.Classify.RefreshInterval = 10 * time.Minute
		// The tests read on a standby right after a statement ran on the
		// primary in the same session to check a classification, not read
		// your writes (read_your_writes_test.go).
		cfg.Routing.ReadYourWrites = config.ReadYourWritesOff
	})
}

// r8cDirect runs sql (one or more statements, simple protocol) on node n as user and returns the
// first column of the first row of the last result, or "error: ..." when it fails.
func r8cDirect(t *testing.T, n *cluster.Node, user, password, sql string) string {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	conn, err := pgx.Connect(ctx, n.DSN(user, password, appDatabase))
	if err != nil {
		t.Fatalf("connect to %s as %s: %v", n.Name, user, err)
	}
	defer conn.Close(context.Background())
	results, err := conn.PgConn().Exec(ctx, sql).ReadAll()
	if err != nil {
		return "error: " + err.Error()
	}
	if len(results) == 0 {
		return ""
	}
	last := results[len(results)-1]
	if len(last.Rows) == 0 || len(last.Rows[0]) == 0 {
		return ""
	}
	return string(last.Rows[0][0])
}

// r8cProveStandbyRefuses requires a standby to refuse sql (as app) with 25006, so that a test
// asserting the primary is not wrong about PostgreSQL.
func r8cProveStandbyRefuses(t *testing.T, c *cluster.Cluster, sql string) {
	t.Helper()
	if got := r8cDirect(t, c.Nodes[1], appUser, appPassword, sql); !strings.Contains(got, "25006") {
		t.Errorf("proof: on a standby as app, %q answered %q; want a 25006 error", sql, got)
	}
}

// r8cOnStandby runs sql through pgowl; it must succeed, on a standby.
func r8cOnStandby(t *testing.T, conn *client, sql string) {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	_, err := conn.PgConn().Exec(ctx, sql).ReadAll()
	rs := conn.routes(t)
	if err != nil {
		t.Errorf("%s: %v (routes %v)", sql, err, rs)
		return
	}
	for _, r := range rs {
		if r.Role != "standby" {
			t.Errorf("%s: ran on %v, want a standby (it only reads)", sql, r)
		}
	}
}

// r8cReportUnseenDomainCheck runs sql, whose domain CHECK writes, through
// pgowl and reports the known gap (docs/routing.md "Row security policies and
// domain checks"): a domain reached through a %TYPE declaration or as a field
// of a composite type is not followed, so the statement goes to a standby and
// fails there with 25006. Nothing is written. The test fails once the gap is
// closed (the statement runs on the primary), so that the docs are updated,
// and on any other outcome.
func r8cReportUnseenDomainCheck(t *testing.T, conn *client, sql string) {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	_, err := conn.PgConn().Exec(ctx, sql).ReadAll()
	rs := conn.routes(t)
	onPrimary := len(rs) > 0
	for _, r := range rs {
		onPrimary = onPrimary && r.Role == "primary"
	}
	pgErr, isPgErr := asPgError(err)
	switch {
	case err == nil && onPrimary:
		t.Errorf("%s ran on the primary (routes %v): the known gap is closed; update docs/routing.md and this test", sql, rs)
	case isPgErr && pgErr.Code == "25006":
		t.Logf("known gap (docs/routing.md \"Row security policies and domain checks\"): %s went to %v and failed there: %v", sql, rs, err)
	default:
		t.Errorf("%s: %v (routes %v); want the primary, or the known gap (25006 on a standby)", sql, err, rs)
	}
}

// r8cValue runs a one-value query through pgowl and returns the value and the routes.
func r8cValue(t *testing.T, conn *client, sql string) (string, []routeNotice, error) {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	results, err := conn.PgConn().Exec(ctx, sql).ReadAll()
	rs := conn.routes(t)
	if err != nil {
		return "", rs, err
	}
	if len(results) == 0 || len(results[len(results)-1].Rows) == 0 {
		return "", rs, nil
	}
	row := results[len(results)-1].Rows[0]
	if len(row) == 0 || row[0] == nil {
		return "", rs, nil
	}
	return string(row[0]), rs, nil
}

// TestClassifyRowSecurity: reads of tables whose SELECT policies write.
func TestClassifyRowSecurity(t *testing.T) {
	c, o := r8cSetup(t)
	r8cProveStandbyRefuses(t, c, "SELECT count(*) FROM public.r8c_rls")
	r8cProveStandbyRefuses(t, c, "SELECT count(*) FROM public.r8c_rls_op")
	r8cProveStandbyRefuses(t, c, "SELECT count(*) FROM public.r8c_part_1")
	r8cProveStandbyRefuses(t, c, "SET search_path = r8c_s, public; SELECT count(*) FROM r8c_two")
	conn := rvConnect(t, o)
	for _, sql := range []string{
		"SELECT count(*) FROM public.r8c_rls",
		"TABLE public.r8c_rls",
		"SELECT count(*) FROM public.r8c_rls_sbv",
		"SELECT count(*) FROM public.r8c_rls_siv",
		"SELECT count(*) FROM public.r8c_rls_op",
		"SELECT count(*) FROM public.r8c_part_1",
		"SELECT count(*) FROM (VALUES (1)) v(x) WHERE EXISTS (SELECT FROM public.r8c_rls)",
	} {
		runOnPrimary(t, conn, sql)
	}
	t.Run("CopyTo", func(t *testing.T) {
		ctx := timeoutCtx(t, statementTimeout)
		_, err := conn.PgConn().CopyTo(ctx, io.Discard, "COPY public.r8c_rls TO STDOUT")
		rs := conn.routes(t)
		if err != nil {
			t.Errorf("COPY public.r8c_rls TO STDOUT: %v (routes %v)", err, rs)
		}
		for _, r := range rs {
			if r.Role != "primary" {
				t.Errorf("COPY public.r8c_rls TO STDOUT: ran on %v, want the primary (COPY TO applies the policies)", r)
			}
		}
	})
	// Reading the partitioned parent applies the parent's policies only (it has none).
	r8cOnStandby(t, conn, "SELECT count(*) FROM public.r8c_part")
	r8cOnStandby(t, conn, "SELECT count(*) FROM public.r8c_two")
	t.Run("SearchPathPicksTheTable", func(t *testing.T) {
		c2 := r7cConnect(t, o, map[string]string{"search_path": "r8c_s, public"})
		runOnPrimary(t, c2, "SELECT count(*) FROM r8c_two")
		c3 := r7cConnect(t, o, map[string]string{"search_path": "public, r8c_s"})
		r8cOnStandby(t, c3, "SELECT count(*) FROM r8c_two")
	})
}

// TestClassifyPolicyCreatedByExecuteInProcedure: a migration procedure that creates a
// policy through EXECUTE (as migrations built with format() do).
//
// BUG (found in review 8). After CALL r8c_mig_exec_policy() the read goes to a standby (READ_ONLY,
// stale catalogue) and fails with 25006: EXECUTE in a body is a write but does not set
// sessionCatalogueChange, although it may run any DDL (a DO block is counted as a change for that
// reason).
func TestClassifyPolicyCreatedByExecuteInProcedure(t *testing.T) {
	c, o := r8cSetup(t)
	conn := rvConnect(t, o)
	r8cOnStandby(t, conn, "SELECT count(*) FROM public.r8c_rls_mig")
	runOnPrimary(t, conn, "CALL public.r8c_mig_exec_policy()")
	catchUp(t, c)
	r8cProveStandbyRefuses(t, c, "SELECT count(*) FROM public.r8c_rls_mig")
	runOnPrimary(t, conn, "SELECT count(*) FROM public.r8c_rls_mig")
}

// TestClassifyPolicyAlteredByNestedProcedure: CALL of a procedure that CALLs one whose body
// runs ALTER POLICY.
func TestClassifyPolicyAlteredByNestedProcedure(t *testing.T) {
	c, o := r8cSetup(t)
	conn := rvConnect(t, o)
	r8cOnStandby(t, conn, "SELECT count(*) FROM public.r8c_rls_nest")
	runOnPrimary(t, conn, "CALL public.r8c_mig_outer()")
	catchUp(t, c)
	r8cProveStandbyRefuses(t, c, "SELECT count(*) FROM public.r8c_rls_nest")
	runOnPrimary(t, conn, "SELECT count(*) FROM public.r8c_rls_nest")
}

// TestClassifyFunctionReplacedByExecuteInProcedure: a migration procedure that replaces a
// function through EXECUTE.
//
// BUG (found in review 8). SELECT public.r8c_tally() after the CALL goes to a standby (READ_ONLY, the
// old body) and fails with 25006; same cause as the policy case.
func TestClassifyFunctionReplacedByExecuteInProcedure(t *testing.T) {
	c, o := r8cSetup(t)
	conn := rvConnect(t, o)
	r8cOnStandby(t, conn, "SELECT public.r8c_tally()")
	runOnPrimary(t, conn, "CALL public.r8c_mig_exec_function()")
	catchUp(t, c)
	r8cProveStandbyRefuses(t, c, "SELECT public.r8c_tally()")
	runOnPrimary(t, conn, "SELECT public.r8c_tally()")
}

// TestClassifyTableRecreatedWithoutPolicy: DROP TABLE and CREATE TABLE of the same name
// through pgowl; the new table has no policy.
//
// BUG (found in review 8). The read goes to the primary as WRITING_FUNCTION "row security policy on
// r8c_recreate → r8c_next(integer)": DROP TABLE does not change the catalogue (changesCatalogue),
// although tables now carry their policies in it.
func TestClassifyTableRecreatedWithoutPolicy(t *testing.T) {
	c, o := r8cSetup(t)
	conn := rvConnect(t, o)
	runOnPrimary(t, conn, "SELECT count(*) FROM public.r8c_recreate")
	runOnPrimary(t, conn, "DROP TABLE public.r8c_recreate")
	runOnPrimary(t, conn, "CREATE TABLE public.r8c_recreate (v int)")
	catchUp(t, c)
	ctx := timeoutCtx(t, statementTimeout)
	_, err := conn.PgConn().Exec(ctx, "SELECT count(*) FROM public.r8c_recreate").ReadAll()
	r := conn.oneRoute(t, "SELECT count(*) FROM public.r8c_recreate")
	if err != nil {
		t.Fatalf("SELECT count(*) FROM public.r8c_recreate: %v", err)
	}
	if r.Role != "standby" || strings.Contains(r.Raw.Message, "row security") {
		t.Errorf("SELECT count(*) FROM public.r8c_recreate (a new table without row security): %v; want a standby, READ_ONLY", r)
	}
}

// TestClassifyDomainCheckPlaces: places where a value becomes of a domain whose CHECK writes.
//
// BUG (found in review 8). READ_ONLY on a standby, 25006: a function RETURNS the domain (PL/pgSQL and
// SQL), an OUT parameter of it, a PL/pgSQL variable declared tbl.col%TYPE of a domain column, a cast
// to a composite type with a field of the domain (ROW(5)::comp, '(5)'::comp), a parameter that is an
// array of the domain (also VARIADIC): functionEffect looks only at input argument types that are
// domains themselves, declaredType skips %TYPE, resolveCast looks only at the target (or element)
// type.
func TestClassifyDomainCheckPlaces(t *testing.T) {
	c, o := r8cSetup(t)
	conn := rvConnect(t, o)
	for _, sql := range []string{
		"SELECT public.r8c_ret_pl()",
		"SELECT public.r8c_ret_sql()",
		"SELECT * FROM public.r8c_out_pl()",
		"SELECT public.r8c_pl_typeof()",
		"SELECT ROW(5)::public.r8c_comp",
		"SELECT '(5)'::public.r8c_comp",
		"SELECT public.r8c_takes_arr(ARRAY[5])",
		"SELECT public.r8c_takes_arr('{5}')",
		"SELECT public.r8c_var_dom(5, 6)",
		"SELECT 5::public.r8c_dom2",
		"SELECT public.r8c_takes_dom2(5)",
		"SELECT ARRAY[5]::public.r8c_arrdom",
		"VALUES (CAST(5 AS public.r8c_dom)), (6)",
	} {
		t.Run(sql, func(t *testing.T) {
			r8cProveStandbyRefuses(t, c, sql)
			switch sql {
			case "SELECT public.r8c_pl_typeof()", "SELECT ROW(5)::public.r8c_comp", "SELECT '(5)'::public.r8c_comp":
				r8cReportUnseenDomainCheck(t, conn, sql)
				return
			}
			runOnPrimary(t, conn, sql)
		})
	}
}

// TestClassifyDomainNoCheck: reads that involve a domain but run no CHECK.
func TestClassifyDomainNoCheck(t *testing.T) {
	_, o := r8cSetup(t)
	conn := rvConnect(t, o)
	for _, sql := range []string{
		"SELECT d FROM public.r8c_domcol",
		"SELECT id FROM public.r8c_domcol WHERE d = 5",
		"SELECT 5::public.r8c_nn",
	} {
		r8cOnStandby(t, conn, sql)
	}
}

// TestClassifyNamedMixedWithPositional: r8c_mix(1, b => 2) with search_path public, r8c_s.
// public.r8c_mix(b int, a int) has the same argument types as r8c_s.r8c_mix(a int, b int), but the
// positional 1 already fills its b: MatchNamedCall rejects it before same-signature functions later
// on the path are hidden, and r8c_s.r8c_mix (nextval) runs.
//
// BUG (found in review 8). READ_ONLY on a standby, 25006: hasArgNames only asks whether the name
// exists, not whether a positional argument already fills it.
func TestClassifyNamedMixedWithPositional(t *testing.T) {
	c, o := r8cSetup(t)
	r8cProveStandbyRefuses(t, c, "SET search_path = public, r8c_s; SELECT r8c_mix(1, b => 2)")
	conn := r7cConnect(t, o, map[string]string{"search_path": "public, r8c_s"})
	runOnPrimary(t, conn, "SELECT r8c_mix(1, b => 2)")
	// control: all named, public's is found (b, a both given).
	r8cOnStandby(t, conn, "SELECT r8c_mix(b => 1, a => 2)")
}

// TestClassifyBodySearchPathChangeMissed: bodies that change search_path in forms the
// regular expression does not see, then call r8c_f() unqualified (r8c_s.r8c_f calls nextval).
//
// BUG (found in review 8). All four are READ_ONLY on a standby and fail with 25006: the regular
// expression bodySetsSearchPath misses a quoted "search_path", SET SCHEMA, a quoted "set_config",
// and is applied to prosrc, which is not the body of a BEGIN ATOMIC function.
func TestClassifyBodySearchPathChangeMissed(t *testing.T) {
	c, o := r8cSetup(t)
	conn := r7cConnect(t, o, map[string]string{"search_path": "public"})
	for _, sql := range []string{
		"SELECT public.r8c_pl_quoted()",   // SET LOCAL "search_path" = ...
		"SELECT public.r8c_pl_schema()",   // SET LOCAL SCHEMA 'r8c_s' (an alias of search_path)
		"SELECT public.r8c_pl_qfunc()",    // PERFORM "set_config"('search_path', ...)
		"SELECT public.r8c_atomic_path()", // BEGIN ATOMIC body: prosrc is not the body
	} {
		t.Run(sql, func(t *testing.T) {
			r8cProveStandbyRefuses(t, c, "SET search_path = public; "+sql)
			runOnPrimary(t, conn, sql)
		})
	}
}

// TestClassifySetConfigThenCallInOneStatement: set_config of search_path (local) and a call
// in the same target list: PL/pgSQL plans r8c_f() in r8c_call_f after set_config ran.
//
// BUG (found in review 8). READ_ONLY on a standby, 25006: the call is analysed on the path before
// the statement. A known gap (docs/routing.md): the test reports it while it is there.
func TestClassifySetConfigThenCallInOneStatement(t *testing.T) {
	c, o := r8cSetup(t)
	const sql = "SELECT pg_catalog.set_config('search_path', 'r8c_s, public', true), public.r8c_call_f()"
	r8cProveStandbyRefuses(t, c, "SET search_path = public; "+sql)
	conn := r7cConnect(t, o, map[string]string{"search_path": "public"})
	_, err := conn.PgConn().Exec(timeoutCtx(t, statementTimeout), sql).ReadAll()
	rs := conn.routes(t)
	onPrimary := len(rs) > 0
	for _, r := range rs {
		onPrimary = onPrimary && r.Role == "primary"
	}
	switch {
	case err == nil && onPrimary:
		owltest.KnownGap(t, false, "docs/routing.md: a search_path changed by set_config inside one statement is not applied to the functions the same statement calls later")
	case rvSQLState(err) == "25006" && !onPrimary:
		owltest.KnownGap(t, true, fmt.Sprintf("docs/routing.md: a search_path changed by set_config inside one statement is not applied to the functions the same statement calls later: %s ran on %v and failed: %v", sql, rs, err))
	default:
		t.Errorf("%s: %v (routes %v); want it to run on the primary, or the known gap (25006 on a standby)", sql, err, rs)
	}
}

// TestClassifyBodyMentionsSearchPath: a body that only mentions search_path (a comment, a
// string) changes nothing and reads.
//
// BUG (found in review 8, misleading reason). Both go to the primary as UNKNOWN_EFFECT "its body
// changes search_path": the regular expression matches comments and string literals.
func TestClassifyBodyMentionsSearchPath(t *testing.T) {
	_, o := r8cSetup(t)
	conn := rvConnect(t, o)
	r8cOnStandby(t, conn, "SELECT public.r8c_pl_comment()")
	r8cOnStandby(t, conn, "SELECT public.r8c_sql_string()")
}

// TestClassifySettingsSetInBodies: settings a function or procedure changes for the session
// must hold for the session's next statements, wherever they run.
//
// BUG (found in review 8). SetStatementOfPlaceholder: a SET app.x statement in a body is not in
// Effects.SetConfigNames, and pg_settings does not list placeholders: the next statement reads an empty string
// instead of acme. SetConfigOfComputedName: the same for set_config with a computed name.
// SerializableDefaultInDo: DO ... EXECUTE 'SET default_transaction_isolation = serializable'; the
// read-back carries the value to standbys, where SELECT 1 fails with 0A000, and the session is not
// kept on the primary.
func TestClassifySettingsSetInBodies(t *testing.T) {
	_, o := r8cSetup(t)
	t.Run("SetStatementOfPlaceholder", func(t *testing.T) {
		conn := rvConnect(t, o)
		r7cOK(t, conn, "SELECT public.r8c_set_tenant()")
		got, rs, err := r8cValue(t, conn, "SELECT current_setting('app.r8c_tenant', true)")
		if err != nil || got != "acme" {
			t.Errorf("current_setting('app.r8c_tenant') after SELECT r8c_set_tenant(): %q (err %v) on %v; want acme", got, err, rs)
		}
	})
	t.Run("SetConfigOfComputedName", func(t *testing.T) {
		// A known limit (README "Limits"): an application setting set by
		// set_config under a computed name cannot be read back (pg_settings
		// does not list it), so it holds on the backend it ran on only. The
		// case reports it, and fails once another node reads the value.
		conn := rvConnect(t, o)
		setRoutes := r7cOK(t, conn, "SELECT public.r8c_set_computed()")
		got, rs, err := r8cValue(t, conn, "SELECT current_setting('app.r8c_comp', true)")
		sameNode := len(setRoutes) > 0 && len(rs) > 0 && setRoutes[len(setRoutes)-1].Node == rs[len(rs)-1].Node
		switch {
		case err != nil:
			t.Errorf("current_setting('app.r8c_comp') after SELECT r8c_set_computed(): %v (routes %v)", err, rs)
		case got == "acme" && !sameNode:
			t.Errorf("current_setting('app.r8c_comp') read acme on %v, another node than the set (%v): the known limit is gone; update README \"Limits\" and this test", rs, setRoutes)
		case got == "acme":
			t.Logf("the read ran on the node of the set (%v), where the value holds; the known limit did not show", rs)
		default:
			t.Logf("known limit (README \"Limits\"): the set ran on %v, the read on %v answered %q, not acme", setRoutes, rs, got)
		}
	})
	t.Run("SerializableDefaultByComputedName", func(t *testing.T) {
		conn := rvConnect(t, o)
		r7cOK(t, conn, "SELECT public.r8c_set_ser()")
		r7cOK(t, conn, "SELECT 1")
		r7cOK(t, conn, "SELECT count(*) FROM public.r8c_domcol")
	})
	t.Run("SerializableDefaultInDo", func(t *testing.T) {
		conn := rvConnect(t, o)
		r7cOK(t, conn, "DO $$BEGIN EXECUTE 'SET default_transaction_isolation = serializable'; END$$")
		r7cOK(t, conn, "SELECT 1")
		r7cOK(t, conn, "SELECT count(*) FROM public.r8c_domcol")
	})
	t.Run("SetConfigNeverRun", func(t *testing.T) {
		conn := rvConnect(t, o)
		r7cOK(t, conn, "SELECT public.r8c_maybe_set()")
		r7cOK(t, conn, "SELECT 1")
		got, rs, err := r8cValue(t, conn, "SELECT coalesce(current_setting('app.r8c_never', true), '<null>')")
		if err != nil || got != "<null>" {
			t.Errorf("app.r8c_never after a function that never set it: %q (err %v) on %v; want <null> (undefined)", got, err, rs)
		}
	})
	t.Run("ProcedureSetsSearchPath", func(t *testing.T) {
		conn := r7cConnect(t, o, map[string]string{"search_path": "public"})
		runOnPrimary(t, conn, "CALL public.r8c_proc_path()")
		got, rs, err := r8cValue(t, conn, "SHOW search_path")
		if err != nil || got != "r8c_s, public" {
			t.Errorf("SHOW search_path after CALL r8c_proc_path(): %q (err %v) on %v; want \"r8c_s, public\"", got, err, rs)
		}
		runOnPrimary(t, conn, "SELECT r8c_f()")
	})
	t.Run("SessionCharacteristicsSerializable", func(t *testing.T) {
		conn := rvConnect(t, o)
		r7cOK(t, conn, "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE")
		r7cOK(t, conn, "SELECT 1")
	})
	t.Run("SetConfigSerializableDefault", func(t *testing.T) {
		conn := rvConnect(t, o)
		r7cOK(t, conn, "SELECT set_config('default_transaction_isolation', 'serializable', false)")
		r7cOK(t, conn, "SELECT 1")
	})
}

// TestClassifyExportSnapshotInFunction: pg_export_snapshot() called by a user function runs
// where the importing session will look for it: the primary.
func TestClassifyExportSnapshotInFunction(t *testing.T) {
	_, o := r8cSetup(t)
	conn := rvConnect(t, o)
	runOnPrimary(t, conn, "SELECT public.r8c_export()")
}
