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

// The tests of a role's default search_path changing under pooled backends share these: a role
// whose default names one schema, then another; sessions of it through pgowl; and the count of
// reads that ran with the old default.

// searchPathProbe shows the search_path a session runs with.
const searchPathProbe = "SELECT current_setting('search_path')"

// roleWithDefaultSearchPath makes role (password "secret") on c's primary, with schemas
// <role>_old and <role>_new it may use and a default search_path of <role>_old, public, and waits
// for the standbys to replay it. At the test's end the default is reset.
func roleWithDefaultSearchPath(t *testing.T, ctx context.Context, c *cluster.Cluster, role string) {
	t.Helper()
	setup := `
DO $$BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '` + role + `') THEN CREATE ROLE ` + role + ` LOGIN PASSWORD 'secret'; END IF;
END$$;
CREATE SCHEMA IF NOT EXISTS ` + role + `_old;
CREATE SCHEMA IF NOT EXISTS ` + role + `_new;
GRANT USAGE ON SCHEMA ` + role + `_old, ` + role + `_new TO ` + role + `;
ALTER ROLE ` + role + ` SET search_path = ` + role + `_old, public;`
	if err := c.Nodes[0].Exec(ctx, setup); err != nil {
		t.Fatalf("setup: %v", err)
	}
	t.Cleanup(func() {
		cctx, ccancel := context5s()
		defer ccancel()
		_ = c.Nodes[0].Exec(cctx, "ALTER ROLE "+role+" RESET search_path")
	})
	catchUp(t, c)
}

// moveRoleDefaultSearchPath sets role's default search_path to <role>_new, public on the primary.
func moveRoleDefaultSearchPath(t *testing.T, ctx context.Context, c *cluster.Cluster, role string) {
	t.Helper()
	if err := c.Nodes[0].Exec(ctx, "ALTER ROLE "+role+" SET search_path = "+role+"_new, public"); err != nil {
		t.Fatal(err)
	}
}

// roleSessions opens n sessions of role through o.
func roleSessions(t *testing.T, o *owl, role string, n int) []*client {
	t.Helper()
	var sessions []*client
	for range n {
		sessions = append(sessions, o.connectAs(t, role, "secret", withMode(pgx.QueryExecModeSimpleProtocol)))
	}
	return sessions
}

// readSearchPaths has each session read its search_path rounds times, so that their backends
// are made on the nodes they are routed to; with mustRead, a failed read fails the test.
func readSearchPaths(t *testing.T, ctx context.Context, sessions []*client, rounds int, mustRead bool) {
	t.Helper()
	for range rounds {
		for _, s := range sessions {
			var path string
			if err := s.QueryRow(ctx, searchPathProbe).Scan(&path); err != nil && mustRead {
				t.Fatalf("warm-up: %v", err)
			}
		}
	}
}

// directSearchPath is the search_path a new direct connection of role to node starts with.
func directSearchPath(t *testing.T, ctx context.Context, node *cluster.Node, role string) string {
	t.Helper()
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	defer dcancel()
	conn, err := pgx.Connect(dctx, node.DSN(role, "secret", appDatabase))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(dctx)
	var path string
	if err := conn.QueryRow(dctx, searchPathProbe).Scan(&path); err != nil {
		t.Fatal(err)
	}
	return path
}

// staleDefaultReads opens 6 new sessions of role through o and has each read its search_path 4
// times: it returns how many of the 24 reads ran with the old default (<role>_old), and the
// reads by node and path.
func staleDefaultReads(t *testing.T, ctx context.Context, o *owl, role string) (stale int, seen map[string]int) {
	t.Helper()
	seen = map[string]int{}
	for _, s := range roleSessions(t, o, role, 6) {
		for range 4 {
			var got string
			if err := s.QueryRow(ctx, searchPathProbe).Scan(&got); err != nil {
				t.Fatalf("probe: %v", err)
			}
			where := "?"
			if rs := s.routes(t); len(rs) > 0 {
				where = rs[len(rs)-1].Node + "/" + rs[len(rs)-1].Role
			}
			seen[where+" "+got]++
			if strings.HasSuffix(got, role+"_old, public") {
				stale++
			}
		}
	}
	return stale, seen
}

// waitForLogLine waits up to 20 s for a line of o's log that holds every one of parts.
func waitForLogLine(t *testing.T, o *owl, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !slices.ContainsFunc(strings.Split(o.logs.String(), "\n"), func(line string) bool {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				return false
			}
		}
		return true
	}) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in pgowl's log within 20s", parts)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// changeDefaultWhilePg3Lags pauses replay on c's third node, moves role's default search_path,
// and waits for pgowl to notice the change and for pg2 to have replayed it.
func changeDefaultWhilePg3Lags(t *testing.T, ctx context.Context, c *cluster.Cluster, o *owl, role string) {
	t.Helper()
	if err := c.Nodes[2].PauseReplay(ctx); err != nil {
		t.Fatal(err)
	}
	moveRoleDefaultSearchPath(t, ctx, c, role)
	waitForLogLine(t, o, "default settings changed")
	waitForLogLine(t, o, `"node":"pg2"`, "a standby replayed new default settings")
}

// pointPg2AtLaggingPg3 reloads o with the name pg2 pointing at the third node's server (which
// has not replayed role's new default; the name pg3 leaves the configuration), lets the warm
// sessions and min_idle log in there under the old default, then resumes replay (resume) and
// waits until the server has replayed the change, a direct connection shows it, and the
// monitor has seen it.
func pointPg2AtLaggingPg3(t *testing.T, ctx context.Context, c *cluster.Cluster, o *owl, role string, warm []*client, resume func()) {
	t.Helper()
	pg2, pg3 := c.Nodes[1], c.Nodes[2]
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
	readSearchPaths(t, ctx, warm, 3, false)
	time.Sleep(3 * time.Second) // min_idle dials pg3's server under the old default
	resume()
	if err := pg3.WaitCaughtUp(ctx, c.Nodes[0]); err != nil {
		t.Fatal(err)
	}
	if got := directSearchPath(t, ctx, pg3, role); got != role+"_new, public" {
		t.Fatalf("oracle: a direct connection to pg3 after replay: %q", got)
	}
	time.Sleep(3 * time.Second) // the monitor sees pg3's server caught up
}
