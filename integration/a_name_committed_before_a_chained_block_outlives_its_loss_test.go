package integration

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/config"
)

// TestANameCommittedBeforeAChainedBlockOutlivesItsLoss: a session sets application_name in a
// block and commits it with COMMIT AND CHAIN; the name is the session's from then on. When the
// chained block's backend is then lost, only the chained block is gone: the client must not be
// told the name from before the committed block, and guards go on matching the committed name.
func TestANameCommittedBeforeAChainedBlockOutlivesItsLoss(t *testing.T) {
	c := sharedClusterFor(t)
	createTable(t, c, "guard_chain_big", `CREATE TABLE guard_chain_big (id int PRIMARY KEY, v text);
		INSERT INTO guard_chain_big SELECT g, 'value ' || g FROM generate_series(1, 100000) g;
		ANALYZE guard_chain_big;`)
	o := startOwl(t, c, func(cfg *config.Config) {
		cfg.Guards = []config.Guard{{Name: "reports", Match: config.GuardMatch{ApplicationNames: []string{"report-*"}},
			MaxCost: guardCostLimit, VerdictCacheTTL: config.DefaultVerdictCacheTTL}}
	})
	const heavy = "SELECT count(*) FROM guard_chain_big WHERE v LIKE '%x%'" // a sequential scan: over the limit

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
	exec("SET application_name = 'report-chain'")
	exec("COMMIT AND CHAIN") // the name is committed; a new block begins
	exec("SELECT 1")
	killed := false
	for _, n := range c.Nodes {
		var pid int32
		if err := n.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = 'report-chain' AND state = 'idle in transaction'").Scan(&pid); err != nil {
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
		t.Fatal("found no backend idle in the chained block named report-chain")
	}
	if _, err := conn.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("a statement of the lost block succeeded")
	} else {
		t.Logf("the statement after the loss: %v", err)
	}
	told := conn.PgConn().ParameterStatus("application_name")
	var shown string
	if err := conn.QueryRow(ctx, "SHOW application_name").Scan(&shown); err != nil {
		t.Fatal(err)
	}
	t.Logf("after the loss: told %q, SHOW %q", told, shown)
	if told != "report-chain" {
		t.Errorf("after the chained block was lost the client was told application_name %q, want report-chain (committed before the block)", told)
	}
	if shown != "report-chain" {
		t.Errorf("SHOW application_name after the chained block was lost: %q, want report-chain", shown)
	}
	if _, err := conn.Exec(ctx, heavy); err == nil {
		t.Errorf("the session is named %q, but the reports guard let its heavy read through", shown)
	}
}
