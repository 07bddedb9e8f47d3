package catalog_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
)

// A write runs code PostgreSQL adds to it: row security policies (a WITH CHECK that calls a
// function through an operator or reads a view, an UPDATE policy's USING on ON CONFLICT DO
// UPDATE and on MERGE), the views it reads or writes (in a CTE, in UPDATE ... FROM, through a
// function body), COPY FROM's WHERE. For each case PostgreSQL (the oracle: a fresh connection,
// as a role row security applies to) says whether the write leaves a setting changed; the
// classification against a whole catalogue read must then carry a session effect. Writes whose
// policies only read settings must carry none (else every write reads the settings back).
func TestAWriteCountsWhatItsPoliciesViewsAndBodiesRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	exec(db, `
CREATE ROLE tenant;
CREATE FUNCTION public.sc(text) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN PERFORM set_config('rv.x', $1, false); RETURN true; END $f$;
CREATE FUNCTION public.sc_int(int, int) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN PERFORM set_config('rv.x', 'operator', false); RETURN true; END $f$;
CREATE OPERATOR public.### (LEFTARG = int, RIGHTARG = int, FUNCTION = public.sc_int);
CREATE FUNCTION public.cur_tenant() RETURNS text STABLE LANGUAGE sql AS $f$ SELECT current_setting('app.tenant', true) $f$;
CREATE FUNCTION public.cur_tenant_pl() RETURNS text STABLE LANGUAGE plpgsql AS $f$
BEGIN RETURN current_setting('app.tenant', true); END $f$;
CREATE TABLE plain (id int PRIMARY KEY);
INSERT INTO plain VALUES (1);
CREATE VIEW v_sc AS SELECT id FROM plain WHERE sc('view');
CREATE SCHEMA hidden;
CREATE VIEW hidden.v AS SELECT id FROM public.plain WHERE public.sc('hidden view');

CREATE TABLE pol_fn (id int);
CREATE POLICY sel ON pol_fn FOR SELECT USING (true);
CREATE POLICY ins ON pol_fn FOR INSERT WITH CHECK (sc('insert policy'));
CREATE TABLE pol_op (id int);
CREATE POLICY sel ON pol_op FOR SELECT USING (true);
CREATE POLICY ins ON pol_op FOR INSERT WITH CHECK (id ### 1);
CREATE TABLE pol_view (id int);
CREATE POLICY sel ON pol_view FOR SELECT USING (true);
CREATE POLICY ins ON pol_view FOR INSERT WITH CHECK (EXISTS (SELECT FROM v_sc));
CREATE TABLE inner_read (id int);
INSERT INTO inner_read VALUES (1);
CREATE POLICY sel ON inner_read FOR SELECT USING (sc('nested read policy'));
CREATE TABLE pol_nested (id int);
CREATE POLICY sel ON pol_nested FOR SELECT USING (true);
CREATE POLICY ins ON pol_nested FOR INSERT WITH CHECK (EXISTS (SELECT FROM inner_read));
CREATE TABLE pol_upd (id int PRIMARY KEY);
INSERT INTO pol_upd VALUES (1);
CREATE POLICY sel ON pol_upd FOR SELECT USING (true);
CREATE POLICY ins ON pol_upd FOR INSERT WITH CHECK (true);
CREATE POLICY upd ON pol_upd FOR UPDATE USING (sc('update policy'));
CREATE TABLE pol_cur (id int, tenant text);
CREATE POLICY a ON pol_cur USING (tenant IS NOT DISTINCT FROM current_setting('app.tenant', true));
CREATE TABLE pol_cur_fn (id int, tenant text);
CREATE POLICY a ON pol_cur_fn USING (tenant IS NOT DISTINCT FROM cur_tenant());
CREATE TABLE pol_cur_pl (id int, tenant text);
CREATE POLICY a ON pol_cur_pl USING (tenant IS NOT DISTINCT FROM cur_tenant_pl()) WITH CHECK (tenant IS NOT DISTINCT FROM cur_tenant_pl());
ALTER TABLE pol_fn ENABLE ROW LEVEL SECURITY;
ALTER TABLE pol_op ENABLE ROW LEVEL SECURITY;
ALTER TABLE pol_view ENABLE ROW LEVEL SECURITY;
ALTER TABLE inner_read ENABLE ROW LEVEL SECURITY;
ALTER TABLE pol_nested ENABLE ROW LEVEL SECURITY;
ALTER TABLE pol_upd ENABLE ROW LEVEL SECURITY;
ALTER TABLE pol_cur ENABLE ROW LEVEL SECURITY;
ALTER TABLE pol_cur_fn ENABLE ROW LEVEL SECURITY;
ALTER TABLE pol_cur_pl ENABLE ROW LEVEL SECURITY;

CREATE TABLE chk_op (id int CHECK (id ### 1));
CREATE TABLE def_op (id int, b boolean DEFAULT (1 ### 1));
CREATE FUNCTION upd_sql() RETURNS void LANGUAGE sql AS $f$ UPDATE v_sc SET id = id $f$;
CREATE FUNCTION upd_atomic() RETURNS void LANGUAGE sql BEGIN ATOMIC UPDATE v_sc SET id = id; END;
CREATE FUNCTION upd_pl() RETURNS void LANGUAGE plpgsql AS $f$ BEGIN UPDATE v_sc SET id = id; END $f$;
CREATE FUNCTION ins_pl() RETURNS void LANGUAGE plpgsql AS $f$ BEGIN INSERT INTO pol_view VALUES (9); END $f$;

GRANT USAGE ON SCHEMA hidden TO tenant;
GRANT ALL ON ALL TABLES IN SCHEMA public, hidden TO tenant;
`)
	cases := []struct {
		name, sql string
		copyData  string // COPY FROM STDIN data, when sql is a COPY FROM
		none      bool   // the write must count no session effect
	}{
		{name: "INSERT WITH CHECK calling a function (control, f91d5cf)", sql: "INSERT INTO pol_fn VALUES (1)"},
		{name: "INSERT WITH CHECK through a user operator", sql: "INSERT INTO pol_op VALUES (1)"},
		{name: "INSERT WITH CHECK reading a view", sql: "INSERT INTO pol_view VALUES (1)"},
		{name: "INSERT WITH CHECK reading a table with a read policy", sql: "INSERT INTO pol_nested VALUES (1)"},
		{name: "ON CONFLICT DO UPDATE runs the UPDATE policy", sql: "INSERT INTO pol_upd VALUES (1) ON CONFLICT (id) DO UPDATE SET id = excluded.id"},
		{name: "MERGE runs the UPDATE policy", sql: "MERGE INTO pol_upd USING (VALUES (1)) s(id) ON pol_upd.id = s.id WHEN MATCHED THEN UPDATE SET id = s.id"},
		{name: "MERGE with a view as source", sql: "MERGE INTO plain USING v_sc s ON plain.id = s.id WHEN MATCHED THEN DO NOTHING"},
		{name: "write in a CTE through a view", sql: "WITH x AS (UPDATE v_sc SET id = id RETURNING id) SELECT * FROM x"},
		{name: "UPDATE ... FROM a view", sql: "UPDATE plain SET id = plain.id FROM v_sc WHERE v_sc.id = plain.id"},
		{name: "view in a schema not on the path", sql: "UPDATE hidden.v SET id = id"},
		{name: "CTE named as the view the UPDATE writes", sql: "WITH v_sc AS (SELECT 1) UPDATE v_sc SET id = id"},
		{name: "SQL function body writing a view", sql: "SELECT upd_sql()"},
		{name: "BEGIN ATOMIC body writing a view", sql: "SELECT upd_atomic()"},
		{name: "PL/pgSQL body writing a view", sql: "SELECT upd_pl()"},
		{name: "PL/pgSQL body inserting under a WITH CHECK reading a view", sql: "SELECT ins_pl()"},
		{name: "COPY FROM ... WHERE", sql: "COPY plain FROM STDIN WHERE sc('copy where')", copyData: "5\n"},
		{name: "CHECK through a user operator (pre-existing, same filter)", sql: "INSERT INTO chk_op VALUES (1)"},
		{name: "DEFAULT through a user operator (pre-existing, same filter)", sql: "INSERT INTO def_op (id) VALUES (1)"},
		{name: "read policy reading a setting", sql: "INSERT INTO pol_cur VALUES (1, NULL) ON CONFLICT DO NOTHING", none: true},
		{name: "UPDATE under a read policy reading a setting", sql: "UPDATE pol_cur SET id = id", none: true},
		{name: "read policy through a STABLE SQL function", sql: "UPDATE pol_cur_fn SET id = id", none: true},
		{name: "policy through a STABLE PL/pgSQL function", sql: "DELETE FROM pol_cur_pl", none: true},
	}
	oracle := func(sql, data string) bool {
		conn, err := connect(ctx, "app")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "SET ROLE tenant"); err != nil {
			t.Fatal(err)
		}
		var before, after string
		if err := conn.QueryRow(ctx, "SELECT coalesce(current_setting('rv.x', true), '')").Scan(&before); err != nil {
			t.Fatal(err)
		}
		if data != "" {
			_, err = conn.PgConn().CopyFrom(ctx, strings.NewReader(data), sql)
		} else {
			var rows pgx.Rows
			rows, err = conn.Query(ctx, sql, pgx.QueryExecModeSimpleProtocol)
			if err == nil {
				rows.Close()
				err = rows.Err()
			}
		}
		if err != nil {
			t.Fatalf("oracle: %s: %v", sql, err)
		}
		if err := conn.QueryRow(ctx, "SELECT coalesce(current_setting('rv.x', true), '')").Scan(&after); err != nil {
			t.Fatal(err)
		}
		return before != after
	}
	// Which relations of pg_catalog and information_schema now have WriteRule.
	rows, err := db.Query(ctx, `SELECT n.nspname || '.' || c.relname || ' ' || w.rulename || ' ' || w.ev_type::text
FROM pg_rewrite w JOIN pg_class c ON c.oid = w.ev_class JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE w.rulename <> '_RETURN' AND w.ev_type <> '1' AND n.nspname IN ('pg_catalog', 'information_schema') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	ruled, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("catalogue relations with a rule on a write: %v", ruled)

	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 10 * time.Second})
	classifier := classify.New(classify.Options{Catalogues: m, CacheSize: -1})
	session := &classify.Context{Database: "app", User: "tenant"}
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue")
	}
	for _, tc := range cases {
		changes := oracle(tc.sql, tc.copyData)
		got := classifier.ClassifyIn(tc.sql, session)
		counted := got.Session != 0
		switch {
		case tc.none && counted:
			t.Errorf("%s: %s only reads settings; pgowl counts %v (every such write would read the settings back)", tc.name, tc.sql, got.Session)
		case changes && !counted:
			t.Errorf("%s: %s leaves rv.x changed on PostgreSQL; pgowl counts no session effect (%v %v %q)", tc.name, tc.sql, got.Access, got.Reason, got.Subject)
		case !changes && counted:
			t.Logf("%s: %s changes nothing on PostgreSQL; pgowl counts %v (the safe side)", tc.name, tc.sql, got.Session)
		default:
			t.Logf("ok %s: PostgreSQL %v, pgowl %v", tc.name, changes, got.Session)
		}
	}
}
