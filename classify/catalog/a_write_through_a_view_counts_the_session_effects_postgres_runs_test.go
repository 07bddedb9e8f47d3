package catalog_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/classify"
	"github.com/pgowl/pgowl/classify/catalog"
)

// A write through a view, for many view shapes. For each case,
// PostgreSQL (the oracle, a fresh connection) says whether the write leaves a session setting
// behind; the classification of the write against a whole catalogue read must then carry a
// session effect. Cases the oracle says change nothing are reported, not failed (counting more is
// the safe side).
func TestAWriteThroughAViewCountsTheSessionEffectsPostgresRuns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, connect, exec := startAppDatabase(t, ctx)
	exec(db, `
CREATE FUNCTION public.rv_trg() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN PERFORM set_config('rv.x', 'trg-' || TG_TABLE_NAME, false); RETURN NEW; END $f$;
CREATE FUNCTION public.rv_true(int) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN PERFORM set_config('rv.x', 'qual', false); RETURN true; END $f$;
CREATE FUNCTION public.rv_val(int) RETURNS int LANGUAGE plpgsql AS $f$
BEGIN PERFORM set_config('rv.x', 'select-list', false); RETURN $1; END $f$;
CREATE FUNCTION public.rv_instead() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN RETURN NEW; END $f$;
CREATE SCHEMA s;
CREATE TABLE s.t (id int);
CREATE TRIGGER trg BEFORE INSERT OR UPDATE ON s.t FOR EACH ROW EXECUTE FUNCTION public.rv_trg();
CREATE TABLE public.t (id int);
SET search_path = s;
CREATE VIEW s.v_unqualified AS SELECT id FROM t;
RESET search_path;
CREATE TABLE p (id int) PARTITION BY RANGE (id);
CREATE TABLE p1 PARTITION OF p FOR VALUES FROM (0) TO (100);
CREATE TRIGGER trg BEFORE INSERT ON p1 FOR EACH ROW EXECUTE FUNCTION public.rv_trg();
CREATE VIEW v_partitioned AS SELECT id FROM p;
CREATE VIEW v_of_v_partitioned AS SELECT id FROM v_partitioned;
CREATE TABLE plain (id int);
INSERT INTO plain VALUES (1);
CREATE VIEW v_qual AS SELECT id FROM plain WHERE rv_true(id);
CREATE VIEW v_of_v_qual AS SELECT id FROM v_qual;
CREATE VIEW v_check AS SELECT id FROM plain WHERE rv_true(id) WITH CHECK OPTION;
CREATE VIEW v_select_list AS SELECT id, rv_val(id) AS f FROM plain;
CREATE VIEW v_settings AS SELECT name, setting FROM pg_settings;
CREATE VIEW v_barrier WITH (security_barrier) AS SELECT id FROM s.t;
CREATE TABLE "Mixed" (id int);
CREATE TRIGGER trg BEFORE INSERT ON "Mixed" FOR EACH ROW EXECUTE FUNCTION public.rv_trg();
CREATE VIEW v_mixed AS SELECT id FROM "Mixed";
CREATE VIEW v_only AS SELECT id FROM ONLY s.t;
CREATE TABLE ruled (id int);
CREATE RULE r AS ON INSERT TO ruled DO ALSO SELECT set_config('rv.x', 'rule', false);
CREATE VIEW v_ruled AS SELECT id FROM ruled;
CREATE VIEW v_instead AS SELECT id FROM s.t;
CREATE TRIGGER i INSTEAD OF INSERT ON v_instead FOR EACH ROW EXECUTE FUNCTION public.rv_instead();
CREATE VIEW cyc_a AS SELECT 1 AS id;
CREATE VIEW cyc_b AS SELECT id FROM cyc_a;
CREATE OR REPLACE VIEW cyc_a AS SELECT id FROM cyc_b;
`)
	cases := []struct{ name, sql, probe string }{
		{"partitioned", "INSERT INTO v_partitioned VALUES (1)", "rv.x"},
		{"view of view of partitioned", "INSERT INTO v_of_v_partitioned VALUES (1)", "rv.x"},
		{"unqualified base in a schema's view", "INSERT INTO s.v_unqualified VALUES (1)", "rv.x"},
		{"UPDATE runs the view's WHERE", "UPDATE v_qual SET id = id", "rv.x"},
		{"UPDATE runs the WHERE of a view under the view", "UPDATE v_of_v_qual SET id = id", "rv.x"},
		{"WITH CHECK OPTION runs the WHERE on INSERT", "INSERT INTO v_check VALUES (2)", "rv.x"},
		{"RETURNING runs the view's select list", "INSERT INTO v_select_list (id) VALUES (3) RETURNING f", "rv.x"},
		{"view over pg_settings", "UPDATE v_settings SET setting = '7MB' WHERE name = 'work_mem'", "work_mem"},
		{"security_barrier", "INSERT INTO v_barrier VALUES (1)", "rv.x"},
		{"quoted mixed-case base", "INSERT INTO v_mixed VALUES (1)", "rv.x"},
		{"FROM ONLY", "INSERT INTO v_only VALUES (1)", "rv.x"},
		{"rule of the base", "INSERT INTO v_ruled VALUES (1)", "rv.x"},
		{"pg_settings itself (control)", "UPDATE pg_settings SET setting = '6MB' WHERE name = 'work_mem'", "work_mem"},
		{"a write that reads a view (control)", "INSERT INTO plain SELECT id FROM v_select_list", "rv.x"},
		{"INSTEAD OF trigger (base not written)", "INSERT INTO v_instead VALUES (1)", "rv.x"},
	}
	// The oracle: does the write leave the probe setting changed on its connection?
	oracle := func(sql, probe string) bool {
		conn, err := connect(ctx, "app")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var before, after string
		if err := conn.QueryRow(ctx, "SELECT coalesce(current_setting($1, true), '')", probe).Scan(&before); err != nil {
			t.Fatal(err)
		}
		rows, err := conn.Query(ctx, sql, pgx.QueryExecModeSimpleProtocol)
		if err == nil {
			rows.Close()
			err = rows.Err()
		}
		if err != nil {
			t.Fatalf("oracle: %s: %v", sql, err)
		}
		if err := conn.QueryRow(ctx, "SELECT coalesce(current_setting($1, true), '')", probe).Scan(&after); err != nil {
			t.Fatal(err)
		}
		return before != after
	}
	m := catalog.New(catalog.Options{Connect: connect, RefreshInterval: time.Hour, Wait: 10 * time.Second})
	classifier := classify.New(classify.Options{Catalogues: m, CacheSize: -1})
	session := &classify.Context{Database: "app", User: "postgres"}
	if m.Catalogue("app") == nil {
		t.Fatal("no catalogue")
	}
	// A cycle of views (PostgreSQL lets CREATE OR REPLACE make one and refuses to use it): the
	// classification must end.
	done := make(chan classify.Effects, 1)
	go func() { done <- classifier.ClassifyIn("INSERT INTO cyc_a VALUES (1)", session) }()
	select {
	case got := <-done:
		t.Logf("a write of a cycle of views: %v %v %v", got.Access, got.Reason, got.Session)
	case <-time.After(5 * time.Second):
		t.Fatal("a write of a cycle of views is still being classified after 5 s")
	}
	if _, err := db.Exec(ctx, "INSERT INTO cyc_a VALUES (1)"); err == nil {
		t.Error("oracle: PostgreSQL wrote through a cycle of views")
	} else {
		t.Logf("oracle: %v", err)
	}
	for _, tc := range cases {
		changes := oracle(tc.sql, tc.probe)
		got := classifier.ClassifyIn(tc.sql, session)
		counted := got.Session != 0
		switch {
		case changes && !counted:
			t.Errorf("%s: %s leaves %s changed on PostgreSQL; pgowl counts no session effect (%v %v %q)", tc.name, tc.sql, tc.probe, got.Access, got.Reason, got.Subject)
		case !changes && counted:
			t.Logf("%s: %s changes nothing on PostgreSQL; pgowl counts %v (the safe side)", tc.name, tc.sql, got.Session)
		default:
			t.Logf("ok %s: PostgreSQL %v, pgowl %v", tc.name, changes, got.Session)
		}
	}
}
