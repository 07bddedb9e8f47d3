package integration

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/route"
)

// TestSwitchoverWithPause runs a planned switchover (stop the primary pg1,
// promote the standby pg2) while pgbench runs TPC-B through pgowl, once
// held by PAUSE/RESUME in the admin console and once without. With PAUSE
// no transaction may fail; without it the failures are counted and reported.
func TestSwitchoverWithPause(t *testing.T) {
	for _, withPause := range []bool{true, false} {
		name := "without_pause"
		if withPause {
			name = "with_pause"
		}
		t.Run(name, func(t *testing.T) {
			c := ownCluster(t, 1)
			o := startOwl(t, c, func(cfg *config.Config) {
				cfg.Admin.Users = []string{appUser}
				cfg.Routing.Notice = false
				// This test is about PAUSE/RESUME, not about nodes that stop
				// answering: a CI machine that stalls pg2 for a second must not
				// turn into 08006 from limits.first_reply_timeout (see
				// vanished_node_test.go and stopped_standby_test.go for that).
				cfg.Limits.FirstReplyTimeout = 10 * time.Second
			})
			pgbench := pgBinary(t, "pgbench")
			if res := runCmd(t, 2*time.Minute, o.clientEnv(), pgbench, "-i", "-s", "1", "--quiet"); res.exitCode != 0 {
				t.Fatalf("pgbench -i exited with %d\n%s\n%s", res.exitCode, res.stdout, res.stderr)
			}
			ctx := timeoutCtx(t, 2*time.Minute)
			if err := c.Nodes[1].WaitCaughtUp(ctx, c.Nodes[0]); err != nil {
				t.Fatal(err)
			}
			var bench cmdResult
			var done sync.WaitGroup
			done.Go(func() {
				bench = runCmd(t, 2*time.Minute, o.clientEnv(), pgbench, "-n", "-T", "15", "-c", "8", "-j", "2")
			})
			time.Sleep(4 * time.Second)

			var console *pgx.Conn
			if withPause {
				var err error
				console, err = pgx.Connect(ctx, o.dsn(appUser, appPassword, "pgowl", nil)+"&default_query_exec_mode=simple_protocol")
				if err != nil {
					t.Fatal(err)
				}
				defer console.Close(context.Background())
				if _, err := console.Exec(ctx, "PAUSE"); err != nil {
					t.Fatalf("PAUSE: %v", err)
				}
			}
			started := time.Now()
			if err := c.Nodes[0].Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.Nodes[1].Promote(ctx); err != nil {
				t.Fatal(err)
			}
			o.waitSnapshot(t, 10*time.Second, "pg2 seen as the primary", func(s *route.Snapshot) bool {
				n := findNode(s, "pg2")
				return n != nil && n.Up && n.Role == route.RolePrimary
			})
			if withPause {
				if _, err := console.Exec(ctx, "RESUME"); err != nil {
					t.Fatalf("RESUME: %v", err)
				}
			}
			t.Logf("switchover took %s (stop pg1, promote pg2, pgowl sees pg2 as primary)", time.Since(started).Round(time.Millisecond))
			done.Wait()
			failed := pgbenchFailed.FindStringSubmatch(bench.stdout)
			aborted := abortedClients(bench.stderr)
			committed := pgbenchCommitted.FindStringSubmatch(bench.stdout)
			t.Logf("pgbench: exit %d, committed %v, failed %v, clients aborted %d of 8", bench.exitCode, committed, failed, aborted)
			if withPause {
				if bench.exitCode != 0 || aborted != 0 || failed == nil || failed[1] != "0" {
					t.Errorf("with PAUSE/RESUME pgbench saw failures\nstdout:\n%s\nstderr:\n%s", bench.stdout, tailOf(bench.stderr, 4<<10))
				}
				return
			}
			// Without PAUSE the failures are a measurement, not a defect: report them.
			var reasons []string
			for _, line := range strings.Split(bench.stderr, "\n") {
				if strings.Contains(line, "ERROR") || strings.Contains(line, "FATAL") || strings.Contains(line, "aborted") {
					reasons = append(reasons, line)
				}
			}
			t.Logf("without PAUSE: %d of 8 clients aborted; their errors:\n%s", aborted, strings.Join(reasons, "\n"))
		})
	}
}
