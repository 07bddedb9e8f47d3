package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// TestARoleDefaultChangedWhileTheDatabaseIsUnusedReachesTheNextSession: the catalogue's change
// polls stop once a database has gone unused for a minute, while pool.min_idle keeps that
// database's backends logged in. An ALTER ROLE ... SET statement_timeout made on the primary
// meanwhile is then not found until a statement asks for the catalogue again, and the first
// session to arrive, however long after the change, runs on a backend that logged in under the
// old default: a new direct connection shows the new value.
func TestARoleDefaultChangedWhileTheDatabaseIsUnusedReachesTheNextSession(t *testing.T) {
	c := sharedClusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const role = "ldi_u"
	setup := `
DO $$BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '` + role + `') THEN CREATE ROLE ` + role + ` LOGIN PASSWORD 'secret'; END IF;
END$$;
CREATE TABLE IF NOT EXISTS ldi_t (id int);
TRUNCATE ldi_t;
INSERT INTO ldi_t VALUES (1);
GRANT SELECT, UPDATE ON ldi_t TO ` + role + `;
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
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Users = append(cfg.Users, config.User{Name: role, Password: "secret", Auth: config.AuthSCRAM})
		cfg.Pool.MinIdle = 2
		cfg.Routing.ReadYourWrites = config.ReadYourWritesOff
	})

	read := func(s *client, sql string) (string, string) {
		t.Helper()
		var got string
		if err := s.QueryRow(ctx, sql).Scan(&got); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		where := "?"
		if rs := s.routes(t); len(rs) > 0 {
			where = rs[len(rs)-1].Node + "/" + rs[len(rs)-1].Role
		}
		return got, where
	}
	// Warm backends of the role on every node, logged in with statement_timeout 41s.
	for range 3 {
		s := o.connectAs(t, role, "secret", withMode(pgx.QueryExecModeSimpleProtocol))
		for i := range 4 {
			sql := "SELECT current_setting('statement_timeout')"
			if i == 3 {
				sql += " FROM ldi_t FOR SHARE"
			}
			if got, where := read(s, sql); got != "41s" {
				t.Fatalf("before any change: %s on %s", got, where)
			}
		}
		s.Close(ctx)
	}

	// No statement for a minute: the polls stop, the pooled backends stay.
	const stopped = "not polled until the database is used again"
	for deadline := time.Now().Add(100 * time.Second); !strings.Contains(o.logs.String(), stopped); time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("the catalogue's polls did not stop within 100 s")
		}
	}

	if err := c.Nodes[0].Exec(ctx, "ALTER ROLE "+role+" SET statement_timeout = '43s'"); err != nil {
		t.Fatal(err)
	}
	catchUp(t, c)
	for _, n := range c.Nodes {
		if got := danDirectAs(t, n, role, "secret", "SELECT current_setting('statement_timeout')"); got != "43s" {
			t.Fatalf("oracle: a new direct connection to %s: statement_timeout = %q, want 43s", n.Name, got)
		}
	}
	time.Sleep(5 * time.Second) // five poll intervals, past the standbys' replay

	var wrong []string
	for i := range 3 {
		s := o.connectAs(t, role, "secret", withMode(pgx.QueryExecModeSimpleProtocol))
		sql := "SELECT current_setting('statement_timeout')"
		if i == 2 {
			sql += " FROM ldi_t FOR SHARE"
		}
		if got, where := read(s, sql); got != "43s" {
			wrong = append(wrong, "session "+string(rune('1'+i))+" on "+where+": "+got)
		}
		s.Close(ctx)
	}
	// What a session opened once the use has woken the polls reads (for the report).
	time.Sleep(3 * time.Second)
	later := o.connectAs(t, role, "secret", withMode(pgx.QueryExecModeSimpleProtocol))
	got, where := read(later, "SELECT current_setting('statement_timeout')")
	t.Logf("a session opened 3 s after those: %s on %s; pgowl logged a change of default settings: %v",
		got, where, strings.Contains(o.logs.String(), "default settings changed"))
	if len(wrong) > 0 {
		t.Errorf("sessions opened 5 s after ALTER ROLE %s SET statement_timeout = '43s' (a new direct connection shows 43s) read the old default in their first statement: %v", role, wrong)
	}
}
