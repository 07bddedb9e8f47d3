package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// TestAGuardForgetsTheApplicationNameOfABlockLostWithItsBackend: a session that names itself
// inside a transaction block (SET LOCAL application_name, or SET) and then loses the block's
// backend (the node restarted, an operator's pg_terminate_backend) is told the transaction is
// gone and goes on outside it: the name set in the block went with it, as a rollback takes it
// back. The session's application_name is the one it had before the block again (SHOW says so),
// and a guard matches that name, not the lost block's.
func TestAGuardForgetsTheApplicationNameOfABlockLostWithItsBackend(t *testing.T) {
	c := sharedClusterFor(t)
	createTable(t, c, "guard_lost_big", `CREATE TABLE guard_lost_big (id int PRIMARY KEY, v text);
		INSERT INTO guard_lost_big SELECT g, 'value ' || g FROM generate_series(1, 100000) g;
		ANALYZE guard_lost_big;`)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Guards = []config.Guard{{Name: "reports", Match: config.GuardMatch{ApplicationNames: []string{"report-*"}},
			MaxCost: guardCostLimit, VerdictCacheTTL: config.DefaultVerdictCacheTTL}}
	})
	const heavy = "SELECT count(*) FROM guard_lost_big WHERE v LIKE '%x%'" // a sequential scan: over the limit

	for _, set := range []string{"SET LOCAL application_name = 'report-lost'", "SET application_name = 'report-lost'"} {
		t.Run(strings.Fields(set)[1], func(t *testing.T) {
			ctx := timeoutCtx(t, statementTimeout)
			conn := o.connect(t, func(cfg *pgx.ConnConfig) {
				withMode(pgx.QueryExecModeSimpleProtocol)(cfg)
				cfg.RuntimeParams["application_name"] = "shop"
			})
			exec := func(sql string) {
				t.Helper()
				if _, err := conn.Exec(ctx, sql); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
			}
			exec("BEGIN")
			exec(set)
			exec("SELECT 1")
			// Kill the block's backend, wherever it runs.
			killed := false
			for _, n := range c.Nodes {
				var pid int32
				if err := n.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = 'report-lost' AND state = 'idle in transaction'").Scan(&pid); err != nil {
					continue
				}
				if err := n.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
					t.Fatal(err)
				}
				deadline := time.Now().Add(10 * time.Second)
				for {
					var left int
					if err := n.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&left); err != nil {
						t.Fatal(err)
					}
					if left == 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("backend %d still exists 10s after pg_terminate_backend", pid)
					}
					time.Sleep(20 * time.Millisecond)
				}
				killed = true
			}
			if !killed {
				t.Fatal("found no backend idle in the block named report-lost")
			}
			// The block is gone: pgowl says so, and the session is outside it.
			if _, err := conn.Exec(ctx, "SELECT 1"); err == nil {
				t.Fatal("a statement of the lost block succeeded")
			} else {
				t.Logf("the statement after the loss: %v", err)
			}
			if st := conn.PgConn().TxStatus(); st != 'I' {
				t.Fatalf("after the loss the client's transaction status is %q, want idle", st)
			}
			var shown string
			if err := conn.QueryRow(ctx, "SHOW application_name").Scan(&shown); err != nil {
				t.Fatal(err)
			}
			if shown != "shop" {
				t.Fatalf("SHOW application_name after the block was lost: %q, want shop", shown)
			}
			if got := conn.PgConn().ParameterStatus("application_name"); got != shown {
				t.Errorf("the client was last told application_name %q, while the session's is %q", got, shown)
			}
			if _, err := conn.Exec(ctx, heavy); err != nil {
				t.Errorf("the session is named %q again, but its heavy read was refused as the lost block's report-lost: %v", shown, err)
			}
		})
	}
}
