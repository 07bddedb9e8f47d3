package integration

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestOwnAlterOfAFunctionHoldsReadsWithReadYourWritesOff: README ("Read your own
// writes"): with routing.read_your_writes off "a session's own changes of definitions still [leave
// a position]: CREATE, ALTER or DROP of functions, ... until a standby has replayed the change, the
// session's reads run on the primary". With replay paused on the standbys, each ALTER FUNCTION
// below is followed by a read of what it changed; the read must see it (run on the primary).
func TestOwnAlterOfAFunctionHoldsReadsWithReadYourWritesOff(t *testing.T) {
	c, o := rddSetup(t)
	conn := rddConnect(t, o, pgx.QueryExecModeSimpleProtocol, "")
	rddMust(t, conn, "CREATE FUNCTION rdd.pos_f() RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 1::bigint'")
	catchUp(t, c)
	for _, step := range []struct{ change, read, want string }{
		{"ALTER FUNCTION rdd.pos_f() STABLE", "SELECT provolatile::text FROM pg_proc WHERE oid = 'rdd.pos_f()'::regprocedure", "s"},
		{"ALTER FUNCTION rdd.pos_f() OWNER TO rdd_owner", "SELECT proowner::regrole::text FROM pg_proc WHERE oid = 'rdd.pos_f()'::regprocedure", "rdd_owner"},
		{"ALTER FUNCTION rdd.pos_f() SECURITY DEFINER", "SELECT prosecdef::text FROM pg_proc WHERE oid = 'rdd.pos_f()'::regprocedure", "true"},
	} {
		catchUp(t, c)
		ctx := timeoutCtx(t, statementTimeout)
		resume := pauseStandbyReplay(t, ctx, c.Nodes[1:])
		rddMust(t, conn, step.change)
		var got string
		err := conn.QueryRow(ctx, step.read).Scan(&got)
		rs := conn.routes(t)
		resume()
		if err != nil || got != step.want {
			t.Errorf("right after %q (replay paused on the standbys): %s answered %q (%v) on %v; the session's own change says %q",
				step.change, step.read, got, err, rs, step.want)
		} else {
			t.Logf("%s: %v", step.change, rs)
		}
	}
	catchUp(t, c)
}
