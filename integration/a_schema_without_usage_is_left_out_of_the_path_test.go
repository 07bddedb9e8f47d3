package integration

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestSchemaWithoutUsageIsLeftOutOfThePath: PostgreSQL leaves out of the effective
// search_path every schema the current user has no USAGE privilege on (namespace.c,
// recomputeNamespacePath). With search_path = rdd_nuN, rdd_w, where rdd_nuN holds an h() that
// reads and app may not use rdd_nuN, h() is rdd_w.h(), which calls nextval. Statically (no
// USAGE from the start), and after REVOKE USAGE past pgowl (the superuser on the primary).
func TestSchemaWithoutUsageIsLeftOutOfThePath(t *testing.T) {
	c, o := rddSetup(t)
	ctx := timeoutCtx(t, statementTimeout)
	setup := `
DO $$BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rdd_o2') THEN CREATE ROLE rdd_o2 NOLOGIN; END IF;
END$$;
CREATE SCHEMA IF NOT EXISTS rdd_nu1 AUTHORIZATION rdd_o2;
CREATE SCHEMA IF NOT EXISTS rdd_nu2 AUTHORIZATION rdd_o2;
CREATE OR REPLACE FUNCTION rdd_nu1.h() RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 0::bigint';
CREATE OR REPLACE FUNCTION rdd_nu2.h() RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 0::bigint';
REVOKE ALL ON SCHEMA rdd_nu1 FROM PUBLIC;
GRANT USAGE ON SCHEMA rdd_nu2 TO app;`
	if err := c.Nodes[0].Exec(ctx, setup); err != nil {
		t.Fatalf("setup: %v", err)
	}
	catchUp(t, c)
	time.Sleep(2500 * time.Millisecond) // the polls take the functions in

	t.Run("no USAGE from the start", func(t *testing.T) {
		rddProveStandbyRefuses(t, c, "SET search_path = rdd_nu1, rdd_w; SELECT h()")
		conn := rddConnect(t, o, pgx.QueryExecModeSimpleProtocol, "rdd_nu1, rdd_w")
		rddWriterGap(t, "names resolve on every schema of the search path, also one the user has no USAGE on, which PostgreSQL leaves out", conn, "rdd_nu1 (no USAGE) before rdd_w in the path", "SELECT h()")
	})
	t.Run("USAGE revoked past pgowl", func(t *testing.T) {
		conn := rddConnect(t, o, pgx.QueryExecModeSimpleProtocol, "rdd_nu2, rdd_w")
		rs := rddReader(t, conn, "with USAGE on rdd_nu2", "SELECT h()")
		t.Logf("with USAGE: %v", rs)
		if err := c.Nodes[0].Exec(ctx, "REVOKE USAGE ON SCHEMA rdd_nu2 FROM app"); err != nil {
			t.Fatalf("revoke: %v", err)
		}
		catchUp(t, c)
		time.Sleep(2500 * time.Millisecond)
		rddWriterGap(t, "names resolve on every schema of the search path, also one the user has no USAGE on, which PostgreSQL leaves out", conn, "after REVOKE USAGE ON SCHEMA rdd_nu2 FROM app", "SELECT h()")
		rddProveStandbyRefuses(t, c, "SET search_path = rdd_nu2, rdd_w; SELECT h()")
	})
}
