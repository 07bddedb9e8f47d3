package integration

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

// rv2ra.f() / rv2ra.v (reads) shadow rv2rb.f() / rv2rb.v (write) along rv2ra, rv2rb. Each is
// renamed away, or moved to another schema, on the primary itself, past pgowl.
const renamedAwayPastPgowlSetup = `
DROP SCHEMA IF EXISTS rv2ra CASCADE;
DROP SCHEMA IF EXISTS rv2rb CASCADE;
DROP SCHEMA IF EXISTS rv2rc CASCADE;
CREATE SCHEMA rv2ra; CREATE SCHEMA rv2rb; CREATE SCHEMA rv2rc;
GRANT USAGE ON SCHEMA rv2ra, rv2rb, rv2rc TO PUBLIC;
CREATE SEQUENCE rv2rb.seq; GRANT ALL ON SEQUENCE rv2rb.seq TO PUBLIC;
CREATE FUNCTION rv2rb.f() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('rv2rb.seq')$$;
CREATE FUNCTION rv2ra.f() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT 0::bigint$$;
CREATE FUNCTION rv2rb.g() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('rv2rb.seq')$$;
CREATE FUNCTION rv2ra.g() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT 0::bigint$$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA rv2ra, rv2rb TO PUBLIC;
CREATE VIEW rv2rb.v AS SELECT rv2rb.f() AS x;
CREATE VIEW rv2ra.v AS SELECT 0::bigint AS x;
CREATE VIEW rv2rb.u AS SELECT rv2rb.f() AS x;
CREATE VIEW rv2ra.u AS SELECT 0::bigint AS x;
GRANT SELECT ON ALL TABLES IN SCHEMA rv2ra, rv2rb TO PUBLIC;
`

// TestANameRenamedAwayPastPgowlUnshadowsItsNamesake: a function or view renamed, or moved to
// another schema, on the primary itself is read by its new name alone (the change poll finds only
// that). The held entry under its old name went with it for functions, and stayed for views (and
// relations and types): v still resolved to the reading view that was renamed away, not to the
// writing namesake later on the path, until the next whole read (30 s), and failed on a standby
// with 25006. Found by review.
func TestANameRenamedAwayPastPgowlUnshadowsItsNamesake(t *testing.T) {
	c, o := setupAndStart(t, "renamed-away objects", renamedAwayPastPgowlSetup, rddMutate)
	const path = "rv2ra, rv2rb"
	conn := rddConnect(t, o, pgx.QueryExecModeSimpleProtocol, path)
	for _, sql := range []string{"SELECT f()", "SELECT g()", "SELECT x FROM v", "SELECT x FROM u"} {
		rddReader(t, conn, "before", sql)
	}
	rddChangeOnPrimary(t, c, "ALTER FUNCTION rv2ra.f() RENAME TO f_old; ALTER FUNCTION rv2ra.g() SET SCHEMA rv2rc; "+
		"ALTER VIEW rv2ra.v RENAME TO v_old; ALTER VIEW rv2ra.u SET SCHEMA rv2rc", path, "SELECT f()", 4)
	for _, sql := range []string{"SELECT f()", "SELECT g()", "SELECT x FROM v", "SELECT x FROM u"} {
		rddWriter(t, conn, "4 s after the reading namesake was renamed or moved away past pgowl", sql)
	}
}
