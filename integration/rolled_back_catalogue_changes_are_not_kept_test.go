package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestRolledBackChangesAreNotKept: changes that make a writer look like a reader, made
// in a transaction block through pgowl and rolled back (ROLLBACK, ROLLBACK TO SAVEPOINT, a failed
// statement): the function still writes, and its use must go to the primary as a write.
func TestRolledBackChangesAreNotKept(t *testing.T) {
	c, o := rddSetup(t)
	for i, mode := range bothProtocols {
		t.Run(mode.name, func(t *testing.T) {
			conn := rddConnect(t, o, mode.mode, "rdd, public")
			n := fmt.Sprintf("%d", i)
			writer := func(name string) string {
				return "CREATE OR REPLACE FUNCTION " + name + "() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('rdd.seq')$$"
			}
			reader := func(name string) string {
				return "CREATE OR REPLACE FUNCTION " + name + "() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT 7::bigint$$"
			}

			// A pgowl:readonly comment, rolled back.
			cm := "rdd.cm_" + n
			rddMust(t, conn, writer(cm))
			rddWriter(t, conn, "start", "SELECT "+cm+"()")
			rddMust(t, conn, "BEGIN; COMMENT ON FUNCTION "+cm+"() IS 'pgowl:readonly'; ROLLBACK")
			rddWriter(t, conn, "after a pgowl:readonly comment rolled back (one string)", "SELECT "+cm+"()")
			rddMust(t, conn, "BEGIN")
			rddMust(t, conn, "COMMENT ON FUNCTION "+cm+"() IS 'pgowl:readonly'")
			rddMust(t, conn, "ROLLBACK")
			rddWriter(t, conn, "after a pgowl:readonly comment rolled back", "SELECT "+cm+"()")
			rddMust(t, conn, "BEGIN")
			rddMust(t, conn, "SAVEPOINT a")
			rddMust(t, conn, "COMMENT ON FUNCTION "+cm+"() IS 'pgowl:readonly'")
			rddMust(t, conn, "ROLLBACK TO SAVEPOINT a")
			rddMust(t, conn, "COMMIT")
			rddWriter(t, conn, "after a pgowl:readonly comment rolled back to a savepoint", "SELECT "+cm+"()")
			// Committed, then removed: the comment is gone.
			rddMust(t, conn, "COMMENT ON FUNCTION "+cm+"() IS 'pgowl:readonly'")
			rs, err := runAndRoutes(t, conn, "SELECT "+cm+"()")
			t.Logf("with the pgowl:readonly comment: %v, %v", rs, err)
			rddMust(t, conn, "COMMENT ON FUNCTION "+cm+"() IS NULL")
			rddWriter(t, conn, "after the comment was removed", "SELECT "+cm+"()")

			// A rename swap rolled back.
			rb, rbr := "rdd.rb_"+n, "rdd.rbr_"+n
			rddMust(t, conn, writer(rb))
			rddMust(t, conn, reader(rbr))
			rddWriter(t, conn, "start", "SELECT "+rb+"()")
			rddMust(t, conn, "BEGIN")
			rddMust(t, conn, "ALTER FUNCTION "+rb+"() RENAME TO rb_"+n+"_old")
			rddMust(t, conn, "ALTER FUNCTION "+rbr+"() RENAME TO rb_"+n)
			rddMust(t, conn, "ROLLBACK")
			rddWriter(t, conn, "after a rename swap rolled back", "SELECT "+rb+"()")
			rddMust(t, conn, "BEGIN")
			rddMust(t, conn, "SAVEPOINT s")
			rddMust(t, conn, "ALTER FUNCTION "+rb+"() RENAME TO rb_"+n+"_old")
			rddMust(t, conn, "ALTER FUNCTION "+rbr+"() RENAME TO rb_"+n)
			rddMust(t, conn, "ROLLBACK TO SAVEPOINT s")
			rddMust(t, conn, "COMMIT")
			rddWriter(t, conn, "after a rename swap rolled back to a savepoint", "SELECT "+rb+"()")

			// DROP then CREATE of a reader, rolled back.
			dc := "rdd.dc_" + n
			rddMust(t, conn, writer(dc))
			rddWriter(t, conn, "start", "SELECT "+dc+"()")
			rddMust(t, conn, "BEGIN")
			rddMust(t, conn, "DROP FUNCTION "+dc+"()")
			rddMust(t, conn, "CREATE FUNCTION "+dc+"() RETURNS bigint LANGUAGE sql STABLE AS 'SELECT 1::bigint'")
			rddMust(t, conn, "ROLLBACK")
			rddWriter(t, conn, "after DROP; CREATE reader rolled back", "SELECT "+dc+"()")

			// ALTER ... STABLE of a PL/pgSQL function whose dynamic SQL calls nextval: VOLATILE
			// sends it to the primary; a STABLE rolled back must not stick.
			dyn := "rdd.dyn_" + n
			rddMust(t, conn, "CREATE OR REPLACE FUNCTION "+dyn+"() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$DECLARE r bigint; BEGIN EXECUTE 'SELECT nextval(' || quote_literal('rdd.seq') || ')' INTO r; RETURN r; END$$")
			rddWriter(t, conn, "VOLATILE dynamic nextval", "SELECT "+dyn+"()")
			rddMust(t, conn, "BEGIN")
			rddMust(t, conn, "ALTER FUNCTION "+dyn+"() STABLE")
			rddMust(t, conn, "ROLLBACK")
			rddWriter(t, conn, "after ALTER ... STABLE rolled back", "SELECT "+dyn+"()")
			rddMust(t, conn, "BEGIN")
			rddMust(t, conn, "ALTER FUNCTION "+dyn+"() STABLE")
			if rs, err := oaSimple(t, conn, "SELECT 1/0"); err == nil {
				t.Fatalf("1/0 succeeded %v", rs)
			}
			rddMust(t, conn, "COMMIT")
			rddWriter(t, conn, "after ALTER ... STABLE in a failed transaction", "SELECT "+dyn+"()")
			// Committed STABLE: a standby refuses the hidden nextval (declared access).
			rddMust(t, conn, "ALTER FUNCTION "+dyn+"() STABLE")
			rs, err = runAndRoutes(t, conn, "SELECT "+dyn+"()")
			t.Logf("STABLE with dynamic nextval: %v, %v", rs, err)
			rddMust(t, conn, "ALTER FUNCTION "+dyn+"() VOLATILE")
			rddWriter(t, conn, "right after ALTER ... VOLATILE", "SELECT "+dyn+"()")

			// A domain whose CHECK calls a writer: the constraint dropped, rolled back.
			dom := "rdd.dom_" + n
			rddMust(t, conn, "CREATE DOMAIN "+dom+" AS int")
			rs = rddReader(t, conn, "plain domain", "SELECT 5::"+dom)
			t.Logf("plain domain cast: %v", rs)
			rddMust(t, conn, "ALTER DOMAIN "+dom+" ADD CONSTRAINT c CHECK (rdd_w.h() > 0 AND VALUE > 0)")
			rddWriter(t, conn, "right after ALTER DOMAIN ADD CONSTRAINT (writer)", "SELECT 5::"+dom)
			rddMust(t, conn, "BEGIN")
			rddMust(t, conn, "ALTER DOMAIN "+dom+" DROP CONSTRAINT c")
			rddMust(t, conn, "ROLLBACK")
			rddWriter(t, conn, "after ALTER DOMAIN DROP CONSTRAINT rolled back", "SELECT 5::"+dom)

			// Views renamed: a swap committed, and a swap back rolled back.
			v, vw := "rdd.vs_"+n, "rdd.vsw_"+n
			rddMust(t, conn, "CREATE VIEW "+v+" AS SELECT 0::bigint AS n")
			rddMust(t, conn, "CREATE VIEW "+vw+" AS SELECT rdd_w.h() AS n")
			rs = rddReader(t, conn, "reading view", "SELECT n FROM "+v)
			t.Logf("reading view: %v", rs)
			rddMust(t, conn, "BEGIN")
			rddMust(t, conn, "ALTER VIEW "+v+" RENAME TO vs_"+n+"_old")
			rddMust(t, conn, "ALTER VIEW "+vw+" RENAME TO vs_"+n)
			rddMust(t, conn, "COMMIT")
			rddWriter(t, conn, "after the views were swapped", "SELECT n FROM "+v)
			rddMust(t, conn, "BEGIN")
			rddMust(t, conn, "ALTER VIEW "+v+" RENAME TO vsw_"+n)
			rddMust(t, conn, "ALTER VIEW rdd.vs_"+n+"_old RENAME TO vs_"+n)
			rddMust(t, conn, "ROLLBACK")
			rddWriter(t, conn, "after a swap back rolled back", "SELECT n FROM "+v)

			// CREATE RULE "_RETURN" turns an empty table into a view (PostgreSQL 15).
			tv := "rdd.tv_" + n
			rddMust(t, conn, "CREATE TABLE "+tv+" (n bigint)")
			rs = rddReader(t, conn, "table", "SELECT n FROM "+tv)
			t.Logf("table: %v", rs)
			rddMust(t, conn, `CREATE RULE "_RETURN" AS ON SELECT TO `+tv+` DO INSTEAD SELECT rdd_w.h() AS n`)
			rddWriter(t, conn, "right after CREATE RULE _RETURN turned the table into a writing view", "SELECT n FROM "+tv)
		})
	}
	rddProveStandbyRefuses(t, c, "SELECT n FROM rdd.tv_0")
	rddProveStandbyRefuses(t, c, "SELECT 5::rdd.dom_0")
	rddProveStandbyRefuses(t, c, "SELECT n FROM rdd.vs_0")
}

// TestAnotherSessionsOpenTransaction: session A changes a writer into a reader (replace,
// pgowl:readonly comment, drop and create) in a transaction block it keeps open; session B's use
// of the function meanwhile runs the committed writer, and after A's ROLLBACK too.
func TestAnotherSessionsOpenTransaction(t *testing.T) {
	c, o := rddSetup(t)
	for i, mode := range bothProtocols {
		t.Run(mode.name, func(t *testing.T) {
			a := rddConnect(t, o, pgx.QueryExecModeSimpleProtocol, "rdd, public")
			b := rddConnect(t, o, mode.mode, "rdd, public")
			f := fmt.Sprintf("rdd.ot_%d", i)
			rddMust(t, a, "CREATE OR REPLACE FUNCTION "+f+"() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('rdd.seq')$$")
			catchUp(t, c)
			rddWriter(t, b, "start", "SELECT "+f+"()")
			for _, change := range []string{
				"CREATE OR REPLACE FUNCTION " + f + "() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT 3::bigint$$",
				"COMMENT ON FUNCTION " + f + "() IS 'pgowl:readonly'",
				"DROP FUNCTION " + f + "(); CREATE FUNCTION " + f + "() RETURNS bigint LANGUAGE sql STABLE AS $$SELECT 4::bigint$$",
			} {
				rddMust(t, a, "BEGIN")
				rddMust(t, a, change)
				rddWriter(t, b, "while A's transaction holds "+change, "SELECT "+f+"()")
				time.Sleep(1200 * time.Millisecond)
				rddWriter(t, b, "1.2s later, A's transaction still open, "+change, "SELECT "+f+"()")
				rddMust(t, a, "ROLLBACK")
				rddWriter(t, b, "after A rolled back "+change, "SELECT "+f+"()")
			}
		})
	}
}
