package integration

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
)

// Review tests: statements whose answer differs between the primary and a standby (node-local
// statistics, sequences' last_value, ...) or that must write, sent to a standby anyway.
//
// Every object is created directly on the primary as the superuser (objects named rv_*, and the
// schema rv_stats), before pgowl starts, so that pgowl's first catalogue load sees them.

// rvSetupSQL creates the review objects. rv_stats.rv_report and public.rv_report share a name:
// the first reads pg_stat_replication (node-local: the primary has one walsender per standby, a
// standby has none), the second only returns 0.
const rvSetupSQL = `
DROP SCHEMA IF EXISTS rv_stats CASCADE;
DROP FUNCTION IF EXISTS public.rv_report() CASCADE;
DROP FUNCTION IF EXISTS public.rv_inner() CASCADE;
DROP FUNCTION IF EXISTS public.rv_outer() CASCADE;
DROP FUNCTION IF EXISTS public.rv_stable_repl() CASCADE;
DROP FUNCTION IF EXISTS public.rv_stable_nextval() CASCADE;
DROP FUNCTION IF EXISTS public.rv_volatile_repl() CASCADE;
DROP FUNCTION IF EXISTS public.rv_defarg(bigint) CASCADE;
DROP FUNCTION IF EXISTS public.rv_defarg_write(bigint) CASCADE;
DROP FUNCTION IF EXISTS public.rv_big(bigint) CASCADE;
DROP FUNCTION IF EXISTS public.rv_big(numeric) CASCADE;
DROP OPERATOR IF EXISTS public.### (integer, integer) CASCADE;
DROP FUNCTION IF EXISTS public.rv_op_repl(integer, integer) CASCADE;
DROP TABLE IF EXISTS public.rv_one_row CASCADE;
DROP SEQUENCE IF EXISTS public.rv_seq_write;
DROP SEQUENCE IF EXISTS public.rv_seq_lv;
DROP VIEW IF EXISTS public.rv_v2, public.rv_v1 CASCADE;
DROP FUNCTION IF EXISTS public.rv_pl_repl() CASCADE;
DROP FUNCTION IF EXISTS public.rv_pl_outer(int) CASCADE;
DROP FUNCTION IF EXISTS public.rv_pl_outer(text) CASCADE;

CREATE SEQUENCE public.rv_seq_write;
CREATE SEQUENCE public.rv_seq_lv;
GRANT ALL ON SEQUENCE public.rv_seq_write, public.rv_seq_lv TO PUBLIC;

-- A plain VOLATILE SQL function over pg_stat_replication: pgowl finds this one (control).
CREATE FUNCTION public.rv_volatile_repl() RETURNS bigint LANGUAGE sql VOLATILE
  AS 'SELECT count(*) FROM pg_catalog.pg_stat_replication';

-- The same body, declared STABLE (the natural volatility of a reporting function).
CREATE FUNCTION public.rv_stable_repl() RETURNS bigint LANGUAGE sql STABLE
  AS 'SELECT count(*) FROM pg_catalog.pg_stat_replication';

-- A STABLE function that calls nextval: PostgreSQL allows it (only INSERT/UPDATE/... statements
-- are refused in non-volatile functions), a standby refuses nextval.
CREATE FUNCTION public.rv_stable_nextval() RETURNS bigint LANGUAGE sql STABLE
  AS $$SELECT nextval('public.rv_seq_write')$$;

-- Shadowing: rv_stats.rv_report reads node-local statistics, public.rv_report does not.
CREATE SCHEMA rv_stats;
GRANT USAGE ON SCHEMA rv_stats TO PUBLIC;
CREATE FUNCTION rv_stats.rv_report() RETURNS bigint LANGUAGE sql VOLATILE
  AS 'SELECT count(*) FROM pg_catalog.pg_stat_replication';
CREATE FUNCTION public.rv_report() RETURNS bigint LANGUAGE sql VOLATILE
  AS 'SELECT 0::bigint';

-- rv_inner has no search_path of its own: called from rv_outer, it runs with rv_outer's
-- SET search_path (a function's SET clause lasts until it returns, nested calls included).
CREATE FUNCTION public.rv_inner() RETURNS bigint LANGUAGE sql VOLATILE
  AS 'SELECT rv_report()';
CREATE FUNCTION public.rv_outer() RETURNS bigint LANGUAGE sql VOLATILE
  SET search_path = rv_stats, public
  AS 'SELECT public.rv_inner()';

-- Attribute notation: r.rv_repl_of is rv_repl_of(r).
CREATE TABLE public.rv_one_row (id int);
INSERT INTO public.rv_one_row VALUES (1);
GRANT SELECT ON public.rv_one_row TO PUBLIC;
CREATE FUNCTION public.rv_repl_of(r public.rv_one_row) RETURNS bigint LANGUAGE sql VOLATILE
  AS 'SELECT count(*) FROM pg_catalog.pg_stat_replication';

-- A user-defined operator whose function reads node-local statistics.
CREATE FUNCTION public.rv_op_repl(a integer, b integer) RETURNS bigint LANGUAGE sql VOLATILE
  AS 'SELECT count(*) FROM pg_catalog.pg_stat_replication';
CREATE OPERATOR public.### (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.rv_op_repl);

-- Parameter defaults run in the caller: an omitted argument evaluates them.
CREATE FUNCTION public.rv_defarg(n bigint DEFAULT public.rv_volatile_repl()) RETURNS bigint
  LANGUAGE sql IMMUTABLE AS 'SELECT n';
CREATE FUNCTION public.rv_defarg_write(n bigint DEFAULT nextval('public.rv_seq_write')) RETURNS bigint
  LANGUAGE sql IMMUTABLE AS 'SELECT n';

-- Views over views, PL/pgSQL through another function, overloads with different effects.
CREATE VIEW public.rv_v1 AS SELECT count(*) AS n FROM pg_catalog.pg_stat_replication;
CREATE VIEW public.rv_v2 AS SELECT n FROM public.rv_v1;
GRANT SELECT ON public.rv_v1, public.rv_v2 TO PUBLIC;
CREATE FUNCTION public.rv_pl_repl() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE n bigint; BEGIN SELECT public.rv_volatile_repl() INTO n; RETURN n; END $$;
CREATE FUNCTION public.rv_pl_outer(x int) RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 0::bigint';
CREATE FUNCTION public.rv_pl_outer(x text) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
BEGIN RETURN (SELECT count(*) FROM pg_catalog.pg_stat_replication); END $$;

-- Overloads: 3000000000 is a bigint constant to PostgreSQL (an integer too large for integer).
CREATE FUNCTION public.rv_big(n bigint) RETURNS bigint LANGUAGE sql VOLATILE
  AS 'SELECT count(*) FROM pg_catalog.pg_stat_replication';
CREATE FUNCTION public.rv_big(n numeric) RETURNS bigint LANGUAGE sql VOLATILE
  AS 'SELECT 0::bigint';
`

// rvSetup creates the review objects on the primary, waits for the standbys and starts pgowl.
func rvSetup(t *testing.T) (*cluster.Cluster, *owl) {
	t.Helper()
	return setupAndStart(t, "review objects", rvSetupSQL, nil)
}

// setupAndStart runs setup SQL on the shared cluster's primary, waits for the
// standbys to replay it and starts pgowl (configured by mutate, if not nil).
func setupAndStart(t *testing.T, what, setupSQL string, mutate func(*config.Config)) (*cluster.Cluster, *owl) {
	t.Helper()
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, setupSQL); err != nil {
		t.Fatalf("set up %s: %v", what, err)
	}
	catchUp(t, c)
	return c, startOwl(t, c, mutate)
}

// rvConnect opens a simple-protocol connection: one routed unit per query.
func rvConnect(t *testing.T, o *owl) *client {
	t.Helper()
	conn := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	conn.routes(t) // forget startup notices
	return conn
}

// rvWalSenders is what the primary itself says about pg_stat_replication.
func rvWalSenders(t *testing.T, c *cluster.Cluster) int64 {
	t.Helper()
	n := primaryInt(t, c, "SELECT count(*) FROM pg_catalog.pg_stat_replication")
	if n < 1 {
		t.Fatalf("the primary has %d walsenders; the shared cluster should have one per standby", n)
	}
	return n
}

// rvNodeLocal runs sql (one bigint) through pgowl and requires the primary's answer, want, and a
// NOTICE naming the primary.
func rvNodeLocal(t *testing.T, conn *client, sql string, want int64) {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	var got int64
	err := conn.QueryRow(ctx, sql).Scan(&got)
	r := conn.oneRoute(t, sql)
	if err != nil {
		t.Errorf("%s: %v (ran on %v)", sql, err, r)
		return
	}
	if got != want || r.Role != "primary" {
		t.Errorf("%s: answered %d on %v; the primary answers %d (pg_stat_replication is node-local: it must run on the primary)",
			sql, got, r, want)
	}
}

// TestRoutingNodeLocalControl is the control for the node-local tests below: the same
// body in a VOLATILE function is found, and the primary answers. Guards the answer (not only the
// route) of a user function over pg_stat_replication.
func TestRoutingNodeLocalControl(t *testing.T) {
	c, o := rvSetup(t)
	conn := rvConnect(t, o)
	want := rvWalSenders(t, c)
	rvNodeLocal(t, conn, "SELECT public.rv_volatile_repl()", want)
	// Session-level SET search_path, then the shadowing name in its own statement: followed.
	ctx := timeoutCtx(t, statementTimeout)
	if _, err := conn.Exec(ctx, "SET search_path = rv_stats, public"); err != nil {
		t.Fatalf("SET search_path: %v", err)
	}
	conn.routes(t)
	rvNodeLocal(t, conn, "SELECT rv_report()", want)
}

// TestRoutingMultiStatementSetSearchPath: in one simple Query, a SET search_path changes
// what the next statement's unqualified name means; pgowl classifies every statement of the
// string with the path from before the string.
func TestRoutingMultiStatementSetSearchPath(t *testing.T) {
	c, o := rvSetup(t)
	conn := rvConnect(t, o)
	want := rvWalSenders(t, c)
	sql := "SET search_path = rv_stats, public; SELECT rv_report()"
	ctx := timeoutCtx(t, statementTimeout)
	results, err := conn.PgConn().Exec(ctx, sql).ReadAll()
	r := conn.oneRoute(t, sql)
	if err != nil {
		t.Fatalf("%s: %v (ran on %v)", sql, err, r)
	}
	if len(results) != 2 || len(results[1].Rows) != 1 {
		t.Fatalf("%s: unexpected results %+v", sql, results)
	}
	got := string(results[1].Rows[0][0])
	if got != strconv.FormatInt(want, 10) || r.Role != "primary" {
		t.Errorf("%s: answered %s on %v; the primary answers %d (rv_stats.rv_report reads pg_stat_replication)", sql, got, r, want)
	}
}

// TestRoutingSequenceLastValue: a standby's copy of a sequence is WAL-logged ahead of the
// primary's (by up to 32 values), so its last_value is not the primary's.
func TestRoutingSequenceLastValue(t *testing.T) {
	c, o := rvSetup(t)
	conn := rvConnect(t, o)
	want := primaryInt(t, c, "SELECT nextval('public.rv_seq_lv')")
	catchUp(t, c)
	if direct := primaryInt(t, c, "SELECT last_value FROM public.rv_seq_lv"); direct != want {
		t.Fatalf("primary last_value %d, want %d", direct, want)
	}
	for _, sql := range []string{
		"SELECT last_value FROM public.rv_seq_lv",
		"SELECT last_value FROM pg_catalog.pg_sequences WHERE schemaname = 'public' AND sequencename = 'rv_seq_lv'",
	} {
		ctx := timeoutCtx(t, statementTimeout)
		var got int64
		err := conn.QueryRow(ctx, sql).Scan(&got)
		r := conn.oneRoute(t, sql)
		if err != nil {
			t.Errorf("%s: %v (ran on %v)", sql, err, r)
			continue
		}
		if got != want {
			t.Errorf("%s: answered %d on %v; the primary's last_value is %d", sql, got, r, want)
		}
	}
}

// TestRoutingIsInRecovery: the questions a client asks to learn which kind of server it
// reached (pg_is_in_recovery(), SHOW transaction_read_only, in_hot_standby, pg_settings) were
// answered by a standby, which said "standby" although pgowl's writes reach the primary and its
// startup ParameterStatus says in_hot_standby off. The primary answers them now, with
// NODE_LOCAL_STATS.
func TestRoutingIsInRecovery(t *testing.T) {
	_, o := rvSetup(t)
	conn := rvConnect(t, o)
	ctx := timeoutCtx(t, statementTimeout)
	for _, probe := range []struct{ sql, want string }{
		{"SELECT pg_is_in_recovery()::text", "false"},
		{"SHOW transaction_read_only", "off"},
		{"SHOW in_hot_standby", "off"},
		{"SELECT current_setting('transaction_read_only')", "off"},
		{"SELECT setting FROM pg_settings WHERE name = 'in_hot_standby'", "off"},
		{"SELECT (pg_last_wal_replay_lsn() IS NULL)::text", "true"},
	} {
		for i := range 3 { // a standby would be chosen every time, whichever it is
			var got string
			err := conn.QueryRow(ctx, probe.sql).Scan(&got)
			r := conn.oneRoute(t, probe.sql)
			if err != nil {
				t.Fatalf("%s: %v", probe.sql, err)
			}
			if got != probe.want {
				t.Errorf("%s (attempt %d): answered %s on %v; the primary answers %s", probe.sql, i+1, got, r, probe.want)
			}
			wantRoute(t, probe.sql, r, "primary", "NODE_LOCAL_STATS")
		}
	}
}

// rvMustRun runs a statement that must work (on the primary) and reports where it failed.
func rvMustRun(t *testing.T, conn *client, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got int64
	err := conn.QueryRow(ctx, sql).Scan(&got)
	r := conn.oneRoute(t, sql)
	if err != nil {
		t.Errorf("%s: failed on %v: %v (it works on the primary)", sql, r, err)
		return
	}
	if r.Role != "primary" {
		t.Errorf("%s: ran on %v, want the primary", sql, r)
	}
}

// TestRoutingStableFunctionCallsNextval: a STABLE function that calls nextval is a read to
// pgowl; the standby refuses nextval.
func TestRoutingStableFunctionCallsNextval(t *testing.T) {
	_, o := rvSetup(t)
	conn := rvConnect(t, o)
	rvMustRun(t, conn, "SELECT public.rv_stable_nextval()")
}

// TestRoutingParameterDefaultWrites: the omitted argument's DEFAULT nextval(...) runs in the
// caller; the IMMUTABLE function's body reads, so pgowl sends the call to a standby.
func TestRoutingParameterDefaultWrites(t *testing.T) {
	_, o := rvSetup(t)
	conn := rvConnect(t, o)
	rvMustRun(t, conn, "SELECT public.rv_defarg_write()")
}

// TestRoutingNodeLocalShapes: shapes that pgowl handles (they pass); kept as answer checks
// (the primary's count of walsenders), which the golden tables only check as routes.
func TestRoutingNodeLocalShapes(t *testing.T) {
	c, o := rvSetup(t)
	conn := rvConnect(t, o)
	want := rvWalSenders(t, c)
	for _, sql := range []string{
		"SELECT n FROM public.rv_v2",
		"SELECT x.n FROM (VALUES (1)) v(a), LATERAL (SELECT n FROM public.rv_v2) x",
		"SELECT (SELECT n FROM public.rv_v2 WHERE EXISTS (SELECT 1 FROM public.rv_v1))",
		"WITH w AS (SELECT public.rv_pl_repl() AS n) SELECT n FROM w",
		"SELECT f FROM public.rv_pl_repl() AS f",
		"SELECT public.rv_pl_outer('x')",
		"SELECT public.rv_pl_outer('x'::text)",
		`SELECT "public"."rv_volatile_repl"()`,
	} {
		rvNodeLocal(t, conn, sql, want)
	}
}

// TestRoutingNodeLocalExtendedAndCopy: the extended protocol with a typed parameter choosing
// the node-local overload, and COPY (SELECT ...) TO STDOUT over a view of a view (pass; answer checks).
func TestRoutingNodeLocalExtendedAndCopy(t *testing.T) {
	c, o := rvSetup(t)
	want := rvWalSenders(t, c)
	conn := o.connect(t, nil) // pgx's default: prepared statements (Parse with types)
	conn.routes(t)
	ctx := timeoutCtx(t, statementTimeout)
	var got int64
	if err := conn.QueryRow(ctx, "SELECT public.rv_pl_outer($1::text)", "x").Scan(&got); err != nil {
		t.Fatalf("extended: %v", err)
	}
	rs := conn.routes(t)
	if got != want || len(rs) == 0 || rs[len(rs)-1].Role != "primary" {
		t.Errorf("extended rv_pl_outer($1::text): answered %d on %v; the primary answers %d", got, rs, want)
	}
	var out strings.Builder
	sconn := rvConnect(t, o)
	if _, err := sconn.PgConn().CopyTo(ctx, &out, "COPY (SELECT n FROM public.rv_v2) TO STDOUT"); err != nil {
		t.Fatalf("copy: %v", err)
	}
	r := sconn.oneRoute(t, "copy")
	if strings.TrimSpace(out.String()) != strconv.FormatInt(want, 10) || r.Role != "primary" {
		t.Errorf("COPY (SELECT n FROM rv_v2) TO STDOUT: answered %q on %v; the primary answers %d", out.String(), r, want)
	}
}

// TestRoutingNodeLocalCalls: statements that reach pg_stat_replication
// in ways the classifier must follow; each must run on the primary and give
// its answer (a standby has no walsenders). A case with a skip reason is a
// known gap, parked until fixed.
func TestRoutingNodeLocalCalls(t *testing.T) {
	c, o := rvSetup(t)
	conn := rvConnect(t, o)
	want := rvWalSenders(t, c)
	for _, tc := range []struct{ name, sql, skip string }{
		// a STABLE function over pg_stat_replication
		// is trusted to "only read" and goes to a standby, which has no walsenders.
		{name: "StableFunctionReadsNodeLocalStats", sql: "SELECT public.rv_stable_repl()"},
		// rv_outer() SET search_path = rv_stats, public
		// calls rv_inner(), whose unqualified rv_report() PostgreSQL resolves with rv_outer's path
		// (rv_stats.rv_report, node-local); pgowl resolves it with the session's (public.rv_report).
		{name: "NestedFunctionInheritsSearchPath", sql: "SELECT public.rv_outer()"},
		// r.rv_repl_of is PostgreSQL's functional notation for
		// rv_repl_of(r); the parse tree holds a column reference, not a function call.
		{name: "AttributeNotationCall", sql: "SELECT r.rv_repl_of FROM public.rv_one_row r"},
		// a user-defined operator runs its function; the parse tree
		// holds an A_Expr, not a function call.
		{name: "OperatorFunction", sql: "SELECT 1 ### 2"},
		// an omitted argument evaluates the parameter's DEFAULT in the
		// caller; rv_defarg's default calls rv_volatile_repl() (node-local).
		{name: "ParameterDefault", sql: "SELECT public.rv_defarg()"},
		// PostgreSQL types 3000000000 as bigint and runs
		// rv_big(bigint) (node-local); pgowl takes the literal for numeric and picks rv_big(numeric).
		{name: "BigintLiteralOverload", sql: "SELECT public.rv_big(3000000000)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip != "" {
				t.Skip(tc.skip)
			}
			rvNodeLocal(t, conn, tc.sql, want)
		})
	}
}
