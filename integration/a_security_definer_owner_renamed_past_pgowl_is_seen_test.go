package integration

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

// In a SECURITY DEFINER function "$user" is the owner's name. A role renamed on the primary itself
// (ALTER ROLE ... RENAME TO) changes that name without writing pg_proc, pg_class, pg_namespace or
// any other row the change polls select (pg_authid is shared, and only superusers read it): the
// polls compare a hash of the names of the roles that own SECURITY DEFINER functions.
const h1RenameSetup = `
DO $$ BEGIN
	IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'h1r_new') THEN
		DROP OWNED BY h1r_new; DROP ROLE h1r_new;
	END IF;
	IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'h1r_old') THEN
		DROP OWNED BY h1r_old; DROP ROLE h1r_old;
	END IF;
END $$;
CREATE ROLE h1r_old NOLOGIN;
DROP SCHEMA IF EXISTS h1r_new CASCADE;
DROP SCHEMA IF EXISTS h1r CASCADE;
-- The schema the owner's "$user" means once it is renamed: its h1r_g() writes.
CREATE SCHEMA h1r_new;
GRANT USAGE ON SCHEMA h1r_new TO PUBLIC;
CREATE SEQUENCE h1r_new.seq;
GRANT ALL ON SEQUENCE h1r_new.seq TO PUBLIC;
CREATE FUNCTION h1r_new.h1r_g() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('h1r_new.seq')$$;
CREATE OR REPLACE FUNCTION public.h1r_g() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT 0::bigint$$;
CREATE SCHEMA h1r;
GRANT USAGE ON SCHEMA h1r TO PUBLIC;
GRANT CREATE ON SCHEMA h1r TO h1r_old;
CREATE FUNCTION h1r.sd() RETURNS bigint LANGUAGE sql VOLATILE SECURITY DEFINER AS 'SELECT h1r_g()';
ALTER FUNCTION h1r.sd() OWNER TO h1r_old;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public, h1r, h1r_new TO PUBLIC;
`

// TestASecurityDefinerOwnerRenamedPastPgowlIsSeen: h1r.sd() (owner h1r_old) calls h1r_g(), a
// read while "$user" is h1r_old; after the owner is renamed h1r_new on the primary itself, the body
// runs h1r_new.h1r_g(), which writes, and a standby refuses the call. Within three change polls
// pgowl sends it to the primary.
func TestASecurityDefinerOwnerRenamedPastPgowlIsSeen(t *testing.T) {
	c, o := setupAndStart(t, "h1 role rename objects", h1RenameSetup, rddMutate)
	const path = `"$user", public`
	conn := rddConnect(t, o, pgx.QueryExecModeSimpleProtocol, path)
	rs := rddReader(t, conn, "owned by h1r_old (no schema of that name)", "SELECT h1r.sd()")
	t.Logf("before the rename: %v", rs)
	rddChangeOnPrimary(t, c, "ALTER ROLE h1r_old RENAME TO h1r_new", path, "SELECT h1r.sd()", 3)
	rddWriter(t, conn, "3 s after the owner was renamed to h1r_new on the primary", "SELECT h1r.sd()")
}
