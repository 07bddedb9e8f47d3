package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestSecurityDefinerDollarUser: a SECURITY DEFINER function without a SET search_path
// resolves the names in its body along the caller's search_path, with "$user" standing for the
// function's owner while it runs (PostgreSQL recomputes the path when the current user changes).
// rdd.sd_owner() (owner rdd_owner, body SELECT g()) called by app with search_path
// "$user", rdd_pub runs rdd_owner.g(), which calls nextval.
func TestSecurityDefinerDollarUser(t *testing.T) {
	c, o := rddSetup(t)
	const path = `"$user", rdd_pub`
	rddProveStandbyRefuses(t, c, "SET search_path = "+path+"; SELECT rdd.sd_owner()")
	rddProveStandbyRefuses(t, c, "SET search_path = "+path+"; SELECT rdd.sd_owner_pl()")
	for _, mode := range bothProtocols {
		t.Run(mode.name, func(t *testing.T) {
			conn := rddConnect(t, o, mode.mode, path)
			rddWriter(t, conn, "SECURITY DEFINER sql function owned by rdd_owner", "SELECT rdd.sd_owner()")
			rddWriter(t, conn, "SECURITY DEFINER plpgsql function owned by rdd_owner", "SELECT rdd.sd_owner_pl()")
		})
	}
}

// TestAlterOwnerOfSecurityDefiner: ALTER FUNCTION ... OWNER TO through pgowl changes what
// "$user" means in a SECURITY DEFINER body: rdd.sd_app() (owner app, who has no schema) reads
// rdd_pub.g(); once owned by rdd_owner, it calls rdd_owner.g(), which writes.
func TestAlterOwnerOfSecurityDefiner(t *testing.T) {
	c, o := rddSetup(t)
	const path = `"$user", rdd_pub`
	conn := rddConnect(t, o, pgx.QueryExecModeSimpleProtocol, path)
	rs := rddReader(t, conn, "owned by app", "SELECT rdd.sd_app()")
	t.Logf("owned by app: %v", rs)
	rddMust(t, conn, "ALTER FUNCTION rdd.sd_app() OWNER TO rdd_owner")
	rddWriter(t, conn, "right after ALTER FUNCTION rdd.sd_app() OWNER TO rdd_owner", "SELECT rdd.sd_app()")
	catchUp(t, c)
	rddWriter(t, conn, "once the standbys replayed the ALTER", "SELECT rdd.sd_app()")
	rddProveStandbyRefuses(t, c, "SET search_path = "+path+"; SELECT rdd.sd_app()")
}

// TestSetRoleDollarUser: after SET ROLE rdd_owner, "$user" in the session's search_path
// is rdd_owner: g() is rdd_owner.g(), which writes.
func TestSetRoleDollarUser(t *testing.T) {
	c, o := rddSetup(t)
	const path = `"$user", rdd_pub`
	rddProveStandbyRefuses(t, c, "SET search_path = "+path+"; SET ROLE rdd_owner; SELECT g()")
	conn := rddConnect(t, o, pgx.QueryExecModeSimpleProtocol, path)
	rs := rddReader(t, conn, "as app", "SELECT g()")
	t.Logf("as app: %v", rs)
	rddMust(t, conn, "SET ROLE rdd_owner")
	rddWriter(t, conn, "after SET ROLE rdd_owner", "SELECT g()")
	rddMust(t, conn, "RESET ROLE")
	rs = rddReader(t, conn, "after RESET ROLE", "SELECT g()")
	t.Logf("after RESET ROLE: %v", rs)
}

// TestBeginAtomicBoundAtCreation: a BEGIN ATOMIC (or RETURN) body is stored parsed, its
// names bound when the function is created: created with search_path rdd_w, its h() is rdd_w.h(),
// which writes, whatever the caller's path. Created and used through pgowl by the same session,
// which changes its path in between.
func TestBeginAtomicBoundAtCreation(t *testing.T) {
	c, o := rddSetup(t)
	for i, mode := range bothProtocols {
		t.Run(mode.name, func(t *testing.T) {
			conn := rddConnect(t, o, mode.mode, "rdd_w, public")
			atomic := fmt.Sprintf("rdd.atom_%d", i)
			ret := fmt.Sprintf("rdd.ret_%d", i)
			rddMust(t, conn, "CREATE FUNCTION "+atomic+"() RETURNS bigint LANGUAGE sql BEGIN ATOMIC SELECT h(); END")
			rddMust(t, conn, "CREATE FUNCTION "+ret+"() RETURNS bigint LANGUAGE sql RETURN h()")
			rddMust(t, conn, "SET search_path = rdd_r, public")
			rddWriter(t, conn, "BEGIN ATOMIC body made under rdd_w, called under rdd_r", "SELECT "+atomic+"()")
			rddWriter(t, conn, "RETURN body made under rdd_w, called under rdd_r", "SELECT "+ret+"()")
			rddProveStandbyRefuses(t, c, "SET search_path = rdd_r, public; SELECT "+atomic+"()")
			// Made under rdd_r, called under rdd_w: reads (where it goes is logged).
			atomicR := atomic + "_r"
			rddMust(t, conn, "CREATE FUNCTION "+atomicR+"() RETURNS bigint LANGUAGE sql BEGIN ATOMIC SELECT h(); END")
			rddMust(t, conn, "SET search_path = rdd_w, public")
			rs := rddReader(t, conn, "BEGIN ATOMIC made under rdd_r, called under rdd_w", "SELECT "+atomicR+"()")
			t.Logf("made under rdd_r, called under rdd_w: %v", rs)
			time.Sleep(1500 * time.Millisecond)
			rs = rddReader(t, conn, "BEGIN ATOMIC made under rdd_r, called under rdd_w, later", "SELECT "+atomicR+"()")
			t.Logf("later: %v", rs)
		})
	}
}

// TestSetSearchPathFromCurrent: SET search_path FROM CURRENT in CREATE FUNCTION or ALTER
// FUNCTION stores the session's path at that moment (rdd_w) in proconfig: h() in the body is then
// rdd_w.h(), which writes, whatever the caller's path.
func TestSetSearchPathFromCurrent(t *testing.T) {
	c, o := rddSetup(t)
	for i, mode := range bothProtocols {
		t.Run(mode.name, func(t *testing.T) {
			conn := rddConnect(t, o, mode.mode, "rdd_w, public")
			f := fmt.Sprintf("rdd.fc_%d", i)
			g := fmt.Sprintf("rdd.fa_%d", i)
			rddMust(t, conn, "CREATE FUNCTION "+f+"() RETURNS bigint LANGUAGE sql VOLATILE SET search_path FROM CURRENT AS 'SELECT h()'")
			rddMust(t, conn, "CREATE FUNCTION "+g+"() RETURNS bigint LANGUAGE plpgsql VOLATILE AS 'BEGIN RETURN h(); END'")
			rddMust(t, conn, "ALTER FUNCTION "+g+"() SET search_path FROM CURRENT")
			rddMust(t, conn, "SET search_path = rdd_r, public")
			rddWriter(t, conn, "CREATE ... SET search_path FROM CURRENT under rdd_w, called under rdd_r", "SELECT "+f+"()")
			rddWriter(t, conn, "ALTER ... SET search_path FROM CURRENT under rdd_w, called under rdd_r", "SELECT "+g+"()")
			rddProveStandbyRefuses(t, c, "SET search_path = rdd_r, public; SELECT "+f+"()")
			rddProveStandbyRefuses(t, c, "SET search_path = rdd_r, public; SELECT "+g+"()")
		})
	}
}

// TestSchemaRenamedOntoThePath: the session's path is "rdd_sN_hi, rdd_sN_app"; rdd_sN_hi
// does not exist, rdd_sN_app.k() reads. ALTER SCHEMA rdd_sN_other RENAME TO rdd_sN_hi, where
// rdd_sN_other holds a k() that writes, makes k() mean the writer. Through pgowl (the session's
// own change), and past pgowl (the superuser on the primary; pgowl's polls look at pg_proc,
// pg_class, pg_rewrite, pg_policy and pg_type, and a schema rename writes none of them).
func TestSchemaRenamedOntoThePath(t *testing.T) {
	c, o := rddSetup(t)
	ctx := timeoutCtx(t, statementTimeout)
	mk := func(n string) {
		sql := fmt.Sprintf(`
DROP SCHEMA IF EXISTS rdd_s%[1]s_hi CASCADE; DROP SCHEMA IF EXISTS rdd_s%[1]s_app CASCADE; DROP SCHEMA IF EXISTS rdd_s%[1]s_other CASCADE;
CREATE SCHEMA rdd_s%[1]s_app AUTHORIZATION app; CREATE SCHEMA rdd_s%[1]s_other AUTHORIZATION app;
CREATE FUNCTION rdd_s%[1]s_app.k() RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 0::bigint';
CREATE FUNCTION rdd_s%[1]s_other.k() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('rdd.seq')$$;`, n)
		if err := c.Nodes[0].Exec(ctx, sql); err != nil {
			t.Fatalf("set up schemas %s: %v", n, err)
		}
	}
	mk("1")
	mk("2")
	// ALTER SCHEMA ... RENAME needs CREATE on the database.
	if err := c.Nodes[0].Exec(ctx, "GRANT CREATE ON DATABASE postgres TO app"); err != nil {
		t.Fatalf("grant: %v", err)
	}
	catchUp(t, c)
	for _, tc := range []struct {
		name, n string
		past    bool
	}{{"through pgowl", "1", false}, {"past pgowl", "2", true}} {
		t.Run(tc.name, func(t *testing.T) {
			path := fmt.Sprintf("rdd_s%[1]s_hi, rdd_s%[1]s_app", tc.n)
			conn := rddConnect(t, o, pgx.QueryExecModeSimpleProtocol, path)
			rs := rddReader(t, conn, "before the rename", "SELECT k()")
			t.Logf("before the rename: %v", rs)
			rename := fmt.Sprintf("ALTER SCHEMA rdd_s%[1]s_other RENAME TO rdd_s%[1]s_hi", tc.n)
			if tc.past {
				if err := c.Nodes[0].Exec(ctx, rename); err != nil {
					t.Fatalf("%s on the primary: %v", rename, err)
				}
				time.Sleep(3 * time.Second) // three change polls
			} else {
				rddMust(t, conn, rename)
			}
			rddWriter(t, conn, "after "+rename, "SELECT k()")
			rddProveStandbyRefuses(t, c, "SET search_path = "+path+"; SELECT k()")
			if tc.past {
				// A fresh session too.
				other := rddConnect(t, o, pgx.QueryExecModeSimpleProtocol, path)
				rddWriter(t, other, "another session after "+rename, "SELECT k()")
			}
		})
	}
	_ = strings.TrimSpace
}

// TestAlterFunctionSecurityDefiner: ALTER FUNCTION rdd.sd_later() SECURITY DEFINER
// through pgowl (app is a member of its owner rdd_owner): its body's g() now resolves with "$user"
// = rdd_owner, to rdd_owner.g(), which writes.
func TestAlterFunctionSecurityDefiner(t *testing.T) {
	c, o := rddSetup(t)
	const path = `"$user", rdd_pub`
	conn := rddConnect(t, o, pgx.QueryExecModeSimpleProtocol, path)
	rs := rddReader(t, conn, "SECURITY INVOKER", "SELECT rdd.sd_later()")
	t.Logf("SECURITY INVOKER: %v", rs)
	rddMust(t, conn, "ALTER FUNCTION rdd.sd_later() SECURITY DEFINER")
	rddWriter(t, conn, "right after ALTER FUNCTION rdd.sd_later() SECURITY DEFINER", "SELECT rdd.sd_later()")
	catchUp(t, c)
	rddWriter(t, conn, "once the standbys replayed it", "SELECT rdd.sd_later()")
	rddProveStandbyRefuses(t, c, "SET search_path = "+path+"; SELECT rdd.sd_later()")
}

// TestAlterFunctionSetRole: ALTER FUNCTION ... SET role = rdd_owner through pgowl (app
// is a member of rdd_owner): the function runs as rdd_owner, so "$user" in the caller's
// search_path is rdd_owner and its body's g() is rdd_owner.g(), which writes.
func TestAlterFunctionSetRole(t *testing.T) {
	c, o := rddSetup(t)
	const path = `"$user", rdd_pub`
	conn := rddConnect(t, o, pgx.QueryExecModeSimpleProtocol, path)
	rddMust(t, conn, "CREATE FUNCTION rdd.setrole_f() RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT g()'")
	catchUp(t, c)
	rs := rddReader(t, conn, "as app", "SELECT rdd.setrole_f()")
	t.Logf("as app: %v", rs)
	rddMust(t, conn, "ALTER FUNCTION rdd.setrole_f() SET role = rdd_owner")
	catchUp(t, c)
	rddWriter(t, conn, "after ALTER FUNCTION rdd.setrole_f() SET role = rdd_owner", "SELECT rdd.setrole_f()")
	rddProveStandbyRefuses(t, c, "SET search_path = "+path+"; SELECT rdd.setrole_f()")
}
