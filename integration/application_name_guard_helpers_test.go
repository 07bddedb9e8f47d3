package integration

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
	"github.com/pgowl/pgowl/internal/cluster"
)

// The tests of which application_name a guard matches share these: guard_big, a guard named
// reports on the report-* applications, sessions that start as "shop", and the loss of a
// block's backend.

// guardBigHeavyRead is a sequential scan of guard_big: over guardCostLimit.
const guardBigHeavyRead = "SELECT count(*) FROM guard_big WHERE v LIKE '%x%'"

// startReportsGuardOwl makes guard_big on c and starts pgowl with the reports guard (cost limit
// guardCostLimit on the applications named report-*), then mutate.
func startReportsGuardOwl(t *testing.T, c *cluster.Cluster, mutate func(*config.Config)) *owl {
	t.Helper()
	createGuardBig(t, c)
	return startOwl(t, c, func(cfg *config.Config) {
		cfg.Guards = []config.Guard{{Name: "reports", Match: config.GuardMatch{ApplicationNames: []string{"report-*"}},
			MaxCost: guardCostLimit, VerdictCacheTTL: config.DefaultVerdictCacheTTL}}
		if mutate != nil {
			mutate(cfg)
		}
	})
}

// connectAsShop opens a simple-protocol session through o whose startup application_name is shop.
func connectAsShop(t *testing.T, o *owl) *client {
	t.Helper()
	return o.connect(t, func(cfg *pgx.ConnConfig) {
		withMode(pgx.QueryExecModeSimpleProtocol)(cfg)
		cfg.RuntimeParams["application_name"] = "shop"
	})
}

// execOrFail runs sql on conn and fails t when it fails.
func execOrFail(t *testing.T, ctx context.Context, conn *client, sql string) {
	t.Helper()
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// terminateBlockBackend ends, with pg_terminate_backend, the backend on c's nodes that is idle in
// a transaction block under application_name, and waits until it is gone.
func terminateBlockBackend(t *testing.T, ctx context.Context, c *cluster.Cluster, applicationName string) {
	t.Helper()
	for _, n := range c.Nodes {
		var pid int32
		if err := n.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle in transaction'", applicationName).Scan(&pid); err != nil {
			continue
		}
		if err := n.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var left int
			if err := n.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&left); err != nil {
				t.Fatal(err)
			}
			if left == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("backend %d still exists 10s after pg_terminate_backend", pid)
			}
		}
	}
	t.Fatalf("found no backend idle in a block under application_name %s", applicationName)
}

// failsOnTheLostBackend runs a statement of the lost block: pgowl says the backend is gone, and
// the client is outside the block.
func failsOnTheLostBackend(t *testing.T, ctx context.Context, conn *client) {
	t.Helper()
	if _, err := conn.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("a statement of the lost block succeeded")
	} else {
		t.Logf("the statement after the loss: %v", err)
	}
	if st := conn.PgConn().TxStatus(); st != 'I' {
		t.Fatalf("after the loss the client's transaction status is %q, want idle", st)
	}
}
