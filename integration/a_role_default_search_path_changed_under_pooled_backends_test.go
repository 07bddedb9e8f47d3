package integration

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// TestRoleDefaultSearchPathResetWhileBackendsArePooled: PostgreSQL applies a role's
// search_path default (ALTER ROLE ... SET search_path) when a backend starts; RESET (and RESET ALL,
// DISCARD ALL) go back to the value the backend started with. rdd_u's default is rdd_w, public,
// where rddk() writes; public.rddk() reads. The session runs ALTER ROLE rdd_u RESET search_path
// through pgowl, which reads the catalogue again and from then on resolves rddk() along
// "$user", public: a read. A standby backend pooled before the ALTER would still resolve it to
// rdd_w.rddk(), which writes (25006): pgowl replaces the pooled backends of the database when
// the catalogue finds a default search_path changed, and every session, those that ran before
// the ALTER included, runs on a backend with the new default.
func TestRoleDefaultSearchPathResetWhileBackendsArePooled(t *testing.T) {
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, statementTimeout)
	setup := rddSetupSQL + `
DO $$BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rdd_u') THEN CREATE ROLE rdd_u LOGIN PASSWORD 'secret'; END IF;
END$$;
ALTER ROLE rdd_u SET search_path = rdd_w, public;
GRANT USAGE ON SCHEMA rdd TO rdd_u;
CREATE OR REPLACE FUNCTION public.rddk() RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 0::bigint';
CREATE OR REPLACE FUNCTION rdd_w.rddk() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('rdd.seq')$$;`
	if err := c.Nodes[0].Exec(ctx, setup); err != nil {
		t.Fatalf("setup: %v", err)
	}
	t.Cleanup(func() {
		cctx, cancel := context5s()
		defer cancel()
		_ = c.Nodes[0].Exec(cctx, "ALTER ROLE rdd_u SET search_path = rdd_w, public")
	})
	catchUp(t, c)
	o := startOwl(t, c, func(cfg *config.Config) {
		rddMutate(cfg)
		cfg.Users = append(cfg.Users, config.User{Name: "rdd_u", Password: "secret", Auth: config.AuthSCRAM})
	})
	rddProveStandbyRefuses(t, c, "SET search_path = rdd_w, public; SELECT rddk()")

	// Warm standby backends of rdd_u: several sessions read at once.
	var warm []*client
	for i := 0; i < 4; i++ {
		warm = append(warm, o.connectAs(t, "rdd_u", "secret", withMode(pgx.QueryExecModeSimpleProtocol)))
	}
	for round := 0; round < 3; round++ {
		for _, w := range warm {
			rs, err := runAndRoutes(t, w, "SELECT current_setting('search_path')")
			if round == 0 {
				t.Logf("warm-up: %v, %v", rs, err)
			}
		}
	}
	conn := o.connectAs(t, "rdd_u", "secret", withMode(pgx.QueryExecModeSimpleProtocol))
	conn.routes(t)
	rddWriter(t, conn, "under the role default rdd_w, public", "SELECT rddk()")
	rddMust(t, conn, "ALTER ROLE rdd_u RESET search_path")
	catchUp(t, c)
	time.Sleep(500 * time.Millisecond)
	t.Logf("a fresh direct connection to a standby as rdd_u: search_path %q",
		danDirectAs(t, c.Nodes[1], "rdd_u", "secret", "SELECT current_setting('search_path')"))
	fresh := o.connectAs(t, "rdd_u", "secret", withMode(pgx.QueryExecModeSimpleProtocol))
	fresh.routes(t)
	for i, w := range append(warm, conn, fresh) {
		var path string
		rs, err := runAndRoutes(t, w, "SELECT rddk()")
		if err2 := w.QueryRow(ctx, "SELECT current_setting('search_path')").Scan(&path); err2 == nil {
			w.routes(t)
		}
		// The pooled backends that logged in under the old default are replaced
		// (pool.RetireDatabase): the statement runs where pgowl classified it.
		if err != nil || path != `"$user", public` {
			t.Errorf("session %d: SELECT rddk() after ALTER ROLE rdd_u RESET search_path: %v (NOTICEs %v); its backend's search_path %q, want the new default", i, err, rs, path)
		}
	}
}

func context5s() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}
