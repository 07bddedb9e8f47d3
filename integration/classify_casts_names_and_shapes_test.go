package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
)

// Review 3: functions that operators, casts and attribute notation run (commit cb0dddb), and the
// questions about which kind of server answered (commit 286cc0b).
//
// Every object is named r3_* (or lives in the schemas r3eq / r3s) and is created directly on the
// primary as the superuser before pgowl starts, so that pgowl's first catalogue load sees it. The
// node-local functions read pg_stat_replication: the primary of the shared cluster has one
// walsender per standby (2), a standby has none (0), so a statement that ran on a standby answers
// differently from the primary.

const r3SetupSQL = `
DROP SCHEMA IF EXISTS r3eq CASCADE;
DROP SCHEMA IF EXISTS r3s CASCADE;
DROP VIEW IF EXISTS public.r3_opview, public.r3_castview, public.r3_attrview, public.r3_tabview,
  public.r3_settings_view CASCADE;
DROP TABLE IF EXISTS public.r3_tab, public.r3_holder CASCADE;
DROP TYPE IF EXISTS public.r3_wrap CASCADE;
DROP DOMAIN IF EXISTS public.r3_boxdom CASCADE;
DROP DOMAIN IF EXISTS public.r3_intdom CASCADE;
DROP TYPE IF EXISTS public.r3_box CASCADE;
DROP TYPE IF EXISTS public.r3_num CASCADE;
DROP TYPE IF EXISTS public.r3_late CASCADE;
DROP TYPE IF EXISTS public.r3_pair CASCADE;
DROP OPERATOR IF EXISTS public.#%# (integer, integer) CASCADE;
DROP OPERATOR IF EXISTS public.#%# (NONE, integer) CASCADE;
DROP OPERATOR IF EXISTS public.#@# (integer, integer) CASCADE;
DROP OPERATOR IF EXISTS public.#=# (integer, integer) CASCADE;
DROP OPERATOR IF EXISTS public.#!# (integer, integer) CASCADE;
DROP OPERATOR IF EXISTS public.#^# (integer, integer) CASCADE;
DROP OPERATOR IF EXISTS public.@#@ (NONE, text) CASCADE;

CREATE TABLE public.r3_tab (id int);
INSERT INTO public.r3_tab VALUES (1);
GRANT SELECT ON public.r3_tab TO PUBLIC;

-- Node-local operators: #%# answers the number of walsenders, #@# whether there is one.
CREATE OR REPLACE FUNCTION public.r3_repl2(a integer, b integer) RETURNS bigint LANGUAGE sql VOLATILE
  AS 'SELECT count(*) FROM pg_catalog.pg_stat_replication';
CREATE OR REPLACE FUNCTION public.r3_repl1(a integer) RETURNS bigint LANGUAGE sql VOLATILE
  AS 'SELECT count(*) FROM pg_catalog.pg_stat_replication';
CREATE OR REPLACE FUNCTION public.r3_repl_bool(a integer, b integer) RETURNS boolean LANGUAGE sql VOLATILE
  AS 'SELECT count(*) > 0 FROM pg_catalog.pg_stat_replication';
CREATE OPERATOR public.#%# (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.r3_repl2);
CREATE OPERATOR public.#%# (RIGHTARG = integer, FUNCTION = public.r3_repl1);
CREATE OPERATOR public.#@# (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.r3_repl_bool);

-- #=# only compares (PL/pgSQL, so it is never inlined); its NEGATOR #!# reads node-local state.
CREATE OR REPLACE FUNCTION public.r3_plain_eq(a integer, b integer) RETURNS boolean LANGUAGE plpgsql VOLATILE
  AS 'BEGIN RETURN a = b; END';
CREATE OR REPLACE FUNCTION public.r3_repl_ne(a integer, b integer) RETURNS boolean LANGUAGE sql VOLATILE
  AS 'SELECT count(*) = 0 FROM pg_catalog.pg_stat_replication';
CREATE OPERATOR public.#=# (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.r3_plain_eq, NEGATOR = #!#);
CREATE OPERATOR public.#!# (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.r3_repl_ne, NEGATOR = #=#);

-- A prefix operator whose function is pg_catalog.current_setting.
CREATE OPERATOR public.@#@ (RIGHTARG = text, FUNCTION = pg_catalog.current_setting);

-- Casts: int -> r3_box runs r3_box_of, which reads node-local state.
CREATE TYPE public.r3_box AS (v bigint);
CREATE OR REPLACE FUNCTION public.r3_box_of(n integer) RETURNS public.r3_box LANGUAGE sql VOLATILE
  AS 'SELECT ROW(count(*))::public.r3_box FROM pg_catalog.pg_stat_replication';
CREATE CAST (integer AS public.r3_box) WITH FUNCTION public.r3_box_of(integer);
CREATE DOMAIN public.r3_boxdom AS public.r3_box;
CREATE DOMAIN public.r3_intdom AS integer;
CREATE TYPE public.r3_wrap AS (b public.r3_box);

-- Two casts to r3_num: from integer it only reads, from bigint it reads node-local state.
CREATE TYPE public.r3_num AS (v bigint);
CREATE OR REPLACE FUNCTION public.r3_num_small(n integer) RETURNS public.r3_num LANGUAGE sql VOLATILE
  AS 'SELECT ROW(-1)::public.r3_num';
CREATE OR REPLACE FUNCTION public.r3_num_big(n bigint) RETURNS public.r3_num LANGUAGE sql VOLATILE
  AS 'SELECT ROW(count(*))::public.r3_num FROM pg_catalog.pg_stat_replication';
CREATE CAST (integer AS public.r3_num) WITH FUNCTION public.r3_num_small(integer);
CREATE CAST (bigint AS public.r3_num) WITH FUNCTION public.r3_num_big(bigint);

-- Function overloads that differ the same way.
CREATE OR REPLACE FUNCTION public.r3_ov(n integer) RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT -1::bigint';
CREATE OR REPLACE FUNCTION public.r3_ov(n bigint) RETURNS bigint LANGUAGE sql VOLATILE
  AS 'SELECT count(*) FROM pg_catalog.pg_stat_replication';

-- A type owned by the app user, so that it can CREATE CAST to it through pgowl.
CREATE TYPE public.r3_late AS (v bigint);
ALTER TYPE public.r3_late OWNER TO app;
CREATE OR REPLACE FUNCTION public.r3_late_of(n integer) RETURNS public.r3_late LANGUAGE sql VOLATILE
  AS 'SELECT ROW(count(*))::public.r3_late FROM pg_catalog.pg_stat_replication';

-- Attribute notation on a composite type made by CREATE TYPE, and on a table's row.
CREATE TYPE public.r3_pair AS (a int, b int);
CREATE OR REPLACE FUNCTION public.r3_pair_repl(p public.r3_pair) RETURNS bigint LANGUAGE sql VOLATILE
  AS 'SELECT count(*) FROM pg_catalog.pg_stat_replication';
CREATE TABLE public.r3_holder (p public.r3_pair);
INSERT INTO public.r3_holder VALUES (ROW(1, 2));
GRANT SELECT ON public.r3_holder TO PUBLIC;
CREATE OR REPLACE FUNCTION public.r3_tab_repl(t public.r3_tab) RETURNS bigint LANGUAGE sql VOLATILE
  AS 'SELECT count(*) FROM pg_catalog.pg_stat_replication';
CREATE VIEW public.r3_tabview AS SELECT id FROM public.r3_tab;
CREATE OR REPLACE FUNCTION public.r3_view_repl(v public.r3_tabview) RETURNS bigint LANGUAGE sql VOLATILE
  AS 'SELECT count(*) FROM pg_catalog.pg_stat_replication';

-- Views that run the functions only through an operator, a cast or attribute notation.
CREATE VIEW public.r3_opview AS SELECT id #%# 1 AS n FROM public.r3_tab;
CREATE VIEW public.r3_castview AS SELECT (id::public.r3_box).v AS n FROM public.r3_tab;
CREATE VIEW public.r3_attrview AS SELECT t.r3_tab_repl AS n FROM public.r3_tab t;
CREATE VIEW public.r3_settings_view AS SELECT name, setting FROM pg_catalog.pg_settings;
GRANT SELECT ON public.r3_tabview, public.r3_opview, public.r3_castview, public.r3_attrview,
  public.r3_settings_view TO PUBLIC;

-- Function bodies that run them the same way.
CREATE OR REPLACE FUNCTION public.r3_sql_op() RETURNS bigint LANGUAGE sql STABLE AS 'SELECT 1 #%# 2';
CREATE OR REPLACE FUNCTION public.r3_atomic_op() RETURNS bigint LANGUAGE sql STABLE
  BEGIN ATOMIC SELECT 1 #%# 2; END;
CREATE OR REPLACE FUNCTION public.r3_pl_if() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
BEGIN IF 1 #@# 2 THEN RETURN 2; END IF; RETURN 0; END $$;
CREATE OR REPLACE FUNCTION public.r3_pl_cast() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE b public.r3_box; BEGIN b := 5::public.r3_box; RETURN b.v; END $$;
CREATE OR REPLACE FUNCTION public.r3_pl_attr() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE n bigint; BEGIN SELECT t.r3_tab_repl INTO n FROM public.r3_tab t; RETURN n; END $$;
CREATE OR REPLACE FUNCTION public.r3_pl_perform() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE n bigint; BEGIN n := 7 #%# 8; RETURN n; END $$;
CREATE OR REPLACE FUNCTION public.r3_is_standby() RETURNS boolean LANGUAGE sql STABLE
  AS 'SELECT pg_catalog.pg_is_in_recovery()';

-- A schema that is only on the path when the session puts it there.
CREATE SCHEMA r3s;
GRANT USAGE ON SCHEMA r3s TO PUBLIC;
CREATE OPERATOR r3s.#~# (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.r3_repl2);
CREATE FUNCTION r3s.r3s_tab_repl(t public.r3_tab) RETURNS bigint LANGUAGE sql VOLATILE
  AS 'SELECT count(*) FROM pg_catalog.pg_stat_replication';

-- An enum with an equality operator of its own, in a schema only one session puts on its path.
CREATE SCHEMA r3eq;
GRANT USAGE ON SCHEMA r3eq TO PUBLIC;
CREATE TYPE r3eq.r3_color AS ENUM ('red', 'blue');
CREATE FUNCTION r3eq.r3_color_eq(a r3eq.r3_color, b r3eq.r3_color) RETURNS boolean LANGUAGE sql VOLATILE
  AS 'SELECT count(*) > 0 FROM pg_catalog.pg_stat_replication';
CREATE OPERATOR r3eq.= (LEFTARG = r3eq.r3_color, RIGHTARG = r3eq.r3_color, FUNCTION = r3eq.r3_color_eq);
`

// r3Setup creates the review objects on the primary, waits for the standbys and starts pgowl with a
// long catalogue refresh interval (so that only DDL through pgowl reloads it during a test).
func r3Setup(t *testing.T) (*cluster.Cluster, *owl) {
	t.Helper()
	return setupAndStart(t, "review 3 objects", r3SetupSQL, func(cfg *config.Config) { cfg.Classify.RefreshInterval = 10 * time.Minute })
}

// r3Value runs a one-value query and renders the value as text.
func r3Value(ctx context.Context, row pgx.Row) (string, error) {
	var v any
	if err := row.Scan(&v); err != nil {
		return "", err
	}
	return fmt.Sprint(v), nil
}

// r3Direct is a node's own answer to sql, as the superuser.
func r3Direct(t *testing.T, n *cluster.Node, sql string) string {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	got, err := r3Value(ctx, n.QueryRow(ctx, sql))
	if err != nil {
		return "error: " + err.Error()
	}
	return got
}

// r3Primary requires sql through pgowl to give the primary's answer and to run on the primary; it
// shows what a standby answers, which is what pgowl answers when it sends the statement there.
func r3Primary(t *testing.T, c *cluster.Cluster, conn *client, sql string) {
	t.Helper()
	want := r3Direct(t, c.Nodes[0], sql)
	standby := r3Direct(t, c.Nodes[1], sql)
	if want == standby {
		t.Fatalf("%s: the primary and a standby both answer %q: the case shows nothing", sql, want)
	}
	ctx := timeoutCtx(t, statementTimeout)
	got, err := r3Value(ctx, conn.QueryRow(ctx, sql))
	r := conn.oneRoute(t, sql)
	if err != nil {
		t.Errorf("%s: %v (ran on %v); the primary answers %s", sql, err, r, want)
		return
	}
	if got != want || r.Role != "primary" {
		t.Errorf("%s: answered %s on %v; the primary answers %s (a standby %s)", sql, got, r, want, standby)
	}
}

// r3Exec runs a statement through pgowl that must succeed.
func r3Exec(t *testing.T, conn *client, sql string) {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	conn.routes(t)
}

// TestClassifyImplicitCallsFollowed: shapes the change handles (pass). Each statement reaches
// pg_stat_replication only through an operator, a cast or attribute notation, in a clause, a view
// or a function body; each must run on the primary and give its answer.
func TestClassifyImplicitCallsFollowed(t *testing.T) {
	c, o := r3Setup(t)
	conn := rvConnect(t, o)
	for _, sql := range []string{
		// operators
		"SELECT 1 #%# 2",
		"SELECT 1 OPERATOR(public.#%#) 2",
		"SELECT #%# 5",
		"SELECT count(*) FROM public.r3_tab a JOIN public.r3_tab b ON a.id #@# b.id",
		"SELECT CASE WHEN id #@# 1 THEN 'hit' ELSE 'miss' END FROM public.r3_tab",
		"SELECT max(id #%# 1) OVER (ORDER BY id) FROM public.r3_tab",
		"SELECT id #%# 1 FROM public.r3_tab GROUP BY id #%# 1",
		"SELECT count(*) FROM public.r3_tab WHERE id #@# ANY (ARRAY[1])",
		"SELECT count(*) FROM public.r3_tab WHERE id #@# ANY (SELECT 1)",
		"SELECT count(*) FROM public.r3_tab WHERE id #@# 1 OR false",
		// casts
		"SELECT (5::public.r3_box).v",
		"SELECT (CAST(5 AS public.r3_box)).v",
		"SELECT (id::public.r3_box).v FROM public.r3_tab",
		"SELECT (3000000000::public.r3_num).v AS big_alone",
		// attribute notation
		"SELECT t.r3_tab_repl FROM public.r3_tab t",
		"SELECT (t).r3_tab_repl FROM public.r3_tab t",
		"SELECT public.r3_tab.r3_tab_repl FROM public.r3_tab",
		"SELECT s.r3_tab_repl FROM (SELECT * FROM public.r3_tab) s",
		"SELECT v.r3_view_repl FROM public.r3_tabview v",
		// views
		"SELECT n FROM public.r3_opview",
		"SELECT n FROM public.r3_castview",
		"SELECT n FROM public.r3_attrview",
		// function bodies
		"SELECT public.r3_sql_op()",
		"SELECT public.r3_atomic_op()",
		"SELECT public.r3_pl_if()",
		"SELECT public.r3_pl_cast()",
		"SELECT public.r3_pl_attr()",
		"SELECT public.r3_pl_perform()",
	} {
		r3Primary(t, c, conn, sql)
	}
}

// TestClassifySearchPathSchema: an operator and a row function in a schema the session puts on its
// search_path with SET (pass).
func TestClassifySearchPathSchema(t *testing.T) {
	c, o := r3Setup(t)
	conn := rvConnect(t, o)
	r3Exec(t, conn, "SET search_path = r3s, public")
	// Directly on the nodes the operator needs the schema too: qualify it there.
	for _, tc := range []struct{ sql, direct string }{
		{"SELECT 1 #~# 2", "SELECT 1 OPERATOR(r3s.#~#) 2"},
		{"SELECT t.r3s_tab_repl FROM public.r3_tab t", "SELECT r3s.r3s_tab_repl(t) FROM public.r3_tab t"},
	} {
		want := r3Direct(t, c.Nodes[0], tc.direct)
		ctx := timeoutCtx(t, statementTimeout)
		got, err := r3Value(ctx, conn.QueryRow(ctx, tc.sql))
		r := conn.oneRoute(t, tc.sql)
		if err != nil || got != want || r.Role != "primary" {
			t.Errorf("%s (search_path r3s, public): answered %s (%v) on %v; the primary answers %s", tc.sql, got, err, r, want)
		}
	}
}

// TestClassifyCastToDomain: a cast to a domain runs the cast to the domain's base type.
//
// BUG. PostgreSQL's find_coercion_pathway looks at the base types of domains ("Perhaps the types
// are domains; if so, look at their base types"), so 5::r3_boxdom runs the cast integer -> r3_box
// (r3_box_of, which reads pg_stat_replication) and then checks the domain. pgowl looks for casts
// to the domain's own OID only (castsTo[target] in resolveCast, classify/implicit.go), finds none,
// calls it a read and sends it to a standby, which answers 0 where the primary answers 2.
func TestClassifyCastToDomain(t *testing.T) {
	c, o := r3Setup(t)
	conn := rvConnect(t, o)
	r3Primary(t, c, conn, "SELECT (5::public.r3_boxdom).v")
}

// TestClassifyCastFromDomain: a cast from a value of a domain runs the cast from its base type.
//
// BUG. (5::r3_intdom)::r3_box runs the cast integer -> r3_box (the source domain's base type is
// integer). pgowl takes the source type as evident and exact (r3_intdom), keeps only casts whose
// castsource is the domain's OID (resolveCast: c.Source != source.oid), finds none, and sends the
// statement to a standby.
func TestClassifyCastFromDomain(t *testing.T) {
	c, o := r3Setup(t)
	conn := rvConnect(t, o)
	r3Primary(t, c, conn, "SELECT ((5::public.r3_intdom)::public.r3_box).v")
}

// TestClassifyCastToArray: a cast between array types runs the element cast for every element.
//
// BUG. ARRAY[5]::r3_box[] is an array coercion (COERCION_PATH_ARRAYCOERCE) that runs the cast
// integer -> r3_box on each element. typeOID resolves r3_box[] to the array type _r3_box, and
// pg_cast has no cast to the array type itself, so resolveCast finds no candidate: a read, run on
// a standby.
func TestClassifyCastToArray(t *testing.T) {
	c, o := r3Setup(t)
	conn := rvConnect(t, o)
	r3Primary(t, c, conn, "SELECT ((ARRAY[5]::public.r3_box[])[1]).v")
}

// TestClassifyRowCastConvertsFields: ROW(...)::t converts each field to the column's type, with
// the cast's context, so a field may run a user cast.
//
// BUG. resolveCast returns Read for every ROW(...)::t ("builds a row: no cast function runs"), but
// coerce_record_to_complex coerces each field with coerce_to_target_type in the explicit context:
// ROW(5)::r3_wrap (whose column b is r3_box) runs the cast integer -> r3_box on 5. The standby
// answers 0, the primary 2. Documented in docs/routing.md ("ROW(...) run[s] no cast function"),
// but the documentation is wrong about PostgreSQL.
func TestClassifyRowCastConvertsFields(t *testing.T) {
	c, o := r3Setup(t)
	conn := rvConnect(t, o)
	r3Primary(t, c, conn, "SELECT ((ROW(5)::public.r3_wrap).b).v")
}

// TestClassifyThreePartNames: PostgreSQL accepts database.schema.name for operators and types
// when the database is the current one (DeconstructQualifiedName).
//
// BUG (exotic). resolveOperator and typeOID give up on names of more than two parts and call the
// expression a read: OPERATOR(postgres.public.#%#) and ::postgres.public.r3_box run on a standby.
// Function calls with three-part names are resolved (functionNames accepts three parts).
func TestClassifyThreePartNames(t *testing.T) {
	c, o := r3Setup(t)
	conn := rvConnect(t, o)
	for _, tc := range []struct{ name, sql string }{
		{"Operator", "SELECT 1 OPERATOR(" + appDatabase + ".public.#%#) 2"},
		{"Cast", "SELECT (5::" + appDatabase + ".public.r3_box).v"},
	} {
		t.Run(tc.name, func(t *testing.T) { r3Primary(t, c, conn, tc.sql) })
	}
}

// TestClassifyAttributeOfCompositeType: attribute notation on a value of a composite type made by
// CREATE TYPE ... AS (...).
//
// BUG. rowFunctions (classify/catalogue.go NewCatalogue) only indexes functions whose argument is
// the row type of a relation the catalogue lists, and loadRelations (classify/catalog/load.go)
// reads relkinds r, v, m, f, p, S: not 'c', the relation behind a composite type. So r3_pair_repl
// (p r3_pair) is not a candidate for x.r3_pair_repl, and ('(1,2)'::r3_pair).r3_pair_repl or
// (h.p).r3_pair_repl (a column of that type) run on a standby. The same function called as
// r3_pair_repl(x) is found (control).
func TestClassifyAttributeOfCompositeType(t *testing.T) {
	c, o := r3Setup(t)
	conn := rvConnect(t, o)
	for _, tc := range []struct{ name, sql string }{
		{"Control", "SELECT public.r3_pair_repl('(1,2)')"},
		{"Literal", "SELECT ('(1,2)'::public.r3_pair).r3_pair_repl"},
		{"Column", "SELECT (h.p).r3_pair_repl FROM public.r3_holder h"},
	} {
		t.Run(tc.name, func(t *testing.T) { r3Primary(t, c, conn, tc.sql) })
	}
}

// TestClassifyShapeCacheCastLiteralSize: 5 and 3000000000 are both integer literals to the shape
// cache ("?i"), but PostgreSQL types the first integer and the second bigint, and resolveCast
// chooses the cast by that type.
//
// BUG. After SELECT (5::r3_num).v (the cast from integer only reads: a standby, correct), the
// statement SELECT (3000000000::r3_num).v has the same shape and gets the cached read verdict,
// although it runs the cast from bigint (r3_num_big, node-local): it answers 0 on a standby where
// the primary answers 2. Classified alone (a different shape, see TestClassifyImplicitCallsFollowed
// "big_alone") it goes to the primary. Cause: appendShape (classify/shape.go) does not keep
// integer literals that do not fit in integer apart from those that do, while evidence
// (classify/analysis.go) types them differently.
func TestClassifyShapeCacheCastLiteralSize(t *testing.T) {
	c, o := r3Setup(t)
	conn := rvConnect(t, o)
	ctx := timeoutCtx(t, statementTimeout)
	small := "SELECT (5::public.r3_num).v"
	if got, err := r3Value(ctx, conn.QueryRow(ctx, small)); err != nil || got != "-1" {
		t.Fatalf("%s: %q, %v", small, got, err)
	}
	conn.routes(t)
	r3Primary(t, c, conn, "SELECT (3000000000::public.r3_num).v")
}

// TestClassifyShapeCacheOverloadLiteralSize: the same with function overloads r3_ov(integer)
// (reads) and r3_ov(bigint) (node-local).
//
// BUG (older than these commits, same cause as TestClassifyShapeCacheCastLiteralSize): after
// SELECT public.r3_ov(5), SELECT public.r3_ov(3000000000) shares its shape and its read verdict.
func TestClassifyShapeCacheOverloadLiteralSize(t *testing.T) {
	c, o := r3Setup(t)
	conn := rvConnect(t, o)
	ctx := timeoutCtx(t, statementTimeout)
	// Control: classified on its own (another shape), the bigint call goes to the primary.
	r3Primary(t, c, conn, "SELECT public.r3_ov(3000000000) AS alone")
	small := "SELECT public.r3_ov(5)"
	if got, err := r3Value(ctx, conn.QueryRow(ctx, small)); err != nil || got != "-1" {
		t.Fatalf("%s: %q, %v", small, got, err)
	}
	conn.routes(t)
	r3Primary(t, c, conn, "SELECT public.r3_ov(3000000000)")
}

// TestClassifyCreateCastThroughPgowl: a cast created through pgowl must be seen by the next
// statement, as a function or an operator created through pgowl is.
//
// BUG. changesCatalogue (classify/analysis.go) lists CREATE FUNCTION, CREATE OPERATOR (DefineStmt),
// views, ... but not CreateCastStmt (nor DROP CAST / DROP OPERATOR, nor CREATE TYPE AS / CREATE
// DOMAIN), so CREATE CAST does not reload the catalogue. resolveCast, finding no cast to r3_late in
// the stale catalogue, calls 5::r3_late a read, and a standby answers 0 until the next periodic
// reload (classify.refresh_interval, 30 s by default). The operator case is the control (passes).
func TestClassifyCreateCastThroughPgowl(t *testing.T) {
	c, o := r3Setup(t)
	conn := rvConnect(t, o)
	// Use the catalogue once, so that it is loaded before the DDL.
	r3Primary(t, c, conn, "SELECT (public.r3_late_of(5)).v")
	t.Run("Operator", func(t *testing.T) {
		r3Exec(t, conn, "CREATE OPERATOR public.#^# (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.r3_repl2)")
		catchUp(t, c)
		r3Primary(t, c, conn, "SELECT 1 #^# 2")
	})
	t.Run("Cast", func(t *testing.T) {
		r3Exec(t, conn, "CREATE CAST (integer AS public.r3_late) WITH FUNCTION public.r3_late_of(integer)")
		catchUp(t, c)
		r3Primary(t, c, conn, "SELECT (5::public.r3_late).v")
	})
}

// TestClassifySimpleCaseUsesEquality: CASE x WHEN y compares with the = operator that x = y would
// use, here r3eq.= (r3_color, r3_color), whose function reads node-local state.
//
// BUG (borderline: docs/routing.md says operators that only apply implicitly are not seen, and
// names DISTINCT, GROUP BY, hash joins and index scans; the simple CASE is not among them). The
// raw parse tree of a simple CASE holds a CaseExpr with arg and a CaseWhen, no A_Expr, so visit
// (classify/scan.go) never resolves "=": a standby answers 'different', the primary 'same'. The
// control, CASE WHEN x = y, is found.
func TestClassifySimpleCaseUsesEquality(t *testing.T) {
	c, o := r3Setup(t)
	conn := rvConnect(t, o)
	r3Exec(t, conn, "SET search_path = r3eq, public")
	for _, tc := range []struct{ name, sql string }{
		{"Control", "SELECT CASE WHEN 'red'::r3_color = 'blue'::r3_color THEN 'same' ELSE 'different' END"},
		{"SimpleCase", "SELECT CASE 'red'::r3_color WHEN 'blue'::r3_color THEN 'same' ELSE 'different' END"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			direct := "SET search_path = r3eq, public; " // the nodes need the path too
			ctx := timeoutCtx(t, statementTimeout)
			want, standby := r3DirectWithPath(t, c.Nodes[0], direct, tc.sql), r3DirectWithPath(t, c.Nodes[1], direct, tc.sql)
			if want == standby {
				t.Fatalf("%s: primary and standby both answer %q", tc.sql, want)
			}
			got, err := r3Value(ctx, conn.QueryRow(ctx, tc.sql))
			r := conn.oneRoute(t, tc.sql)
			if err != nil || got != want || r.Role != "primary" {
				t.Errorf("%s: answered %s (%v) on %v; the primary answers %s (a standby %s)", tc.sql, got, err, r, want, standby)
			}
		})
	}
}

// r3DirectWithPath runs setup then sql on one connection to a node, as the superuser.
func r3DirectWithPath(t *testing.T, n *cluster.Node, setup, sql string) string {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	conn, err := n.Connect(ctx)
	if err != nil {
		t.Fatalf("connect to %s: %v", n.Name, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, setup); err != nil {
		t.Fatalf("%s: %v", setup, err)
	}
	got, err := r3Value(ctx, conn.QueryRow(ctx, sql))
	if err != nil {
		return "error: " + err.Error()
	}
	return got
}

// TestClassifyNegatorRuns: the planner replaces NOT (a op b) by a negop b when op declares a
// NEGATOR (eval_const_expressions -> negate_clause), and runs the negator's function.
//
// BUG (borderline, an implicit use like those docs/routing.md lists as not seen, but not among
// them). #=# only compares; its negator #!# reads pg_stat_replication. pgowl resolves the
// operator written (#=#: a read) and sends the statement to a standby, where #!# answers true;
// on the primary it answers false. The catalogue could load oprnegate along with oprcode.
func TestClassifyNegatorRuns(t *testing.T) {
	c, o := r3Setup(t)
	conn := rvConnect(t, o)
	r3Primary(t, c, conn, "SELECT (NOT (id #=# 2))::text FROM public.r3_tab")
}

// TestClassifyShapeCacheCurrentSettingEscaped: the shape cache keeps statements that mention
// current_setting apart, by looking for that text; a Unicode-escaped identifier names the same
// function without the text.
//
// BUG (exotic). SELECT U&"current\005fsetting"('work_mem') is a read and is cached by shape; the
// same shape with 'transaction_read_only' then gets that read verdict and runs on a standby, which
// answers 'on' where the primary (and pgowl's in_hot_standby off) says 'off'. Cause:
// mentionsSettingCall (classify/shape.go) scans the text, not the parsed names.
func TestClassifyShapeCacheCurrentSettingEscaped(t *testing.T) {
	c, o := r3Setup(t)
	conn := rvConnect(t, o)
	ctx := timeoutCtx(t, statementTimeout)
	// Control: on its own (another shape) the escaped name is resolved and goes to the primary.
	r3Primary(t, c, conn, `SELECT U&"current\005fsetting"('transaction_read_only') AS alone`)
	first := `SELECT U&"current\005fsetting"('work_mem')`
	if _, err := r3Value(ctx, conn.QueryRow(ctx, first)); err != nil {
		t.Fatalf("%s: %v", first, err)
	}
	conn.routes(t)
	r3Primary(t, c, conn, `SELECT U&"current\005fsetting"('transaction_read_only')`)
}

// TestClassifyServerKindQuestions: other spellings of the questions of commit 286cc0b (pass).
func TestClassifyServerKindQuestions(t *testing.T) {
	c, o := r3Setup(t)
	conn := rvConnect(t, o)
	for _, sql := range []string{
		"SELECT pg_catalog.pg_is_in_recovery()::text",
		"SELECT r::text FROM pg_catalog.pg_is_in_recovery() r",
		"SELECT public.r3_is_standby()::text",
		"SELECT setting FROM public.r3_settings_view WHERE name = 'transaction_read_only'",
		"SELECT current_setting('TRANSACTION_READ_ONLY')",
		"SELECT pg_catalog.current_setting('in_hot_standby', true)",
		"SELECT @#@ 'transaction_read_only'",
		"SELECT setting FROM pg_catalog.pg_show_all_settings() WHERE name = 'in_hot_standby'",
		"SELECT current_setting(name) FROM (VALUES ('transaction_read_only')) v(name)",
	} {
		r3Primary(t, c, conn, sql)
	}
	// SHOW in other cases and with a trailing semicolon (the fast path).
	ctx := timeoutCtx(t, statementTimeout)
	for _, sql := range []string{"show TRANSACTION_READ_ONLY;", "SHOW in_hot_standby ;", `SHOW "transaction_read_only"`} {
		got, err := r3Value(ctx, conn.QueryRow(ctx, sql))
		r := conn.oneRoute(t, sql)
		if err != nil || got != "off" || r.Role != "primary" {
			t.Errorf("%s: answered %s (%v) on %v; the primary answers off", sql, got, err, r)
		}
	}
	// Another setting still reads on a standby.
	got, err := r3Value(ctx, conn.QueryRow(ctx, "SELECT current_setting('work_mem')"))
	r := conn.oneRoute(t, "current_setting('work_mem')")
	if err != nil || r.Role != "standby" {
		t.Errorf("current_setting('work_mem'): %s (%v) on %v, want a standby", got, err, r)
	}
}

// TestClassifyLibpqTargetSessionAttrs: psql (libpq) with target_session_attrs. libpq decides from
// the in_hot_standby / default_transaction_read_only ParameterStatus when the server reports them,
// else it asks SHOW transaction_read_only / pg_is_in_recovery(). pgowl presents a read-write
// primary: read-write and primary connect, read-only and standby are refused (pass).
func TestClassifyLibpqTargetSessionAttrs(t *testing.T) {
	_, o := r3Setup(t)
	psql := pgBinary(t, "psql")
	for _, tc := range []struct {
		attrs   string
		connect bool
	}{
		{"read-write", true}, {"primary", true}, {"any", true}, {"prefer-standby", true},
		{"read-only", false}, {"standby", false},
	} {
		for i := range 3 {
			env := append(o.clientEnv(), "PGTARGETSESSIONATTRS="+tc.attrs)
			res := runCmd(t, 30*time.Second, env, psql, "-X", "-A", "-t", "-c", "SELECT 1")
			ok := res.exitCode == 0
			if ok != tc.connect {
				t.Errorf("target_session_attrs=%s attempt %d: exit %d, want connect=%v\nstdout: %s\nstderr: %s",
					tc.attrs, i+1, res.exitCode, tc.connect, res.stdout, res.stderr)
			}
		}
	}
}

// TestClassifyOddInput: odd implicit-call shapes must not break the session: pgowl answers
// or passes PostgreSQL's error on, and the connection keeps working (pass).
func TestClassifyOddInput(t *testing.T) {
	_, o := r3Setup(t)
	conn := rvConnect(t, o)
	for _, sql := range []string{
		"SELECT 1 OPERATOR(a.b.c.d.#%#) 2",
		"SELECT (1).f",
		`SELECT 1::"".""`,
		"SELECT x.y.z.w.v FROM public.r3_tab x",
		"SELECT ''::public.r3_box[][]",
		"SELECT (ROW(1, 2)).f1",
		"SELECT (t.*).r3_tab_repl FROM public.r3_tab t",
		"SELECT ((5::public.r3_box).*).v",
		"SELECT NULL::public.r3_box",
		"SELECT B'1'::public.r3_box",
		"SELECT 5 #%# #%# 6",
		"SELECT CAST(ARRAY[ROW(5)] AS public.r3_wrap[])",
	} {
		ctx := timeoutCtx(t, statementTimeout)
		rows, err := conn.Query(ctx, sql)
		if err == nil {
			for rows.Next() {
			}
			rows.Close()
			err = rows.Err()
		}
		conn.routes(t)
		if err != nil {
			if _, ok := asPgError(err); !ok {
				t.Errorf("%s: %v (not a PostgreSQL error)", sql, err)
			}
		}
		var one int
		if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Fatalf("after %s the session is broken: %v", sql, err)
		}
		conn.routes(t)
	}
}
