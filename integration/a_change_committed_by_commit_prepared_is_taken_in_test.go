package integration

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgowl/pgowl/internal/cluster"
)

// TestChangeCommittedByCommitPrepared: the session replaces a reading function by one
// that calls nextval inside a transaction it ends with PREPARE TRANSACTION, then commits it with
// COMMIT PREPARED. The change is the session's own, committed by its own statement; its next use
// of the function must go to the primary. (A cluster of its own: the shared one has
// max_prepared_transactions = 0.)
func TestChangeCommittedByCommitPrepared(t *testing.T) {
	opts := clusterOptions(1)
	opts.Logf = t.Logf
	opts.Settings = map[string]string{"max_prepared_transactions": "10"}
	c := cluster.StartForTest(t, opts)
	ctx := timeoutCtx(t, statementTimeout)
	if err := c.Nodes[0].Exec(ctx, rddSetupSQL); err != nil {
		t.Fatalf("setup: %v", err)
	}
	catchUp(t, c)
	o := startOwl(t, c, rddMutate)
	for i, wait := range []time.Duration{0, 3 * time.Second} {
		conn := rddConnect(t, o, pgx.QueryExecModeSimpleProtocol, "")
		f := []string{"rdd.tp_0", "rdd.tp_1"}[i]
		rddMust(t, conn, "CREATE OR REPLACE FUNCTION "+f+"() RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT 0::bigint'")
		catchUp(t, c)
		time.Sleep(wait) // with 3s, the polls no longer leave the name out
		rs := rddReader(t, conn, "reader", "SELECT "+f+"()")
		t.Logf("reader: %v", rs)
		rddMust(t, conn, "BEGIN")
		rddMust(t, conn, "CREATE OR REPLACE FUNCTION "+f+"() RETURNS bigint LANGUAGE sql VOLATILE AS $$SELECT nextval('rdd.seq')$$")
		rddMust(t, conn, "PREPARE TRANSACTION 'rdd_tp_"+f[len(f)-1:]+"'")
		rs = rddReader(t, conn, "between PREPARE TRANSACTION and COMMIT PREPARED (the old reader still runs)", "SELECT "+f+"()")
		t.Logf("between: %v", rs)
		rddMust(t, conn, "COMMIT PREPARED 'rdd_tp_"+f[len(f)-1:]+"'")
		rddWriter(t, conn, "right after COMMIT PREPARED", "SELECT "+f+"()")
		catchUp(t, c)
		time.Sleep(2500 * time.Millisecond) // two change polls
		rddWriter(t, conn, "2.5s after COMMIT PREPARED, the standby has replayed it", "SELECT "+f+"()")
		other := rddConnect(t, o, pgx.QueryExecModeSimpleProtocol, "")
		rddWriter(t, other, "another session, 2.5s after COMMIT PREPARED", "SELECT "+f+"()")
	}
	rddProveStandbyRefuses(t, c, "SELECT rdd.tp_0()")
}
