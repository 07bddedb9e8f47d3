package integration

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
)

// The tests of a role's default settings (ALTER ROLE ... SET statement_timeout) changing under
// pooled backends share these: a role with a default of 41s and a table <role>_t it may lock a
// row of, pgowl with the role as a user and min_idle backends, and a read of a setting.

// startOwlWithRoleDefault makes role (password "secret") on c's primary with statement_timeout
// 41s by default and one row in <role>_t, waits for the standbys, and starts pgowl with the role
// as a SCRAM user and pool.min_idle 2. At the test's end the role's defaults are reset.
func startOwlWithRoleDefault(t *testing.T, ctx context.Context, c *cluster.Cluster, role string) *owl {
	t.Helper()
	table := role + "_t"
	setup := `
DO $$BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '` + role + `') THEN CREATE ROLE ` + role + ` LOGIN PASSWORD 'secret'; END IF;
END$$;
CREATE TABLE IF NOT EXISTS ` + table + ` (id int);
TRUNCATE ` + table + `;
INSERT INTO ` + table + ` VALUES (1);
GRANT SELECT, UPDATE ON ` + table + ` TO ` + role + `;
ALTER ROLE ` + role + ` RESET ALL;
ALTER ROLE ` + role + ` SET statement_timeout = '41s';`
	if err := c.Nodes[0].Exec(ctx, setup); err != nil {
		t.Fatalf("setup: %v", err)
	}
	t.Cleanup(func() {
		cctx, ccancel := context5s()
		defer ccancel()
		_ = c.Nodes[0].Exec(cctx, "ALTER ROLE "+role+" RESET ALL")
	})
	catchUp(t, c)
	return startOwl(t, c, func(cfg *config.Config) {
		cfg.Users = append(cfg.Users, config.User{Name: role, Password: "secret", Auth: config.AuthSCRAM})
		cfg.Pool.MinIdle = 2
		cfg.Routing.ReadYourWrites = config.ReadYourWritesOff
	})
}

// readRoleSetting reads setting in s, a session of role: on a standby, or with onPrimary on the
// primary (a row of <role>_t locked). It returns the value and where it ran (node/role).
func readRoleSetting(t *testing.T, ctx context.Context, s *client, role, setting string, onPrimary bool) (value, where string) {
	t.Helper()
	sql := "SELECT current_setting('" + setting + "')"
	if onPrimary {
		sql += " FROM " + role + "_t FOR SHARE"
	}
	if err := s.QueryRow(ctx, sql).Scan(&value); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	where = "?"
	if rs := s.routes(t); len(rs) > 0 {
		where = rs[len(rs)-1].Node + "/" + rs[len(rs)-1].Role
	}
	return value, where
}

// roleSession opens a simple-protocol session of role through o.
func roleSession(t *testing.T, o *owl, role string) *client {
	t.Helper()
	return o.connectAs(t, role, "secret", withMode(pgx.QueryExecModeSimpleProtocol))
}
