package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
)

// TestANodeMovedByAReloadIsFollowedAgainForANewDefault: a change of a role's default
// search_path is followed on the standbys (proxy/standby_defaults.go). pg2 replays it and is
// marked done. A reload then moves the name pg2 to another server (pg3's address, pg3 removed),
// a standby that has not replayed the change yet: its new backends log in under the old
// default. Once it has replayed the change, sessions opened through pgowl must get the new
// default, as a direct connection does.
func TestANodeMovedByAReloadIsFollowedAgainForANewDefault(t *testing.T) {
	c := sharedClusterFor(t)
	pg2, pg3 := c.Nodes[1], c.Nodes[2]
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const setup = `
DO $$BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rv_mv_u') THEN CREATE ROLE rv_mv_u LOGIN PASSWORD 'secret'; END IF;
END$$;
CREATE SCHEMA IF NOT EXISTS rv_mv_old;
CREATE SCHEMA IF NOT EXISTS rv_mv_new;
GRANT USAGE ON SCHEMA rv_mv_old, rv_mv_new TO rv_mv_u;
ALTER ROLE rv_mv_u SET search_path = rv_mv_old, public;`
	if err := c.Nodes[0].Exec(ctx, setup); err != nil {
		t.Fatalf("setup: %v", err)
	}
	catchUp(t, c)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Users = append(cfg.Users, config.User{Name: "rv_mv_u", Password: "secret", Auth: config.AuthSCRAM})
		cfg.Pool.MinIdle = 2
		cfg.Routing.ReadYourWrites = config.ReadYourWritesOff
	})
	resume := resumeReplayAtCleanup(t, []*cluster.Node{pg3})
	const probe = "SELECT current_setting('search_path')"
	var warm []*client
	for range 4 {
		warm = append(warm, o.connectAs(t, "rv_mv_u", "secret", withMode(pgx.QueryExecModeSimpleProtocol)))
	}
	for range 3 {
		for _, w := range warm {
			var s string
			if err := w.QueryRow(ctx, probe).Scan(&s); err != nil {
				t.Fatalf("warm-up: %v", err)
			}
		}
	}
	if err := pg3.PauseReplay(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Nodes[0].Exec(ctx, "ALTER ROLE rv_mv_u SET search_path = rv_mv_new, public"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, ccancel := context5s()
		defer ccancel()
		_ = c.Nodes[0].Exec(cctx, "ALTER ROLE rv_mv_u RESET search_path")
	})
	waitLog := func(what ...string) {
		deadline := time.Now().Add(20 * time.Second)
		for !slices.ContainsFunc(strings.Split(o.logs.String(), "\n"), func(line string) bool {
			for _, w := range what {
				if !strings.Contains(line, w) {
					return false
				}
			}
			return true
		}) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in pgowl's log within 20s", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitLog("default search_path changed")
	waitLog(`"node":"pg2"`, "a standby replayed a new default search_path")

	// The name pg2 moves to pg3's server, which has not replayed the change; pg3 is removed.
	cfg := o.cfg
	cfg.Nodes = slices.DeleteFunc(slices.Clone(cfg.Nodes), func(n config.Node) bool { return n.Name == pg3.Name })
	for i := range cfg.Nodes {
		if cfg.Nodes[i].Name == pg2.Name {
			cfg.Nodes[i].Host, cfg.Nodes[i].Port = pg3.Host, pg3.Port
		}
	}
	if err := o.inst.Apply(cfg); err != nil {
		t.Fatalf("reload: %v", err)
	}
	o.states = o.inst.Nodes()
	// Sessions through pgowl warm pg2 (now pg3's server) under the old default; min_idle refills too.
	for range 3 {
		for _, w := range warm {
			var s string
			_ = w.QueryRow(ctx, probe).Scan(&s)
		}
	}
	time.Sleep(3 * time.Second)
	resume()
	if err := pg3.WaitCaughtUp(ctx, c.Nodes[0]); err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.Connect(dctx, pg3.DSN("rv_mv_u", "secret", appDatabase))
	if err != nil {
		dcancel()
		t.Fatal(err)
	}
	var direct string
	err = conn.QueryRow(dctx, probe).Scan(&direct)
	conn.Close(dctx)
	dcancel()
	if err != nil || direct != "rv_mv_new, public" {
		t.Fatalf("oracle: a direct connection to pg3 after replay: %q, %v", direct, err)
	}
	time.Sleep(3 * time.Second) // the monitor sees pg3's server caught up

	stale := 0
	seen := map[string]int{}
	for range 6 {
		s := o.connectAs(t, "rv_mv_u", "secret", withMode(pgx.QueryExecModeSimpleProtocol))
		for range 4 {
			var got string
			if err := s.QueryRow(ctx, probe).Scan(&got); err != nil {
				t.Fatalf("probe: %v", err)
			}
			where := "?"
			if rs := s.routes(t); len(rs) > 0 {
				where = rs[len(rs)-1].Node + "/" + rs[len(rs)-1].Role
			}
			seen[where+" "+got]++
			if strings.HasSuffix(got, "rv_mv_old, public") {
				stale++
			}
		}
	}
	t.Logf("sessions after the moved node replayed the ALTER: %v", seen)
	if stale > 0 {
		t.Errorf("%d of 24 reads ran on a backend with the old default after the server pg2 now names replayed the change: %v", stale, seen)
	}
}
