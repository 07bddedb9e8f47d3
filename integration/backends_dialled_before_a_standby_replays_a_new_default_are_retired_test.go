package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
)

// TestBackendsDialledBeforeAStandbyReplaysANewDefaultAreRetired: pgowl retires a database's
// pooled backends when the catalogue (read on the primary) finds a role's default search_path
// changed, and min_idle dials new ones at once. A standby that has not replayed the ALTER ROLE
// yet logs those new backends in under the OLD default; once it has replayed it, a new direct
// connection to it gets the new default. Sessions opened through pgowl after the standby caught
// up must run with the new default too (pgowl classifies them with it), wherever they are
// routed: no backend that logged in under the old default may serve them. pgowl retires the
// standby's backends again once the monitor sees its replay past the change
// (proxy/standby_defaults.go).
func TestBackendsDialledBeforeAStandbyReplaysANewDefaultAreRetired(t *testing.T) {
	t.Run("replay-paused", func(t *testing.T) { retireWithReplay(t, true) })
}

// TestBackendsOfAStandbyAreRetiredWhenANewDefaultIsSetPastPgowl: the control of the test
// above, the standbys replaying as usual.
func TestBackendsOfAStandbyAreRetiredWhenANewDefaultIsSetPastPgowl(t *testing.T) {
	retireWithReplay(t, false)
}

func retireWithReplay(t *testing.T, pause bool) {
	c := sharedClusterFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const setup = `
DO $$BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'h2_u') THEN CREATE ROLE h2_u LOGIN PASSWORD 'secret'; END IF;
END$$;
CREATE SCHEMA IF NOT EXISTS h2_old;
CREATE SCHEMA IF NOT EXISTS h2_new;
GRANT USAGE ON SCHEMA h2_old, h2_new TO h2_u;
ALTER ROLE h2_u SET search_path = h2_old, public;`
	if err := c.Nodes[0].Exec(ctx, setup); err != nil {
		t.Fatalf("setup: %v", err)
	}
	catchUp(t, c)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Users = append(cfg.Users, config.User{Name: "h2_u", Password: "secret", Auth: config.AuthSCRAM})
		cfg.Pool.MinIdle = 2
		cfg.Routing.ReadYourWrites = config.ReadYourWritesOff
	})
	standbys := c.Nodes[1:]
	resume := resumeReplayAtCleanup(t, standbys)

	const probe = "SELECT current_setting('search_path')"
	// Warm backends of h2_u on every node: several sessions read.
	var warm []*client
	for range 4 {
		warm = append(warm, o.connectAs(t, "h2_u", "secret", withMode(pgx.QueryExecModeSimpleProtocol)))
	}
	for range 3 {
		for _, w := range warm {
			var s string
			if err := w.QueryRow(ctx, probe).Scan(&s); err != nil {
				t.Fatalf("warm-up: %v", err)
			}
			t.Logf("warm-up: %s %v", s, w.routes(t))
		}
	}

	for _, n := range standbys {
		if !pause {
			break
		}
		if err := n.PauseReplay(ctx); err != nil {
			t.Fatalf("pause replay on %s: %v", n.Name, err)
		}
	}
	if err := c.Nodes[0].Exec(ctx, "ALTER ROLE h2_u SET search_path = h2_new, public"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, ccancel := context5s()
		defer ccancel()
		_ = c.Nodes[0].Exec(cctx, "ALTER ROLE h2_u RESET search_path")
	})
	// pgowl's catalogue (read on the primary) finds the new default and retires the backends.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(o.logs.String(), "default search_path changed") {
		if time.Now().After(deadline) {
			t.Fatalf("pgowl did not notice the new default within 20s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// min_idle refills while the standbys still serve the old default.
	time.Sleep(3 * time.Second)
	resume()
	catchUp(t, c)
	for _, n := range standbys {
		var s string
		dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
		conn, err := pgx.Connect(dctx, n.DSN("h2_u", "secret", appDatabase))
		if err != nil {
			dcancel()
			t.Fatal(err)
		}
		err = conn.QueryRow(dctx, "SELECT current_setting('search_path')").Scan(&s)
		conn.Close(dctx)
		dcancel()
		if err != nil || s != "h2_new, public" {
			t.Fatalf("oracle: a new direct connection to %s after replay: %q, %v", n.Name, s, err)
		}
	}
	// Let the monitor see the standbys caught up again.
	o.waitRoles(t, initialRoles(c))
	time.Sleep(2 * time.Second)

	stale := 0
	seen := map[string]int{}
	for range 6 {
		s := o.connectAs(t, "h2_u", "secret", withMode(pgx.QueryExecModeSimpleProtocol))
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
			if strings.HasSuffix(got, "h2_old, public") {
				stale++
			}
		}
	}
	t.Logf("new sessions after the standbys replayed the ALTER: %v", seen)
	what := fmt.Sprintf("%d of 24 reads of sessions opened after the standbys replayed ALTER ROLE h2_u SET search_path ran on a backend with the old default (a new direct connection gets h2_new, public): %v", stale, seen)
	if stale > 0 {
		t.Error(what)
	}
}

// resumeReplayAtCleanup returns what resumes replay on nodes (each bounded to 10 s), and makes
// the test's cleanup run it: a test that paused replay leaves the shared cluster replaying.
func resumeReplayAtCleanup(t *testing.T, nodes []*cluster.Node) func() {
	resume := func() {
		for _, n := range nodes {
			rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = n.ResumeReplay(rctx)
			rcancel()
		}
	}
	t.Cleanup(resume)
	return resume
}
