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
	"github.com/pgowl/pgowl/route"
)

// TestANameMovedAfterANewDefaultWasReplayedEverywhereIsFollowed: pgowl starts with pg1 and pg2
// only. A role's default search_path changes while pg3 (outside pgowl's configuration) has its
// replay paused; pg2 replays the change, so every node pgowl knows has replayed it. A reload then
// points the name pg2 at pg3's server, which has not replayed the change: min_idle and sessions
// log in there under the old default. Once pg3 has replayed the change, sessions opened through
// pgowl must get the new default, as a direct connection does (proxy/standby_defaults.go keeps
// the change for servers that come later). A reload that adds a lagging standby is the same case.
func TestANameMovedAfterANewDefaultWasReplayedEverywhereIsFollowed(t *testing.T) {
	c := sharedClusterFor(t)
	pg3 := c.Nodes[2]
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const setup = `
DO $$BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rv_add_u') THEN CREATE ROLE rv_add_u LOGIN PASSWORD 'secret'; END IF;
END$$;
CREATE SCHEMA IF NOT EXISTS rv_add_old;
CREATE SCHEMA IF NOT EXISTS rv_add_new;
GRANT USAGE ON SCHEMA rv_add_old, rv_add_new TO rv_add_u;
ALTER ROLE rv_add_u SET search_path = rv_add_old, public;`
	if err := c.Nodes[0].Exec(ctx, setup); err != nil {
		t.Fatalf("setup: %v", err)
	}
	catchUp(t, c)
	o := startOwlNoWait(t, c, func(cfg *config.Config) {
		cfg.Users = append(cfg.Users, config.User{Name: "rv_add_u", Password: "secret", Auth: config.AuthSCRAM})
		cfg.Pool.MinIdle = 2
		cfg.Routing.ReadYourWrites = config.ReadYourWritesOff
		cfg.Nodes = slices.DeleteFunc(cfg.Nodes, func(n config.Node) bool { return n.Name == pg3.Name })
	})
	o.waitRoles(t, map[string]route.Role{c.Nodes[0].Name: route.RolePrimary, c.Nodes[1].Name: route.RoleStandby})
	resume := resumeReplayAtCleanup(t, []*cluster.Node{pg3})
	const probe = "SELECT current_setting('search_path')"
	var warm []*client
	for range 4 {
		warm = append(warm, o.connectAs(t, "rv_add_u", "secret", withMode(pgx.QueryExecModeSimpleProtocol)))
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
	if err := c.Nodes[0].Exec(ctx, "ALTER ROLE rv_add_u SET search_path = rv_add_new, public"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, ccancel := context5s()
		defer ccancel()
		_ = c.Nodes[0].Exec(cctx, "ALTER ROLE rv_add_u RESET search_path")
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
	time.Sleep(time.Second) // a few more snapshots: the follow is over

	// The reload points pg2 at pg3's server, which has not replayed the change.
	cfg := o.cfg
	cfg.Nodes = slices.Clone(cfg.Nodes)
	for i := range cfg.Nodes {
		if cfg.Nodes[i].Name == c.Nodes[1].Name {
			cfg.Nodes[i].Host, cfg.Nodes[i].Port = pg3.Host, pg3.Port
		}
	}
	if err := o.inst.Apply(cfg); err != nil {
		t.Fatalf("reload: %v", err)
	}
	o.states = o.inst.Nodes()
	for range 3 {
		for _, w := range warm {
			var s string
			_ = w.QueryRow(ctx, probe).Scan(&s)
		}
	}
	time.Sleep(3 * time.Second) // min_idle dials pg3 under the old default
	resume()
	if err := pg3.WaitCaughtUp(ctx, c.Nodes[0]); err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.Connect(dctx, pg3.DSN("rv_add_u", "secret", appDatabase))
	if err != nil {
		dcancel()
		t.Fatal(err)
	}
	var direct string
	err = conn.QueryRow(dctx, probe).Scan(&direct)
	conn.Close(dctx)
	dcancel()
	if err != nil || direct != "rv_add_new, public" {
		t.Fatalf("oracle: a direct connection to pg3 after replay: %q, %v", direct, err)
	}
	time.Sleep(3 * time.Second) // the monitor sees pg3 caught up

	stale := 0
	seen := map[string]int{}
	for range 6 {
		s := o.connectAs(t, "rv_add_u", "secret", withMode(pgx.QueryExecModeSimpleProtocol))
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
			if strings.HasSuffix(got, "rv_add_old, public") {
				stale++
			}
		}
	}
	t.Logf("sessions after pg3's server, which pg2 now names, replayed the ALTER: %v", seen)
	if stale > 0 {
		t.Errorf("%d of 24 reads ran on a backend with the old default after pg3's server, which pg2 names since a reload after the follow had ended, replayed the change: %v", stale, seen)
	}
}
