package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Review (DDL): changes made on the primary itself (past pgowl). docs/routing.md: every
// classify.change_poll_interval (1 s) the catalogue asks which rows of pg_proc, pg_class,
// pg_rewrite, pg_policy and pg_type were written since, and reads those names, "so a function
// replaced on the primary itself ... is planned with its new body within about one interval".
// Each case below waits three intervals, then uses the object from a fresh session.

// rddPastPgowl runs setup on the primary as the superuser, starts pgowl (the catalogue loads
// setup's objects), checks before, runs change on the primary, waits three polls, and runs use
// from a fresh session: it must run on the primary.
func rddPastPgowl(t *testing.T, setup, change, use string) {
	t.Helper()
	c, o := rddSetup(t)
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, setup); err != nil {
		t.Fatalf("setup: %v", err)
	}
	catchUp(t, c)
	time.Sleep(3 * time.Second) // the polls take setup in
	before := rddConnect(t, o, pgx.QueryExecModeSimpleProtocol, "")
	rs, err := runAndRoutes(t, before, use)
	t.Logf("before the change: %s: %v, err %v", use, rs, err)
	if err := c.Nodes[0].Exec(ctx, change); err != nil {
		t.Fatalf("change %q: %v", change, err)
	}
	catchUp(t, c)
	time.Sleep(3 * time.Second)
	after := rddConnect(t, o, pgx.QueryExecModeSimpleProtocol, "")
	rs, err = runAndRoutes(t, after, use)
	if err != nil || len(rs) == 0 || rs[len(rs)-1].Role != "primary" {
		t.Errorf("3s after %q on the primary, %s from a fresh session: %v, err %v; want the primary", change, use, rs, err)
	}
	// What a standby does with it.
	t.Logf("directly on a standby: %s", rddOnStandby(t, c, use))
}

// A pgowl:readonly comment removed past pgowl: the function writes (nextval), and the assertion
// that sent it to a standby is gone. pg_description is not among the polled catalogues.
func TestPastPgowlReadonlyCommentRemoved(t *testing.T) {
	rddPastPgowl(t, `
CREATE OR REPLACE FUNCTION rdd.pc_ro() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('rdd.seq')$$;
COMMENT ON FUNCTION rdd.pc_ro() IS 'pgowl:readonly';`,
		"COMMENT ON FUNCTION rdd.pc_ro() IS NULL",
		"SELECT rdd.pc_ro()")
}

// A pgowl:writes comment added past pgowl: the documented remedy for a STABLE function whose
// dynamic SQL calls nextval (declared access sends it to a standby, which refuses it).
func TestPastPgowlWritesCommentAdded(t *testing.T) {
	rddPastPgowl(t, `
CREATE OR REPLACE FUNCTION rdd.pc_w() RETURNS bigint LANGUAGE plpgsql STABLE
  AS $$DECLARE r bigint; BEGIN EXECUTE 'SELECT nextval(' || quote_literal('rdd.seq') || ')' INTO r; RETURN r; END$$;`,
		"COMMENT ON FUNCTION rdd.pc_w() IS 'pgowl:writes'",
		"SELECT rdd.pc_w()")
}

// A domain CHECK that calls a writer, added past pgowl (pg_constraint).
func TestPastPgowlDomainCheckAdded(t *testing.T) {
	rddPastPgowl(t, `CREATE DOMAIN rdd.pdom AS int;`,
		"ALTER DOMAIN rdd.pdom ADD CONSTRAINT c CHECK (rdd_w.h() > 0 AND VALUE > 0)",
		"SELECT 5::rdd.pdom")
}

// An unlogged table made a child of a table that already has a child, past pgowl
// (pg_inherits; the parent's pg_class row is not rewritten): reading the parent reads the
// unlogged child, which a standby refuses.
func TestPastPgowlUnloggedChildInherited(t *testing.T) {
	rddPastPgowl(t, `
CREATE TABLE rdd.pinh (id int);
CREATE TABLE rdd.pinh_c1 () INHERITS (rdd.pinh);
CREATE UNLOGGED TABLE rdd.pinh_u (id int);
INSERT INTO rdd.pinh_u VALUES (1);
GRANT SELECT ON rdd.pinh, rdd.pinh_c1, rdd.pinh_u TO PUBLIC;`,
		"ALTER TABLE rdd.pinh_u INHERIT rdd.pinh",
		"SELECT count(*) FROM rdd.pinh")
}

// An unlogged table attached as a partition past pgowl.
func TestPastPgowlUnloggedPartitionAttached(t *testing.T) {
	rddPastPgowl(t, `
CREATE TABLE rdd.ppart (id int) PARTITION BY RANGE (id);
CREATE TABLE rdd.ppart_1 PARTITION OF rdd.ppart FOR VALUES FROM (0) TO (10);
CREATE UNLOGGED TABLE rdd.ppart_u (id int);
INSERT INTO rdd.ppart_u VALUES (15);
GRANT SELECT ON rdd.ppart, rdd.ppart_1, rdd.ppart_u TO PUBLIC;`,
		"ALTER TABLE rdd.ppart ATTACH PARTITION rdd.ppart_u FOR VALUES FROM (10) TO (20)",
		"SELECT count(*) FROM rdd.ppart")
}

// TestUnloggedObjectsMadeThroughPgowl: unlogged partitions, children and sequences made
// by the session through pgowl, read at once.
func TestUnloggedObjectsMadeThroughPgowl(t *testing.T) {
	c, o := rddSetup(t)
	for i, mode := range bothProtocols {
		t.Run(mode.name, func(t *testing.T) {
			conn := rddConnect(t, o, mode.mode, "")
			n := fmt.Sprintf("%d", i)
			rddMust(t, conn, "CREATE TABLE rdd.upart_"+n+" (id int) PARTITION BY RANGE (id)")
			rddMust(t, conn, "CREATE TABLE rdd.upart_"+n+"_1 PARTITION OF rdd.upart_"+n+" FOR VALUES FROM (0) TO (10)")
			rddMust(t, conn, "CREATE UNLOGGED TABLE rdd.upart_"+n+"_u PARTITION OF rdd.upart_"+n+" FOR VALUES FROM (10) TO (20)")
			rddMust(t, conn, "INSERT INTO rdd.upart_"+n+" VALUES (15)")
			rddWriterOrLocal(t, conn, "partitioned table with an unlogged partition made by CREATE ... PARTITION OF", "SELECT count(*) FROM rdd.upart_"+n)

			rddMust(t, conn, "CREATE TABLE rdd.uinh_"+n+" (id int)")
			rddMust(t, conn, "CREATE UNLOGGED TABLE rdd.uinh_"+n+"_u () INHERITS (rdd.uinh_"+n+")")
			rddWriterOrLocal(t, conn, "table with an unlogged child made by CREATE ... INHERITS", "SELECT count(*) FROM rdd.uinh_"+n)

			rddMust(t, conn, "CREATE UNLOGGED SEQUENCE rdd.useq_"+n)
			rddWriterOrLocal(t, conn, "unlogged sequence read", "SELECT last_value FROM rdd.useq_"+n)
			rddMust(t, conn, "CREATE SEQUENCE rdd.lseq_"+n)
			rs := rddReader(t, conn, "logged sequence read", "SELECT last_value FROM rdd.lseq_"+n)
			t.Logf("logged sequence: %v", rs)
			rddMust(t, conn, "ALTER SEQUENCE rdd.lseq_"+n+" SET UNLOGGED")
			rddWriterOrLocal(t, conn, "sequence turned unlogged by ALTER SEQUENCE", "SELECT last_value FROM rdd.lseq_"+n)
		})
	}
	for _, sql := range []string{"SELECT count(*) FROM rdd.upart_0", "SELECT count(*) FROM rdd.uinh_0", "SELECT last_value FROM rdd.useq_0", "SELECT last_value FROM rdd.lseq_0"} {
		t.Logf("directly on a standby: %s: %s", sql, rddOnStandby(t, c, sql))
	}
}

// rddWriterOrLocal runs sql, which needs the primary (it writes or reads node-local data): it
// must succeed on the primary with a reason that is no read.
func rddWriterOrLocal(t *testing.T, conn *client, what, sql string) {
	t.Helper()
	rs, err := runAndRoutes(t, conn, sql)
	if err != nil || len(rs) == 0 || rs[len(rs)-1].Role != "primary" {
		t.Errorf("%s: %s: %v, err %v; want the primary", what, sql, rs, err)
		return
	}
	if r := rs[len(rs)-1].Reason; r == "READ_ONLY" || r == "READ_YOUR_WRITES" {
		t.Errorf("%s: %s: classified as a read (%v); it reached the primary only through read-your-writes", what, sql, rs)
	}
}

// An overload renamed away past pgowl: rdd.pov(integer) reads, rdd.pov(bigint) writes; pov(1)
// calls the integer one until it is renamed to pov_gone, then the bigint one (pg_proc is polled:
// the row found is named pov_gone).
func TestPastPgowlOverloadRenamedAway(t *testing.T) {
	rddPastPgowl(t, `
CREATE OR REPLACE FUNCTION rdd.pov(x integer) RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 0::bigint';
CREATE OR REPLACE FUNCTION rdd.pov(x bigint) RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('rdd.seq')$$;`,
		"ALTER FUNCTION rdd.pov(integer) RENAME TO pov_gone",
		"SELECT rdd.pov(1)")
}

// A reading namesake moved out of the path past pgowl: with search_path rdd_pm_hi, rdd_w the
// reader rdd_pm_hi.h() shadows rdd_w.h(), which writes, until ALTER FUNCTION ... SET SCHEMA moves
// it to rdd_pm_away (control: the pg_proc row keeps its name, and the polls read it; this passes).
func TestPastPgowlShadowMovedOutOfThePath(t *testing.T) {
	c, o := rddSetup(t)
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, `
CREATE SCHEMA IF NOT EXISTS rdd_pm_hi AUTHORIZATION app;
CREATE SCHEMA IF NOT EXISTS rdd_pm_away AUTHORIZATION app;
CREATE OR REPLACE FUNCTION rdd_pm_hi.h() RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 0::bigint';`); err != nil {
		t.Fatal(err)
	}
	catchUp(t, c)
	time.Sleep(2500 * time.Millisecond)
	conn := rddConnect(t, o, pgx.QueryExecModeSimpleProtocol, "rdd_pm_hi, rdd_w")
	rs := rddReader(t, conn, "shadowed", "SELECT h()")
	t.Logf("shadowed: %v", rs)
	for _, change := range []string{"ALTER FUNCTION rdd_pm_hi.h() SET SCHEMA rdd_pm_away"} {
		if err := c.Nodes[0].Exec(ctx, change); err != nil {
			t.Fatal(err)
		}
		catchUp(t, c)
		time.Sleep(3 * time.Second)
		fresh := rddConnect(t, o, pgx.QueryExecModeSimpleProtocol, "rdd_pm_hi, rdd_w")
		rddWriter(t, fresh, "3s after "+change+" past pgowl", "SELECT h()")
	}
}
