package integration

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

// A function whose CREATE statement says all of it is taken into the catalogue from the
// statement, with an OID of pgowl's until a read gives PostgreSQL's. An aggregate names its
// functions by PostgreSQL's OIDs: the session's read of the aggregate reads the functions taken
// without a read too, so that a call of the aggregate is classified by what its state function
// does (here it writes: the call goes to the primary as a writing function).
func TestAggregateOfAFunctionTakenWithoutARead(t *testing.T) {
	setup := `
CREATE SCHEMA IF NOT EXISTS agg_app AUTHORIZATION app;
CREATE TABLE IF NOT EXISTS agg_app.agg_audit (n integer);
ALTER TABLE agg_app.agg_audit OWNER TO app;
DROP AGGREGATE IF EXISTS agg_app.agg_tally(integer);
DROP FUNCTION IF EXISTS agg_app.agg_step(bigint, integer);
CREATE OR REPLACE FUNCTION agg_app.agg_probe() RETURNS integer LANGUAGE sql STABLE AS $$SELECT 1$$;`
	o := startOwlOnPrimaryAlone(t, sharedClusterFor(t), setup)
	conn := o.connect(t, withMode(pgx.QueryExecModeSimpleProtocol))
	aheadMust(t, conn, "SET search_path = agg_app, public")
	aheadMust(t, conn, "SELECT agg_probe()") // the catalogue is held from here
	taken := createdWithoutRead(t, o)
	aheadMust(t, conn, "CREATE FUNCTION agg_step(state bigint, x integer) RETURNS bigint LANGUAGE sql AS $$ INSERT INTO agg_audit VALUES (x); SELECT state + x $$")
	aheadMust(t, conn, "CREATE AGGREGATE agg_tally(integer) (SFUNC = agg_step, STYPE = bigint, INITCOND = '0')")
	conn.routes(t)
	if createdWithoutRead(t, o) == taken {
		t.Errorf("agg_step was read; want it taken from its statement (the case this test is about)")
	}
	aheadMust(t, conn, "SELECT agg_tally(n) FROM generate_series(1, 3) AS n")
	rs := conn.routes(t)
	if len(rs) != 1 || rs[0].Role != "primary" || rs[0].Reason != "WRITING_FUNCTION" {
		t.Errorf("a call of an aggregate whose state function writes: NOTICEs %v, want one on the primary with WRITING_FUNCTION", rs)
	}
}
