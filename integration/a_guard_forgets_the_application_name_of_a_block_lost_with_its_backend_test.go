package integration

import (
	"strings"
	"testing"
)

// TestAGuardForgetsTheApplicationNameOfABlockLostWithItsBackend: a session that names itself
// inside a transaction block (SET LOCAL application_name, or SET) and then loses the block's
// backend (the node restarted, an operator's pg_terminate_backend) is told the transaction is
// gone and goes on outside it: the name set in the block went with it, as a rollback takes it
// back. The session's application_name is the one it had before the block again (SHOW says so),
// the client is told so, and a guard matches that name, not the lost block's.
func TestAGuardForgetsTheApplicationNameOfABlockLostWithItsBackend(t *testing.T) {
	c := sharedClusterFor(t)
	o := startReportsGuardOwl(t, c, nil)
	for _, set := range []string{"SET LOCAL application_name = 'report-lost'", "SET application_name = 'report-lost'"} {
		t.Run(strings.Fields(set)[1], func(t *testing.T) {
			ctx := timeoutCtx(t, statementTimeout)
			conn := connectAsShop(t, o)
			for _, sql := range []string{"BEGIN", set, "SELECT 1"} {
				execOrFail(t, ctx, conn, sql)
			}
			terminateBlockBackend(t, ctx, c, "report-lost")
			failsOnTheLostBackend(t, ctx, conn)
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
			if _, err := conn.Exec(ctx, guardBigHeavyRead); err != nil {
				t.Errorf("the session is named %q again, but its heavy read was refused as the lost block's report-lost: %v", shown, err)
			}
		})
	}
}

// TestANameCommittedBeforeAChainedBlockOutlivesItsLoss: a session sets application_name in a
// block and commits it with COMMIT AND CHAIN; the name is the session's from then on. When the
// chained block's backend is then lost, only the chained block is gone: the client must not be
// told the name from before the committed block, and guards go on matching the committed name.
func TestANameCommittedBeforeAChainedBlockOutlivesItsLoss(t *testing.T) {
	c := sharedClusterFor(t)
	o := startReportsGuardOwl(t, c, nil)
	ctx := timeoutCtx(t, statementTimeout)
	conn := connectAsShop(t, o)
	// The name is committed; a new block begins.
	for _, sql := range []string{"BEGIN", "SET application_name = 'report-chain'", "COMMIT AND CHAIN", "SELECT 1"} {
		execOrFail(t, ctx, conn, sql)
	}
	terminateBlockBackend(t, ctx, c, "report-chain")
	failsOnTheLostBackend(t, ctx, conn)
	told := conn.PgConn().ParameterStatus("application_name")
	var shown string
	if err := conn.QueryRow(ctx, "SHOW application_name").Scan(&shown); err != nil {
		t.Fatal(err)
	}
	if told != "report-chain" || shown != "report-chain" {
		t.Errorf("after the chained block was lost: the client was told application_name %q and SHOW says %q, want report-chain (committed before the block)", told, shown)
	}
	if _, err := conn.Exec(ctx, guardBigHeavyRead); err == nil {
		t.Errorf("the session is named %q, but the reports guard let its heavy read through", shown)
	}
}
