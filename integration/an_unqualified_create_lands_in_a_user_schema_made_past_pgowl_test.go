package integration

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// TestUnqualifiedCreateLandsInAUserSchemaMadePastPgowl: rdd_v's search_path is the
// default "$user", public. public.rddq_v() calls nextval. The schema rdd_v is made on the primary
// itself after pgowl read its catalogue (the change polls find it in pg_namespace). rdd_v then runs, through
// pgowl, CREATE OR REPLACE FUNCTION rddq_v() (unqualified, a reader): PostgreSQL makes
// rdd_v.rddq_v(), the first schema of the path that exists, and public.rddq_v() still writes.
// SELECT public.rddq_v() right after must go to the primary.
func TestUnqualifiedCreateLandsInAUserSchemaMadePastPgowl(t *testing.T) {
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, statementTimeout)
	setup := rddSetupSQL + `
DO $$BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rdd_v') THEN CREATE ROLE rdd_v LOGIN PASSWORD 'secret'; END IF;
END$$;
DROP SCHEMA IF EXISTS rdd_v CASCADE;
GRANT USAGE ON SCHEMA rdd TO rdd_v;
CREATE OR REPLACE FUNCTION public.rddq_v() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('rdd.seq')$$;`
	if err := c.Nodes[0].Exec(ctx, setup); err != nil {
		t.Fatalf("setup: %v", err)
	}
	catchUp(t, c)
	o := startOwl(t, c, func(cfg *config.Config) {
		rddMutate(cfg)
		cfg.Users = append(cfg.Users, config.User{Name: "rdd_v", Password: "secret", Auth: config.AuthSCRAM})
	})
	conn := o.connectAs(t, "rdd_v", "secret", withMode(pgx.QueryExecModeSimpleProtocol))
	conn.routes(t)
	rddWriter(t, conn, "public.rddq_v() writes", "SELECT public.rddq_v()")
	if err := c.Nodes[0].Exec(ctx, "CREATE SCHEMA rdd_v AUTHORIZATION rdd_v"); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	catchUp(t, c)
	time.Sleep(2500 * time.Millisecond)
	rddMust(t, conn, "CREATE OR REPLACE FUNCTION rddq_v() RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 0::bigint'")
	var where string
	if err := c.Nodes[0].QueryRow(ctx, "SELECT string_agg(pronamespace::regnamespace::text, ',' ORDER BY 1) FROM pg_proc WHERE proname = 'rddq_v'").Scan(&where); err == nil {
		t.Logf("rddq_v exists in: %s", where)
	}
	rddWriter(t, conn, "public.rddq_v() right after CREATE OR REPLACE FUNCTION rddq_v() made rdd_v.rddq_v()", "SELECT public.rddq_v()")
	catchUp(t, c)
	rddWriter(t, conn, "once replayed", "SELECT public.rddq_v()")
	other := rddConnect(t, o, pgx.QueryExecModeSimpleProtocol, "")
	rddWriter(t, other, "another session", "SELECT public.rddq_v()")
}
