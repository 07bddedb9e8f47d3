package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestEverySQLFormThatRunsAManagedNameIsRefused: every SQL statement PostgreSQL accepts that
// runs, plans or drops a prepared statement by name is refused with 26000 when the name is
// another session's managed name, as on a direct connection (where the client has no such
// statement): also EXPLAIN of CREATE TABLE AS EXECUTE, with or without ANALYZE, and with
// comments, quoting and odd spacing between the words.
func TestEverySQLFormThatRunsAManagedNameIsRefused(t *testing.T) {
	c := sharedClusterFor(t)
	o := rvOwlOnPrimaryOnly(t, c, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	victim := o.connect(t, withMode(pgx.QueryExecModeCacheStatement))
	const sql = "SELECT 4343::int AS h2_every_form"
	var v int
	if err := victim.QueryRow(ctx, sql).Scan(&v); err != nil || v != 4343 {
		t.Fatalf("victim before: %d, %v", v, err)
	}
	hostile := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	var name string
	if err := hostile.QueryRow(ctx, "SELECT name FROM pg_prepared_statements WHERE NOT from_sql AND statement = $1", sql).Scan(&name); err != nil {
		t.Fatalf("the victim's statement is not listed on the hostile client's backend: %v", err)
	}
	direct := connectPgConn(t, c.Nodes[0].DSN(appUser, appPassword, appDatabase))
	forms := []string{
		"EXPLAIN CREATE TEMP TABLE h2_form_a AS EXECUTE $N",
		"EXPLAIN ANALYZE CREATE TEMP TABLE h2_form_b AS EXECUTE $N",
		"EXPLAIN (ANALYZE, COSTS OFF) CREATE TEMP TABLE h2_form_c AS EXECUTE $N",
		"EXPLAIN (ANALYZE) EXECUTE $N",
		"EXPLAIN (COSTS OFF) EXECUTE $N",
		"CREATE TEMP TABLE IF NOT EXISTS h2_form_d AS EXECUTE $N WITH NO DATA",
		"EXECUTE/**/$N",
		"EXECUTE \"$N\"",
		"EXECUTE -- comment\n $N",
		"DEALLOCATE PREPARE \"$N\"",
		"deallocate prepare $N ;",
	}
	for _, form := range forms {
		// Oracle: with a name the client never prepared, a direct connection answers 26000.
		_, err := direct.Exec(ctx, strings.ReplaceAll(form, "$N", "pgowl_h2nosuch")).ReadAll()
		if rvSQLState(err) != "26000" {
			t.Errorf("oracle: %q on a direct connection: %v, want 26000", form, err)
			continue
		}
		q := strings.ReplaceAll(form, "$N", name)
		res, err := hostile.PgConn().Exec(ctx, q).ReadAll()
		if rvSQLState(err) != "26000" {
			var out []string
			for _, r := range res {
				for _, row := range r.Rows {
					for _, col := range row {
						out = append(out, string(col))
					}
				}
			}
			t.Errorf("%q through pgowl: err %v, output %q; a direct connection answers 26000 (the client never prepared %s)", q, err, out, name)
		}
		hostile.PgConn().Exec(ctx, "DISCARD TEMP").ReadAll()
	}
	if err := victim.QueryRow(ctx, sql).Scan(&v); err != nil || v != 4343 {
		t.Errorf("the victim's own statement afterwards: %d, %v", v, err)
	}
}
