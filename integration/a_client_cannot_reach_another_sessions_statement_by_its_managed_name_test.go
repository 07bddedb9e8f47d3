package integration

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestAClientCannotDeallocateAnotherSessionsStatement: pgowl prepares
// clients' named statements on shared backends under managed names
// (pgowl_<hash>), which any session on that backend can list in
// pg_prepared_statements. A client that sends DEALLOCATE pgowl_<hash> as SQL
// (on its own connection to PostgreSQL: 26000, it has no such statement)
// removes it from the shared backend while pgowl's record of the backend
// still lists it; another client whose statement it was then fails.
func TestAClientCannotDeallocateAnotherSessionsStatement(t *testing.T) {
	c := sharedClusterFor(t)
	o := rvOwlOnPrimaryOnly(t, c, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	victim := o.connect(t, withMode(pgx.QueryExecModeCacheStatement))
	const sql = "SELECT 42::int AS rv_poison"
	var v int
	for range 2 {
		if err := victim.QueryRow(ctx, sql).Scan(&v); err != nil {
			t.Fatalf("victim before: %v", err)
		}
	}

	hostile := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	rows, err := hostile.Query(ctx, "SELECT name FROM pg_prepared_statements WHERE NOT from_sql")
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the hostile client sees these statements on its backend: %v", names)
	if len(names) == 0 {
		t.Fatal("no managed statement visible on the hostile client's backend: the test cannot try to reach one")
	}
	for _, name := range names {
		// Run by name in the extended protocol (Bind): on a direct connection 26000.
		_, err := hostile.PgConn().ExecPrepared(ctx, name, nil, nil, nil).Close()
		if pgErr, ok := asPgError(err); !ok || pgErr.Code != "26000" {
			t.Errorf("a Bind of another session's statement %s by its managed name got %v; a direct connection says 26000", name, err)
		}
		if _, err := hostile.Exec(ctx, "DEALLOCATE "+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Logf("DEALLOCATE %s: %v", name, err)
		} else {
			t.Logf("DEALLOCATE %s succeeded (on a direct connection: 26000, the client never prepared it)", name)
		}
	}

	err = victim.QueryRow(ctx, sql).Scan(&v)
	if err != nil {
		t.Errorf("the victim's prepared statement fails after another client deallocated its managed name on the shared backend: %v", err)
	}
	// A client that prepared once, by name, as JDBC or an application's own
	// statement registry does: every later run fails, not just the first.
	if _, err := victim.PgConn().Prepare(ctx, "rv_once", sql, nil); err != nil {
		t.Fatalf("prepare rv_once: %v", err)
	}
	if _, err := victim.PgConn().ExecPrepared(ctx, "rv_once", nil, nil, nil).Close(); err != nil {
		t.Fatalf("rv_once before: %v", err)
	}
	for _, name := range names {
		hostile.Exec(ctx, "DEALLOCATE "+pgx.Identifier{name}.Sanitize())
	}
	failures := 0
	for i := range 3 {
		if _, err := victim.PgConn().ExecPrepared(ctx, "rv_once", nil, nil, nil).Close(); err != nil {
			failures++
			t.Logf("run %d of the victim's rv_once: %v", i+1, err)
		}
	}
	if failures > 0 {
		t.Errorf("%d of 3 runs of the victim's named statement failed after the other client's DEALLOCATE", failures)
	}
	// And a third, unrelated client that prepares the same text.
	third := o.connect(t, withMode(pgx.QueryExecModeCacheStatement))
	if err := third.QueryRow(ctx, sql).Scan(&v); err != nil {
		t.Errorf("a new client preparing the same statement fails: %v", err)
	}
}

// TestAManagedStatementReplacedThroughDynamicSQL: the managed
// name of another session's statement, listed in pg_prepared_statements, is
// deallocated and prepared again with other text by a PL/pgSQL function's
// EXECUTE, which pgowl does not see as a session effect; the victim's next
// run of its own statement then runs the other text.
func TestAManagedStatementReplacedThroughDynamicSQL(t *testing.T) {
	c := sharedClusterFor(t)
	ctx0 := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx0, `SET ROLE app;
		CREATE OR REPLACE FUNCTION public.rv_dyn2(q text) RETURNS int LANGUAGE plpgsql AS $$BEGIN EXECUTE q; RETURN 1; END$$;`); err != nil {
		t.Fatal(err)
	}
	o := rvOwlOnPrimaryOnly(t, c, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	victim := o.connect(t, withMode(pgx.QueryExecModeCacheStatement))
	const sql = "SELECT 42::int AS rv_hijack"
	var v int
	if err := victim.QueryRow(ctx, sql).Scan(&v); err != nil || v != 42 {
		t.Fatalf("victim before: %d, %v", v, err)
	}
	attacker := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	var name string
	if err := attacker.QueryRow(ctx, "SELECT name FROM pg_prepared_statements WHERE NOT from_sql LIMIT 1").Scan(&name); err != nil {
		t.Fatalf("list: %v", err)
	}
	for _, q := range []string{"DEALLOCATE " + name, "PREPARE " + name + " AS SELECT 666::int AS rv_hijack"} {
		if _, err := attacker.Exec(ctx, "SELECT public.rv_dyn2($1)", q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	attacker.Close(ctx)
	if err := victim.QueryRow(ctx, sql).Scan(&v); err != nil {
		t.Logf("victim after: %v", err)
	} else if v != 42 {
		t.Errorf("the victim's own statement %q returned %d: it ran the text another client prepared under its managed name %s", sql, v, name)
	}
}

// TestAClientCannotReachAnotherSessionsStatementThroughSQL: the managed names listed in
// pg_prepared_statements are refused in SQL too, in the simple and the extended protocol and in
// a string of several statements: EXECUTE (also under EXPLAIN and CREATE TABLE AS) and
// DEALLOCATE answer 26000, as a direct connection does for a statement the client never
// prepared, and a PREPARE under the prefix answers 42939 (reserved_name). The other session's
// statement keeps running.
func TestAClientCannotReachAnotherSessionsStatementThroughSQL(t *testing.T) {
	c := sharedClusterFor(t)
	o := rvOwlOnPrimaryOnly(t, c, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	victim := o.connect(t, withMode(pgx.QueryExecModeCacheStatement))
	const sql = "SELECT 42::int AS rv_sql_reach"
	var v int
	if err := victim.QueryRow(ctx, sql).Scan(&v); err != nil || v != 42 {
		t.Fatalf("victim before: %d, %v", v, err)
	}
	hostile := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	var name string
	if err := hostile.QueryRow(ctx, "SELECT name FROM pg_prepared_statements WHERE NOT from_sql AND statement = $1", sql).Scan(&name); err != nil {
		t.Fatalf("the victim's statement is not listed on the hostile client's backend: %v", err)
	}
	for _, tc := range []struct{ sql, code string }{
		{"EXECUTE " + name, "26000"},
		{"EXPLAIN EXECUTE " + name, "26000"},
		{"CREATE TEMP TABLE rv_sql_reach_copy AS EXECUTE " + name, "26000"},
		{"SELECT 1; DEALLOCATE " + name, "26000"},
		{"DEALLOCATE " + name + "; SELECT 1", "26000"},
		{"PREPARE " + managedPrefixForTests + "mine AS SELECT 1", "42939"},
	} {
		_, err := hostile.Exec(ctx, tc.sql)
		if pgErr, ok := asPgError(err); !ok || pgErr.Code != tc.code {
			t.Errorf("%s: %v; want %s", tc.sql, err, tc.code)
		}
	}
	// The extended protocol: the text is a Parse's.
	_, err := hostile.PgConn().Prepare(ctx, "", "EXECUTE "+name, nil)
	if pgErr, ok := asPgError(err); !ok || pgErr.Code != "26000" {
		t.Errorf("Parse of EXECUTE %s: %v; want 26000", name, err)
	}
	if err := victim.QueryRow(ctx, sql).Scan(&v); err != nil || v != 42 {
		t.Errorf("the victim's own statement after the hostile client's tries: %d, %v", v, err)
	}
	var listed bool
	if err := hostile.QueryRow(ctx, "SELECT true FROM pg_prepared_statements WHERE name = $1", name).Scan(&listed); err != nil {
		t.Errorf("the victim's managed statement %s is gone from the shared backend: %v", name, err)
	}
}

// managedPrefixForTests is proxy's managedStatementPrefix, which the tests cannot import.
const managedPrefixForTests = "pgowl_"
