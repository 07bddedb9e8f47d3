package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/integration/owltest"
	"github.com/pgowl/pgowl/internal/cluster"
)

// Helpers shared by the tests of how the catalogue keeps up with DDL (first written by a review session). Every object is named rdd*. The setup
// runs as the superuser on the primary before pgowl starts; pgowl runs with a long refresh
// interval so that only DDL through pgowl (or the change polls) changes its catalogue, and with
// read_your_writes off, so that a use of a writer misclassified as a read goes to a standby.

const rddSetupSQL = `
SET check_function_bodies = off;
DO $$BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rdd_owner') THEN CREATE ROLE rdd_owner NOLOGIN; END IF;
END$$;
GRANT rdd_owner TO app;
CREATE SCHEMA IF NOT EXISTS rdd AUTHORIZATION app;
CREATE SCHEMA IF NOT EXISTS rdd_owner AUTHORIZATION rdd_owner;
CREATE SCHEMA IF NOT EXISTS rdd_pub AUTHORIZATION app;
CREATE SCHEMA IF NOT EXISTS rdd_w AUTHORIZATION app;
CREATE SCHEMA IF NOT EXISTS rdd_r AUTHORIZATION app;
GRANT USAGE, CREATE ON SCHEMA rdd TO rdd_owner;
GRANT USAGE ON SCHEMA rdd_owner, rdd_pub, rdd_w, rdd_r TO PUBLIC;
CREATE SEQUENCE IF NOT EXISTS rdd.seq;
GRANT ALL ON SEQUENCE rdd.seq TO PUBLIC;
-- g: writes in rdd_owner (the "$user" schema of rdd_owner), reads in rdd_pub.
CREATE OR REPLACE FUNCTION rdd_owner.g() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('rdd.seq')$$;
CREATE OR REPLACE FUNCTION rdd_pub.g() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT 0::bigint$$;
-- h: writes in rdd_w, reads in rdd_r.
CREATE OR REPLACE FUNCTION rdd_w.h() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('rdd.seq')$$;
CREATE OR REPLACE FUNCTION rdd_r.h() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT 0::bigint$$;
-- A SECURITY DEFINER function owned by rdd_owner, without a SET search_path: its body's g()
-- resolves along the caller's path with "$user" meaning the owner while it runs.
CREATE OR REPLACE FUNCTION rdd.sd_owner() RETURNS bigint LANGUAGE sql VOLATILE SECURITY DEFINER AS 'SELECT g()';
ALTER FUNCTION rdd.sd_owner() OWNER TO rdd_owner;
CREATE OR REPLACE FUNCTION rdd.sd_owner_pl() RETURNS bigint LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS 'BEGIN RETURN g(); END';
ALTER FUNCTION rdd.sd_owner_pl() OWNER TO rdd_owner;
-- Owned by rdd_owner (of which app is a member), not SECURITY DEFINER: for ALTER FUNCTION ...
-- SECURITY DEFINER through pgowl.
CREATE OR REPLACE FUNCTION rdd.sd_later() RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT g()';
ALTER FUNCTION rdd.sd_later() OWNER TO rdd_owner;
-- The same owned by app, for ALTER FUNCTION ... OWNER TO through pgowl.
CREATE OR REPLACE FUNCTION rdd.sd_app() RETURNS bigint LANGUAGE sql VOLATILE SECURITY DEFINER AS 'SELECT g()';
ALTER FUNCTION rdd.sd_app() OWNER TO app;
`

// rddMutate is the configuration of the pgowl of every test that uses rddSetup.
func rddMutate(cfg *config.Config) {
	cfg.Classify.RefreshInterval = 10 * time.Minute
	cfg.Routing.ReadYourWrites = config.ReadYourWritesOff
}

// rddSetup creates the objects, waits for the standbys and starts pgowl.
func rddSetup(t *testing.T) (*cluster.Cluster, *owl) {
	t.Helper()
	return setupAndStart(t, "DDL keep-up objects", rddSetupSQL, rddMutate)
}

// rddConnect opens a connection in mode with the given search_path (none when empty), the
// catalogue loaded.
func rddConnect(t *testing.T, o *owl, mode pgx.QueryExecMode, path string) *client {
	t.Helper()
	conn := o.connect(t, withMode(mode))
	if path != "" {
		rddMust(t, conn, "SET search_path = "+path)
	}
	rddMust(t, conn, "SELECT 1")
	conn.routes(t)
	return conn
}

// rddMust runs sql through pgowl in the simple protocol and stops the test when it fails.
func rddMust(t *testing.T, conn *client, sql string) {
	t.Helper()
	if rs, err := oaSimple(t, conn, sql); err != nil {
		t.Fatalf("%s: %v (NOTICEs %v)", sql, err, rs)
	}
}

// rddWriter runs sql (a use of something that writes) in the connection's mode: it must succeed
// on the primary, classified as no read.
func rddWriter(t *testing.T, conn *client, what, sql string) bool {
	t.Helper()
	rs, err := runAndRoutes(t, conn, sql)
	return oaJudgeWriter(t, what, sql, rs, err, nil)
}

// rddWriterGap is rddWriter where a known gap (README, Limits) routes the use wrongly: the wrong
// route is reported as the gap, and the test fails once the use is routed right.
func rddWriterGap(t *testing.T, gap string, conn *client, what, sql string) {
	t.Helper()
	rs, err := runAndRoutes(t, conn, sql)
	wrong := ""
	switch {
	case err != nil:
		wrong = fmt.Sprintf("failed: %v", err)
	case len(rs) == 0:
		wrong = "no pgowl NOTICE"
	case rs[len(rs)-1].Role != "primary":
		wrong = fmt.Sprintf("ran on %v", rs[len(rs)-1])
	case rs[len(rs)-1].Reason == "READ_ONLY" || rs[len(rs)-1].Reason == "READ_YOUR_WRITES":
		wrong = fmt.Sprintf("classified as a read (%v)", rs[len(rs)-1])
	}
	owltest.KnownGap(t, wrong != "", fmt.Sprintf("%s: %s: %s: %s", gap, what, sql, wrong))
}

// rddReader runs sql (a use of something that only reads): it must succeed; its route is returned.
func rddReader(t *testing.T, conn *client, what, sql string) []routeNotice {
	t.Helper()
	rs, err := runAndRoutes(t, conn, sql)
	if err != nil {
		t.Errorf("%s: %s: %v (NOTICEs %v); it only reads", what, sql, err, rs)
	}
	return rs
}

// rddOnStandby is what a standby answers to sql (after setup statements in the same string) as
// app, directly; the standbys are caught up first.
func rddOnStandby(t *testing.T, c *cluster.Cluster, sql string) string {
	t.Helper()
	catchUp(t, c)
	return danDirectAs(t, c.Nodes[1], appUser, appPassword, sql)
}

// rddProveStandbyRefuses checks that a standby refuses sql with 25006 (it writes).
func rddProveStandbyRefuses(t *testing.T, c *cluster.Cluster, sql string) {
	t.Helper()
	if got := rddOnStandby(t, c, sql); !strings.Contains(got, "25006") {
		t.Errorf("proof: directly on a standby as app, %q answered %q; want a 25006 error", sql, got)
	}
}

// rddProvePrimaryWrites checks that the primary runs sql, as app, without error.
func rddProvePrimaryRuns(t *testing.T, c *cluster.Cluster, sql string) {
	t.Helper()
	if got := danDirectAs(t, c.Nodes[0], appUser, appPassword, sql); strings.HasPrefix(got, "error") {
		t.Errorf("proof: directly on the primary as app, %q answered %q", sql, got)
	}
}

// rddChangeOnPrimary runs ddl on the primary itself, past pgowl; proves that a standby, once it
// has replayed it, refuses proof (run with search_path path) as a write; and waits polls change
// polls (rddMutate polls every second).
func rddChangeOnPrimary(t *testing.T, c *cluster.Cluster, ddl, path, proof string, polls int) {
	t.Helper()
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, ddl); err != nil {
		t.Fatalf("%s: %v", ddl, err)
	}
	rddProveStandbyRefuses(t, c, "SET search_path = "+path+"; "+proof)
	time.Sleep(time.Duration(polls) * time.Second)
}
