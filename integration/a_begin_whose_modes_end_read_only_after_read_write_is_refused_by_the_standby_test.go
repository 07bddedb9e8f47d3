package integration

import (
	"testing"
)

// TestABeginWhoseModesEndReadOnlyAfterReadWriteIsRefusedByTheStandby: PostgreSQL applies the modes
// of BEGIN / START TRANSACTION in the order written, each as a SET of transaction_read_only. In
// "BEGIN READ WRITE, READ ONLY" the last mode decides that the transaction is read-only, but a hot
// standby refuses the first one before it reaches the second: "cannot set transaction read-write
// mode during recovery" (0A000). The primary runs the transaction. pgowl takes only the last mode
// and sends the transaction to a standby, where the client's BEGIN fails.
func TestABeginWhoseModesEndReadOnlyAfterReadWriteIsRefusedByTheStandby(t *testing.T) {
	c := sharedClusterFor(t)
	ctx := timeoutCtx(t, statementTimeout)
	catchUp(t, c)
	o := startOwl(t, c, nil)

	for _, begin := range []string{
		"BEGIN READ WRITE, READ ONLY",
		"START TRANSACTION READ WRITE READ ONLY",
		"BEGIN ISOLATION LEVEL REPEATABLE READ, READ WRITE, READ ONLY",
	} {
		cl := o.connect(t, nil)
		cl.routes(t)
		// The simple protocol sends the transaction as one string; each part is routed with it.
		_, err := cl.Exec(ctx, begin)
		if err == nil {
			var n int
			err = cl.QueryRow(ctx, "SELECT 1").Scan(&n)
		}
		rs := cl.routes(t)
		if err != nil {
			t.Errorf("%q followed by SELECT 1 failed through pgowl: %v; the primary runs it (routed %v)", begin, err, rs)
		}
		for _, r := range rs {
			if r.Role == "standby" {
				t.Errorf("%q: pgowl sent the transaction to a standby (NOTICE %v), which refuses READ WRITE before it reaches READ ONLY", begin, r)
				break
			}
		}
		cl.Exec(ctx, "ROLLBACK")
		cl.routes(t)
	}

	// SET TRANSACTION applies its modes in order too: as the first statement of a BEGIN READ ONLY
	// transaction, "SET TRANSACTION READ WRITE, READ ONLY" runs on the primary and is refused by a
	// standby in the same way.
	cl := o.connect(t, nil)
	cl.routes(t)
	_, err := cl.Exec(ctx, "BEGIN READ ONLY")
	if err == nil {
		_, err = cl.Exec(ctx, "SET TRANSACTION READ WRITE, READ ONLY")
	}
	rs := cl.routes(t)
	if err != nil {
		t.Errorf("BEGIN READ ONLY; SET TRANSACTION READ WRITE, READ ONLY failed through pgowl: %v; the primary runs it (routed %v)", err, rs)
	}
	cl.Exec(ctx, "ROLLBACK")
}
